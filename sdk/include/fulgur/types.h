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
    FG_U8 = 7,
    /* ABI 1.9: the two fp8 formats of OCP's FP8 (NVIDIA's Hopper tensor cores), one byte:
     * E4M3 (bias 7, max finite 448, no infinities, NaN 0x7f/0xff) and E5M2 (bias 15, max
     * finite 57344, IEEE infinities and NaNs). Only gemm_fp8 takes them. */
    FG_F8E4M3 = 8,
    FG_F8E5M2 = 9
} fg_dtype;

static inline size_t fg_dtype_size(fg_dtype t)
{
    switch (t) {
    case FG_F32: case FG_I32: return 4;
    case FG_F16: case FG_BF16: return 2;
    case FG_F64: case FG_I64: return 8;
    case FG_U8: case FG_F8E4M3: case FG_F8E5M2: return 1;
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
    case FG_F8E4M3: return "f8e4m3";
    case FG_F8E5M2: return "f8e5m2";
    }
    return "?";
}

/* ABI 1.9: fp8 training's recipe (Transformer Engine's DelayedScaling): which format each
 * tensor of a linear layer's gemms takes, and how a tensor's scale follows from its amax
 * history. */
typedef enum fg_fp8_format {
    FG_FP8_NONE = 0,   /* no fp8 */
    FG_FP8_HYBRID = 1, /* E4M3 weights and activations, E5M2 gradients (TE's HYBRID) */
    FG_FP8_E4M3 = 2    /* E4M3 for all three (TE's E4M3) */
} fg_fp8_format;

typedef enum fg_fp8_amax_algo {
    FG_FP8_AMAX_MAX = 0,        /* the largest amax of the history */
    FG_FP8_AMAX_MOST_RECENT = 1 /* the newest amax */
} fg_fp8_amax_algo;

#define FG_MAX_DIMS 8

#ifdef __cplusplus
}
#endif
#endif
