/* Reading one IDX file (the MNIST format) into memory, validated at the border.
 *
 * Layout: a big-endian 32-bit magic 0x000008RR (0x08: unsigned bytes, RR: rank), RR
 * big-endian 32-bit dimensions, then prod(dims) bytes. The file may be gzip-compressed
 * (detected by the magic bytes 1f 8b, not by the name). */
#ifndef FG_IDX_FILE_H
#define FG_IDX_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"

/* Where the Debian package dataset-fashion-mnist puts its files: the plugin's defaults. */
#define IDX_FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define IDX_FASHION_TRAIN_IMAGES "train-images-idx3-ubyte.gz"
#define IDX_FASHION_TRAIN_LABELS "train-labels-idx1-ubyte.gz"
#define IDX_FASHION_TEST_IMAGES "t10k-images-idx3-ubyte.gz"
#define IDX_FASHION_TEST_LABELS "t10k-labels-idx1-ubyte.gz"

#define IDX_MAX_RANK 3
/* One item may hold at most this many bytes (rows * cols for images). */
#define IDX_MAX_ITEM_BYTES ((int64_t)1 << 24)

/* The whole content of one IDX file: count items of item_bytes each. */
typedef struct idx_array {
    uint8_t *data;                /* (count, dims[1], ..., dims[rank-1]), malloc'd */
    int32_t rank;
    int64_t dims[IDX_MAX_RANK];   /* dims[0] is the item count */
    int64_t count;
    int64_t item_bytes;           /* product of dims[1..rank-1]; 1 for rank 1 */
} idx_array;

/* Reads and validates `path`: the magic (unsigned bytes), the rank (must be
 * expected_rank), every dimension > 0, item size <= IDX_MAX_ITEM_BYTES, and exactly
 * the header's count of items (no truncation, no trailing data). `what` names the
 * items in messages ("images", "labels"). Missing file: FG_NOT_FOUND; anything else
 * wrong: FG_INVALID_ARGUMENT; each with a message naming the path and the fault. */
fg_status idx_file_read(const char *path, int expected_rank, const char *what, idx_array *out,
                        fg_error *err);

void idx_array_free(idx_array *a);

/* Reads only the header of `path` (magic, rank, dimensions): out->data stays NULL. */
fg_status idx_file_read_header(const char *path, int expected_rank, const char *what,
                               idx_array *out, fg_error *err);

/* A gzip file holds whole members and nothing after them (idx_gzip_tail.c). */
fg_status idx_gzip_check_tail(const char *path, fg_error *err);

/* True when `name` (a bare file name) is one of the four Fashion-MNIST file names. */
int idx_is_fashion_mnist_name(const char *name);

#endif
