/* AVX-512 BF16 widening and rounding, inlined into callers compiled for FG_CPU_BF16_TARGET,
 * so that a _bf16 kernel widens, computes in f32 and rounds without a call per block
 * (bf16_round.c's entry points, elementwise.c's axpy; gemm_bf16_tile.c takes the target).
 * The build has them where FG_CPU_HAVE_AVX512BF16 is defined; a caller runs them only where
 * fg_cpu_bf16_round_isa() says FG_CPU_BF16_ROUND_AVX512BF16. The bits are half.h's:
 * widening is exact, and the rounding is vcvtneps2bf16's (to nearest even, NaN quietened),
 * with a vector holding an f32 subnormal, which the instruction flushes, redone by
 * fg_cpu_bf16_round_software. */
#ifndef FG_CPU_BF16_AVX512_H
#define FG_CPU_BF16_AVX512_H

#include "half.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && \
    (__GNUC__ >= 10 || defined(__clang__))
#include <immintrin.h>
#define FG_CPU_HAVE_AVX512BF16 1
#define FG_CPU_BF16_TARGET __attribute__((target("avx512f,avx512bf16,avx512vl,avx512bw")))

/* The lanes of [i, n) in a vector of 16 */
FG_CPU_BF16_TARGET static inline __attribute__((always_inline)) __mmask16
fg_cpu_bf16_lanes(size_t i, size_t n)
{
    return n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
}

/* Lanes of src widened: a zero-extension and a shift (masked lanes read nothing, are 0) */
FG_CPU_BF16_TARGET static inline __attribute__((always_inline)) __m512
fg_cpu_bf16_load16(const uint16_t *src, __mmask16 lanes)
{
    __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, src));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

/* Lanes of v rounded into dst; a vector holding an f32 subnormal in software */
FG_CPU_BF16_TARGET static inline __attribute__((always_inline)) void
fg_cpu_bf16_store16(uint16_t *dst, __m512 v, __mmask16 lanes)
{
    __m512i a = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
    __mmask16 sub = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(0x00800000)) &
                    _mm512_test_epi32_mask(a, a);
    if (sub & lanes) {
        float t[16];
        _mm512_storeu_ps(t, v);
        fg_cpu_bf16_round_software(dst, t, (size_t)__builtin_popcount(lanes));
        return;
    }
    _mm256_mask_storeu_epi16(dst, lanes, (__m256i)_mm512_cvtneps_pbh(v));
}

/* dst(n) = src(n) widened, the last n % 16 under a mask */
FG_CPU_BF16_TARGET static inline __attribute__((always_inline)) void
fg_cpu_bf16_widen_avx512(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 lanes = fg_cpu_bf16_lanes(i, n);
        _mm512_mask_storeu_ps(dst + i, lanes, fg_cpu_bf16_load16(src + i, lanes));
    }
}

/* dst(n) = src(n) rounded, the last n % 16 under a mask */
FG_CPU_BF16_TARGET static inline __attribute__((always_inline)) void
fg_cpu_bf16_round_avx512(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 lanes = fg_cpu_bf16_lanes(i, n);
        fg_cpu_bf16_store16(dst + i, _mm512_maskz_loadu_ps(lanes, src + i), lanes);
    }
}
#endif

#endif
