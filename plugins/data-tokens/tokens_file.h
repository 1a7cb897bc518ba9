/* A pre-tokenized file mapped read-only: raw uint16 tokens as nanoGPT's prepare.py writes
 * them, or llm.c's format (a header of 256 int32: magic 20240520, version 1, token count;
 * then uint16 tokens). Every token is checked against the vocabulary at open. */
#ifndef FULGUR_TOKENS_FILE_H
#define FULGUR_TOKENS_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"

#define TOKENS_LLMC_MAGIC 20240520
#define TOKENS_LLMC_HEADER_BYTES 1024

typedef enum tokens_format { TOKENS_AUTO, TOKENS_NANOGPT, TOKENS_LLMC } tokens_format;

typedef struct tokens_file {
    const uint16_t *tokens;
    int64_t count;
    void *map;
    size_t map_bytes;
} tokens_file;

/* Refuses (FG_INVALID_ARGUMENT, naming path and what is wrong): not a regular file, empty,
 * an odd byte count, a bad llm.c magic, version or token count, a token id >= vocab, fewer
 * than min_tokens tokens. TOKENS_AUTO: llm.c when the file starts with its magic. */
fg_status tokens_file_open(const char *path, tokens_format format, int32_t vocab,
                           int64_t min_tokens, tokens_file *out, fg_error *err);
void tokens_file_close(tokens_file *f);

#endif
