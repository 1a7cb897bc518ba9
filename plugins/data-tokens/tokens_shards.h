/* A split's tokens in one file or in many: a name with a glob (train_file = out/train_*.bin,
 * `fulgur tokenize`'s shards) opens every match, in name order, as one token stream. Each
 * shard is a tokens_file (checked at open, read with pread a window at a time, never
 * mapped); a window may run from one shard into the next, as llm.c's shards follow each
 * other (each document starts with its end-of-text token). */
#ifndef FULGUR_TOKENS_SHARDS_H
#define FULGUR_TOKENS_SHARDS_H

#include "tokens_file.h"

typedef struct tokens_shards {
    tokens_file *files;
    int64_t *first;  /* the stream offset of each file's first token */
    int count;
    int64_t total;   /* tokens in all files */
} tokens_shards;

/* name without * ? [: that one file (min_tokens as tokens_file_open). With one: every
 * match; refused when none matches (naming key and pattern) or all together hold fewer
 * than min_tokens. */
fg_status tokens_shards_open(const char *key, const char *name, tokens_format format,
                             int32_t vocab, int64_t min_tokens, tokens_shards *out,
                             fg_error *err);
void tokens_shards_close(tokens_shards *s);
/* Tokens [start, start + n) of the stream (fg_token_fetch). Thread-safe. */
fg_status tokens_shards_read(void *shards, int64_t start, int64_t n, void *out, fg_error *err);

#endif
