/* The text plugin's corpus: UTF-8 files read as bytes, split into train and validation by
 * fraction at a fixed seed. */
#ifndef FULGUR_TEXT_CORPUS_H
#define FULGUR_TEXT_CORPUS_H

#include <stdint.h>

#include "fulgur/plugin.h"

/* The corpus is cut into chunks of this many bytes; a seeded shuffle of the chunks sends
 * round(chunks * val_fraction) of them to validation, so validation samples the whole
 * text rather than its last pages. */
#define TEXT_CHUNK_BYTES 4096

typedef struct text_bytes {
    uint8_t *bytes;
    int64_t count;
} text_bytes;

typedef struct text_split_spec {
    const char *dir;        /* relative names are resolved against it */
    const char *files;      /* comma-separated names */
    double val_fraction;    /* [0, 0.5] */
    uint64_t split_seed;
} text_split_spec;

/* train gets the chunks the shuffle keeps, val the others, each in corpus order. */
fg_status text_corpus_split(const text_split_spec *spec, text_bytes *train, text_bytes *val,
                            fg_error *err);

/* Every file of the comma-separated list, concatenated. */
fg_status text_corpus_read(const char *dir, const char *files, text_bytes *out,
                          fg_error *err);

void text_bytes_free(text_bytes *b);

#endif
