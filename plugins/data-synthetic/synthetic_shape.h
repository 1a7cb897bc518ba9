/* The `shape` option of the synthetic plugin: "1,28,28" -> rank 3, (1, 28, 28). */
#ifndef FG_SYNTHETIC_SHAPE_H
#define FG_SYNTHETIC_SHAPE_H

#include <stdint.h>

#include "fulgur/plugin.h"
#include "fulgur/types.h"

/* One sample may hold at most this many elements. */
#define SYNTHETIC_MAX_ELEMENTS ((int64_t)1 << 24)

/* Parses comma-separated positive integers (spaces allowed around them), at most
 * FG_MAX_DIMS of them, whose product is <= SYNTHETIC_MAX_ELEMENTS. Errors name the
 * option value and the bad part. */
fg_status synthetic_parse_shape(const char *text, int32_t *rank, int64_t shape[FG_MAX_DIMS],
                                int64_t *elements, fg_error *err);

#endif
