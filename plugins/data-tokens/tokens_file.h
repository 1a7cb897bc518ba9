/* A pre-tokenized file: raw uint16 tokens as nanoGPT's prepare.py writes them, or llm.c's
 * format (a header of 256 int32: magic 20240520, version 1, token count; then uint16
 * tokens). Every token is checked against the vocabulary at open. The file is read with
 * pread, a window at a time, never mapped: a file truncated or rewritten during the run
 * reads short and fails the read naming it, where a mapping would end the process with
 * SIGBUS. */
#ifndef FULGUR_TOKENS_FILE_H
#define FULGUR_TOKENS_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"

#define TOKENS_LLMC_MAGIC 20240520
#define TOKENS_LLMC_HEADER_BYTES 1024

typedef enum tokens_format { TOKENS_AUTO, TOKENS_NANOGPT, TOKENS_LLMC } tokens_format;

typedef struct tokens_file {
    char *path;
    int fd;          /* -1 when closed */
    int64_t offset;  /* bytes before the first token: 0, or llm.c's header */
    int64_t count;   /* tokens */
    int64_t bytes;   /* the file's size at open */
} tokens_file;

/* Refuses (FG_INVALID_ARGUMENT, naming path and what is wrong): not a regular file, empty,
 * an odd byte count, a bad llm.c magic, version or token count, a token id >= vocab, fewer
 * than min_tokens tokens. TOKENS_AUTO: llm.c when the file starts with its magic. */
fg_status tokens_file_open(const char *path, tokens_format format, int32_t vocab,
                           int64_t min_tokens, tokens_file *out, fg_error *err);
void tokens_file_close(tokens_file *f);

/* Tokens [start, start + n) into out (native uint16). A short read (the file truncated
 * since open) fails with FG_INVALID_ARGUMENT naming the file. Thread-safe (pread). */
fg_status tokens_file_read(void *file, int64_t start, int64_t n, void *out, fg_error *err);

#endif
