/* Checkpoint files: safetensors, written atomically and read defensively.
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON header, then the data.
 * The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the start of the data) and holds string metadata under
 * "__metadata__". The writer pads the header with spaces to a multiple of 8 and packs the
 * tensors in the caller's order.
 *
 * The reader trusts nothing: every header field is checked against the file before a data
 * byte is read, and every error names the file and the tensor or field at fault. */
#ifndef FG_CHECKPOINT_H
#define FG_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fulgur/plugin.h"
#include "fulgur/types.h"

/* Largest header the reader accepts: far above any real model's, far below a memory bomb. */
#define FG_CKPT_MAX_HEADER ((uint64_t)100 << 20)

typedef struct fg_ckpt_tensor {
    const char *name;
    fg_dtype dtype;
    int rank;
    int64_t shape[FG_MAX_DIMS];
    const void *data; /* numel * fg_dtype_size(dtype) bytes, little-endian */
} fg_ckpt_tensor;

/* Writes to PATH.tmp.<pid> in the same folder, fsyncs the file, renames it over PATH and
 * fsyncs the folder: a crash leaves either the old PATH or the new one, never a torn one.
 * Tensor names must be unique, non-empty and not "__metadata__"; metadata keys unique.
 * Every string must be valid UTF-8 (JSON requires it). */
fg_status fg_ckpt_write_atomic(const char *path, const fg_ckpt_tensor *tensors, size_t count,
                               const char *const *meta_keys, const char *const *meta_values,
                               size_t meta_count, fg_error *err);

/* Is this file name a leftover temporary of fg_ckpt_write_atomic (".tmp." in its last
 * path component)? Resume logic skips those. */
int fg_ckpt_is_temporary(const char *filename);

typedef struct fg_ckpt fg_ckpt;

/* Opens PATH and validates its whole header (see checkpoint_header.c for the rules). The
 * data is read on demand with pread: an open fg_ckpt holds the header, never the data, and
 * several threads may read tensors from it at once. */
fg_status fg_ckpt_open(const char *path, fg_ckpt **out, fg_error *err);
void fg_ckpt_close(fg_ckpt *c);

const char *fg_ckpt_path(const fg_ckpt *c);
/* NULL when absent. */
const char *fg_ckpt_meta(const fg_ckpt *c, const char *key);
size_t fg_ckpt_meta_count(const fg_ckpt *c);
/* Metadata in header order. */
const char *fg_ckpt_meta_key(const fg_ckpt *c, size_t i);
size_t fg_ckpt_tensor_count(const fg_ckpt *c);
/* In file order of data_offsets. */
const char *fg_ckpt_tensor_name(const fg_ckpt *c, size_t i);

/* Finds the tensor, checks its dtype and shape against the caller's (FG_NOT_FOUND,
 * FG_INCOMPATIBLE; the message names the tensor, what was expected and what was found)
 * and reads its bytes into dst. shape may be NULL when rank is 0. */
fg_status fg_ckpt_read_tensor(fg_ckpt *c, const char *name, fg_dtype dtype, int rank,
                              const int64_t *shape, void *dst, fg_error *err);

/* Asks fg_ckpt_read_tensor to refuse float tensors holding NaN or inf (off by default: the
 * file format carries any value; the trainer refuses them unless allowed). */
void fg_ckpt_refuse_nonfinite(fg_ckpt *c, int refuse);

/* The trainer metadata of a fulgur checkpoint (format fulgur-checkpoint-1), each field's
 * type and range; called by fg_ckpt_open. Files of other formats pass. */
fg_status fg_ckpt_check_trainer_meta(const fg_ckpt *c, fg_error *err);

/* FG_INVALID_ARGUMENT naming the tensor, the count and the first index when the float data
 * holds a NaN or an inf; integer dtypes pass. */
fg_status fg_ckpt_check_finite(const fg_ckpt *c, const char *name, fg_dtype dtype,
                               const void *data, size_t bytes, fg_error *err);

/* Describes a tensor without reading it; shape has room for FG_MAX_DIMS. Any output
 * pointer may be NULL. */
fg_status fg_ckpt_tensor_info(const fg_ckpt *c, const char *name, fg_dtype *dtype, int *rank,
                              int64_t *shape, fg_error *err);

/* ---- internal: shared by checkpoint_write.c, checkpoint_read.c, checkpoint_header.c ---- */

/* The safetensors dtype tags fulgur knows, in fg_dtype order. */
static inline const char *fg_ckpt_dtype_tag(fg_dtype t)
{
    switch (t) {
    case FG_F32: return "F32";
    case FG_F16: return "F16";
    case FG_BF16: return "BF16";
    case FG_F64: return "F64";
    case FG_I32: return "I32";
    case FG_I64: return "I64";
    case FG_U8: return "U8";
    case FG_F8E4M3: return "F8_E4M3"; /* never written: gemm_fp8's operands only */
    case FG_F8E5M2: return "F8_E5M2";
    }
    return NULL;
}

#define FG_CKPT_DTYPE_TAGS "F32, F16, BF16, F64, I32, I64, U8"

/* 1 and *out set when tag is a known dtype tag, else 0. */
static inline int fg_ckpt_dtype_parse(const char *tag, fg_dtype *out)
{
    for (int t = FG_F32; t <= FG_U8; t++) {
        if (strcmp(tag, fg_ckpt_dtype_tag((fg_dtype)t)) == 0) {
            *out = (fg_dtype)t;
            return 1;
        }
    }
    return 0;
}

/* numel * dtype size of a shape, 0 and *bytes set when it fits in int64, -1 on overflow or
 * a negative extent. */
static inline int fg_ckpt_byte_size(fg_dtype dtype, int rank, const int64_t *shape,
                                    int64_t *bytes)
{
    int64_t n = (int64_t)fg_dtype_size(dtype);
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0 || __builtin_mul_overflow(n, shape[d], &n))
            return -1;
    }
    *bytes = n;
    return 0;
}

/* "(256, 784)"; "()" for a scalar. Truncates to cap. */
static inline const char *fg_ckpt_format_shape(char *buf, size_t cap, int rank,
                                               const int64_t *shape)
{
    size_t used = 0;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < rank && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "",
                                 (long long)shape[d]);
    if (used < cap)
        snprintf(buf + used, cap - used, ")");
    return buf;
}

/* One tensor of a validated header. */
typedef struct fg_ckpt_entry {
    char *name;
    fg_dtype dtype;
    int rank;
    int64_t shape[FG_MAX_DIMS];
    uint64_t begin, end; /* relative to the start of the data section; end - begin = bytes */
} fg_ckpt_entry;

/* A header that passed every check: entries sorted by data_offsets. */
typedef struct fg_ckpt_header {
    fg_ckpt_entry *entries;
    size_t count;
    char **meta_keys;
    char **meta_values;
    size_t meta_count;
} fg_ckpt_header;

/* Parses and validates `len` bytes of header JSON against a data section of data_size
 * bytes; `path` names the file in messages. On failure *out is left empty. */
fg_status fg_ckpt_header_parse(const char *path, const char *text, size_t len,
                               uint64_t data_size, fg_ckpt_header *out, fg_error *err);
void fg_ckpt_header_free(fg_ckpt_header *h);

#endif
