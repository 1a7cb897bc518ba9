/* `fulgur tokenize`'s output: llm.c's token shards, PREFIX_000000.bin, PREFIX_000001.bin, ...
 * in a folder: a header of 256 int32 (magic 20240520, version 1, token count) then the
 * tokens as uint16. A shard is written through a temporary name and renamed into place
 * when full or at the end, with its count, so a shard under its final name is whole. */
#ifndef FG_TOKENIZE_SHARDS_H
#define FG_TOKENIZE_SHARDS_H

#include <stdint.h>
#include <stdio.h>

#include "fulgur/plugin.h"

typedef struct fg_shard_writer {
    const char *dir, *prefix;
    int64_t shard_tokens;   /* tokens a shard holds before the next one starts */
    int index;              /* of the open shard */
    FILE *f;                /* NULL: none open */
    int64_t count;          /* tokens in the open shard */
    int64_t total;          /* tokens written, all shards */
    int shards;             /* shards completed */
    char path[4096], tmp[4200];
} fg_shard_writer;

void fg_shard_writer_init(fg_shard_writer *w, const char *dir, const char *prefix,
                          int64_t shard_tokens);
/* Appends n ids (each below 65536). */
fg_status fg_shard_writer_put(fg_shard_writer *w, const int32_t *ids, size_t n, fg_error *err);
/* Completes the open shard. */
fg_status fg_shard_writer_finish(fg_shard_writer *w, fg_error *err);
/* Removes the open shard's temporary file (after a failure). */
void fg_shard_writer_abandon(fg_shard_writer *w);

#endif
