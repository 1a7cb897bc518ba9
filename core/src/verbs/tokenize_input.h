/* `fulgur tokenize`'s input: the files the command line names (files, folders' regular
 * files, globs; each in sorted order), read as chunks of about `chunk_bytes` that end
 * where splitting cannot change the tokens: after a newline between two printable ASCII
 * characters other than space (no pre-tokenizer word of GPT-2's or Llama 3's pattern spans
 * such a newline, and none looks back past it; ctest text.parity_gpt2 checks it). A chunk that finds no such point grows until one is found or the file ends.
 * Each file is one document. Never more than a chunk (and the bytes carried over to the
 * next) in memory. */
#ifndef FG_TOKENIZE_INPUT_H
#define FG_TOKENIZE_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fulgur/plugin.h"

typedef struct fg_tok_inputs {
    char **paths;
    size_t count, cap;
} fg_tok_inputs;

/* Each arg: a file, a folder (its regular files, sorted, not recursing) or a glob. One that
 * matches nothing is refused, naming it. */
fg_status fg_tok_inputs_list(const char *const *args, int n, fg_tok_inputs *out, fg_error *err);
void fg_tok_inputs_free(fg_tok_inputs *in);

typedef struct fg_tok_chunk {
    char *text;          /* malloc'ed, owned by whoever holds the chunk */
    size_t len;
    size_t file;         /* index in the inputs */
    int64_t offset;      /* of text[0] in the file */
    int doc_start;       /* the chunk starts a document (an end-of-text token before it) */
    int doc_end;         /* the chunk ends a document (its file) */
} fg_tok_chunk;

typedef struct fg_tok_reader {
    const fg_tok_inputs *in;
    size_t chunk_bytes;
    size_t file;         /* the file being read */
    FILE *f;
    int64_t offset;      /* bytes of the file handed out */
    char *carry;         /* bytes read past the last split point */
    size_t carry_len, carry_cap;
    int64_t bytes_read;  /* all files, for progress */
} fg_tok_reader;

void fg_tok_reader_init(fg_tok_reader *r, const fg_tok_inputs *in, size_t chunk_bytes);
/* The next chunk into *c: 1, 0 at the end of the last file, -1 an error (naming the file). */
int fg_tok_reader_next(fg_tok_reader *r, fg_tok_chunk *c, fg_error *err);
void fg_tok_reader_close(fg_tok_reader *r);

#endif
