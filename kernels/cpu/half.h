/* Half-precision storage on the CPU: IEEE binary16 (f16) and bfloat16 (bf16) to and from
 * float32, rounding to nearest even. NaN stays NaN (quietened, sign and top payload bits
 * kept), infinities stay infinite, a value beyond the half type's range rounds to inf,
 * and f16 subnormals are exact both ways. Branch-light, so loops over arrays vectorise.
 * The conversions rely on the default floating-point environment (round to nearest, no
 * flush-to-zero), as every kernel here does. */
#ifndef FG_CPU_HALF_H
#define FG_CPU_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu_kernels.h"

static inline uint32_t fg_half_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float fg_half_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* After F. Giesen's half_to_float: move exponent and mantissa into place, rebias, then fix
 * up inf/NaN (maximal exponent) and zero/subnormal (zero exponent, renormalised by one
 * float subtraction). Every path is computed and one selected: no branch in a loop. */
static inline float fg_f16_to_f32(uint16_t h)
{
    const uint32_t shifted_exp = 0x7c00u << 13;
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    uint32_t exp = shifted_exp & o;
    o += (uint32_t)(127 - 15) << 23;
    uint32_t special = o + ((uint32_t)(128 - 16) << 23); /* inf, NaN */
    uint32_t tiny = fg_half_bits(fg_half_float(o + (1u << 23)) - fg_half_float(113u << 23));
    uint32_t m_special = 0u - (uint32_t)(exp == shifted_exp); /* masks, not branches */
    uint32_t m_tiny = 0u - (uint32_t)(exp == 0);
    o = (special & m_special) | (tiny & m_tiny) | (o & ~(m_special | m_tiny));
    return fg_half_float(o | ((uint32_t)h & 0x8000u) << 16);
}

/* After F. Giesen's float_to_half_fast3_rtne, with every path computed and one selected. */
static inline uint16_t fg_f32_to_f16(float f)
{
    const uint32_t f32_inf = 255u << 23, f16_max = (127u + 16) << 23;
    const uint32_t denorm_magic_bits = ((127u - 15) + (23 - 10) + 1) << 23;
    uint32_t u = fg_half_bits(f);
    uint32_t sign = u & 0x80000000u;
    u ^= sign;
    /* beyond the largest finite half, inf or NaN (quietened, top payload bits kept) */
    uint32_t m_nan = 0u - (uint32_t)(u > f32_inf);
    uint32_t big = ((0x7e00u | ((u >> 13) & 0x3ffu)) & m_nan) | (0x7c00u & ~m_nan);
    /* a half subnormal or zero: the FPU rounds the addition */
    uint32_t tiny = fg_half_bits(fg_half_float(u) + fg_half_float(denorm_magic_bits)) -
                    denorm_magic_bits;
    /* normal: rebias, round half up or (odd mantissa) to even; a carry into inf is right */
    uint32_t normal = (u + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
    uint32_t m_big = 0u - (uint32_t)(u >= f16_max);
    uint32_t m_tiny = (0u - (uint32_t)(u < (113u << 23))) & ~m_big;
    uint32_t o = (big & m_big) | (tiny & m_tiny) | (normal & ~(m_big | m_tiny));
    return (uint16_t)(o | (sign >> 16));
}

static inline float fg_bf16_to_f32(uint16_t b)
{
    return fg_half_float((uint32_t)b << 16);
}

static inline uint16_t fg_f32_to_bf16(float f)
{
    uint32_t u = fg_half_bits(f);
    uint32_t m_nan = 0u - (uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
    uint32_t quiet = (u >> 16) | 0x40u; /* NaN: quiet, never rounded into inf */
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((quiet & m_nan) | (rounded & ~m_nan));
}

/* dst(n) = src(n) widened (exact), vectorised: the _bf16 kernels' blocks (bf16_round.c) */
void fg_cpu_bf16_widen(float *dst, const uint16_t *src, size_t n);
/* dst(n) = src(n) rounded to bf16 as fg_f32_to_bf16 does, by the CPU's best instructions
 * (bf16_round.c): AVX-512 BF16's vcvtneps2bf16 where the CPU has it (f32 subnormals redone
 * in software, so the bits are the same), else the rounding in AVX2 integer ops, else the
 * software rounding vectorised by the compiler. */
void fg_cpu_bf16_round(uint16_t *dst, const float *src, size_t n);
/* rows x cols of src (leading dimension ld_src) rounded into dst (ld_dst) as
 * fg_cpu_bf16_round rounds each row, the path picked once for all rows */
void fg_cpu_bf16_round_rows(uint16_t *dst, size_t ld_dst, const float *src, size_t ld_src,
                            size_t rows, size_t cols);
/* The software rounding alone, and the CPU's own path alone (AVX-512 BF16 or AVX2; -1: this
 * CPU or build has neither; nothing written): tests compare the two. */
void fg_cpu_bf16_round_software(uint16_t *dst, const float *src, size_t n);
int fg_cpu_bf16_round_native(uint16_t *dst, const float *src, size_t n);
/* Which path fg_cpu_bf16_round takes on this CPU. */
#define FG_CPU_BF16_ROUND_SOFTWARE 1
#define FG_CPU_BF16_ROUND_AVX2 2
#define FG_CPU_BF16_ROUND_AVX512BF16 3
int fg_cpu_bf16_round_isa(void);

/* Element types (the values of fg_dtype). */
#define FG_CPU_F32 1
#define FG_CPU_F16 2
#define FG_CPU_BF16 3

/* dst(n) = src(n) converted between FG_CPU_F32, FG_CPU_F16 and FG_CPU_BF16 (the same type:
 * a copy). Parallel over the pool for long arrays; the result does not depend on it.
 * Returns 0, or -1 for a pair of types it does not know. */
int fg_cpu_convert(fg_cpu_pool *pool, void *dst, int dst_type, const void *src, int src_type,
                   size_t n);

#endif
