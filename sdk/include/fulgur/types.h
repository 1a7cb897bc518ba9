/* Element types and small shared value types of the plugin ABI. */
#ifndef FULGUR_TYPES_H
#define FULGUR_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fg_dtype {
    FG_F32 = 1,
    FG_F16 = 2,
    FG_BF16 = 3,
    FG_F64 = 4,
    FG_I32 = 5,
    FG_I64 = 6,
    FG_U8 = 7
} fg_dtype;

static inline size_t fg_dtype_size(fg_dtype t)
{
    switch (t) {
    case FG_F32: case FG_I32: return 4;
    case FG_F16: case FG_BF16: return 2;
    case FG_F64: case FG_I64: return 8;
    case FG_U8: return 1;
    }
    return 0;
}

static inline const char *fg_dtype_name(fg_dtype t)
{
    switch (t) {
    case FG_F32: return "f32";
    case FG_F16: return "f16";
    case FG_BF16: return "bf16";
    case FG_F64: return "f64";
    case FG_I32: return "i32";
    case FG_I64: return "i64";
    case FG_U8: return "u8";
    }
    return "?";
}

#define FG_MAX_DIMS 8

#ifdef __cplusplus
}
#endif
#endif
