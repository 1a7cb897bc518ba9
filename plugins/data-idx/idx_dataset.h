/* One split of an IDX dataset held in memory: images as bytes, labels as int32, and
 * the byte -> float table read() applies. Read-only after idx_dataset_open, so any
 * number of threads may call idx_dataset_read at once. */
#ifndef FG_IDX_DATASET_H
#define FG_IDX_DATASET_H

#include <stdint.h>

#include "fulgur/data.h"

/* Which files and which part of them make a split. */
typedef struct idx_split_source {
    const char *name;        /* "train", "val", "test": for messages */
    const char *images_path;
    const char *labels_path;
    double first;            /* the items [first * n, last * n) of the files */
    double last;
} idx_split_source;

/* How a pixel byte becomes a float, and what labels may be. */
typedef struct idx_transform {
    int normalize; /* (x / 255 - mean) / std when set, x / 255 otherwise */
    double mean;
    double std;
    int64_t num_classes;
} idx_transform;

typedef struct idx_dataset {
    const char *split_name;
    uint8_t *images_owner; /* the whole images file */
    const uint8_t *images; /* (length, rows, cols): this split's first item */
    int32_t *labels;       /* (length,) */
    int64_t length;
    int64_t rows;
    int64_t cols;
    float lut[256];        /* pixel byte -> sample value */
    int table_is_div255;   /* lut[b] == (float)b / 255.0f for every b */
} idx_dataset;

/* Reads both files, checks they agree and every label is < num_classes, keeps the
 * split's items. */
fg_status idx_dataset_open(const idx_split_source *src, const idx_transform *tf,
                           idx_dataset **out, fg_error *err);
void idx_dataset_close(idx_dataset *ds);

/* samples: (count, 1, rows, cols) float; labels: (count,) or NULL. */
fg_status idx_dataset_read(const idx_dataset *ds, const int64_t *indices, int count,
                           float *samples, int32_t *labels, fg_error *err);

void idx_dataset_info(const idx_dataset *ds, int64_t num_classes, fg_dataset_info *info);

#endif
