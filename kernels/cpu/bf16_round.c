/* Blocks of bf16 widened to f32 (exact: a shift), and blocks of f32 results rounded into
 * bf16 storage by the CPU's best instructions: AVX-512 BF16's vcvtneps2bf16 where the CPU has
 * it, else the software rounding written for AVX2, else half.h's fg_f32_to_bf16 in a loop
 * (AVX-512F / AVX2 / baseline clones). The bits are the same on every path: vcvtneps2bf16
 * rounds to nearest even and quietens NaN as fg_f32_to_bf16 does, but flushes f32 subnormal
 * inputs to zero, so a vector holding one is redone in software. The path is picked once, by
 * cpuid (a relaxed atomic: no lock per block). */
#include <stdatomic.h>

#include "bf16_avx512.h"
#include "half.h"

/* The clones are static: target_clones on an external function exports its resolver from
 * the plugin (arch.plugin_exports), so the entry points below call these. */
FG_CPU_VECTOR_CLONES static void widen(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = fg_bf16_to_f32(src[i]);
}

FG_CPU_VECTOR_CLONES static void round_software(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = fg_f32_to_bf16(src[i]);
}

void fg_cpu_bf16_widen(float *dst, const uint16_t *src, size_t n)
{
    widen(dst, src, n);
}

void fg_cpu_bf16_round_software(uint16_t *dst, const float *src, size_t n)
{
    round_software(dst, src, n);
}

#ifdef FG_CPU_HAVE_AVX512BF16
/* The software rounding written for AVX2 (half the time of the compiler's own
 * vectorisation of fg_f32_to_bf16, plugins/backend-cpu/README.md): 8 lanes of
 * (u + 0x7fff + lsb) >> 16, NaN lanes quietened instead, packed to 16 bits. */
__attribute__((target("avx2"))) static __m256i round8_avx2(__m256i u)
{
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000), quiet = _mm256_set1_epi32(0x40);
    __m256i high = _mm256_srli_epi32(u, 16);
    __m256i lsb = _mm256_and_si256(high, one);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), lsb), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    return _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
}

__attribute__((target("avx2"))) static void round_avx2(uint16_t *dst, const float *src,
                                                      size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = round8_avx2(_mm256_loadu_si256((const __m256i *)(const void *)(src + i)));
        __m256i b =
            round8_avx2(_mm256_loadu_si256((const __m256i *)(const void *)(src + i + 8)));
        /* packus works per 128-bit lane: a0 b0 a1 b1, put back in order */
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), packed);
    }
    if (i < n)
        fg_cpu_bf16_round_software(dst + i, src + i, n - i);
}

FG_CPU_BF16_TARGET static void round_avx512bf16(uint16_t *dst, const float *src, size_t n)
{
    fg_cpu_bf16_round_avx512(dst, src, n);
}

FG_CPU_BF16_TARGET static void round_rows_avx512bf16(uint16_t *dst, size_t ld_dst,
                                                     const float *src, size_t ld_src,
                                                     size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++)
        fg_cpu_bf16_round_avx512(dst + r * ld_dst, src + r * ld_src, cols);
}
#endif

int fg_cpu_bf16_round_native(uint16_t *dst, const float *src, size_t n)
{
#ifdef FG_CPU_HAVE_AVX512BF16
    int isa = fg_cpu_bf16_round_isa();
    if (isa == FG_CPU_BF16_ROUND_AVX512BF16) {
        round_avx512bf16(dst, src, n);
        return 0;
    }
    if (isa == FG_CPU_BF16_ROUND_AVX2) {
        round_avx2(dst, src, n);
        return 0;
    }
#endif
    (void)dst;
    (void)src;
    (void)n;
    return -1;
}

int fg_cpu_bf16_round_isa(void)
{
    static atomic_int isa; /* 0: not read yet */
    int level = atomic_load_explicit(&isa, memory_order_relaxed);
    if (level)
        return level;
    level = FG_CPU_BF16_ROUND_SOFTWARE;
#ifdef FG_CPU_HAVE_AVX512BF16
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw"))
        level = FG_CPU_BF16_ROUND_AVX512BF16;
    else if (__builtin_cpu_supports("avx2"))
        level = FG_CPU_BF16_ROUND_AVX2;
#endif
    atomic_store_explicit(&isa, level, memory_order_relaxed);
    return level;
}

void fg_cpu_bf16_round(uint16_t *dst, const float *src, size_t n)
{
    if (fg_cpu_bf16_round_native(dst, src, n) != 0)
        fg_cpu_bf16_round_software(dst, src, n);
}

void fg_cpu_bf16_round_rows(uint16_t *dst, size_t ld_dst, const float *src, size_t ld_src,
                            size_t rows, size_t cols)
{
#ifdef FG_CPU_HAVE_AVX512BF16
    if (fg_cpu_bf16_round_isa() == FG_CPU_BF16_ROUND_AVX512BF16) {
        round_rows_avx512bf16(dst, ld_dst, src, ld_src, rows, cols);
        return;
    }
#endif
    for (size_t r = 0; r < rows; r++)
        fg_cpu_bf16_round(dst + r * ld_dst, src + r * ld_src, cols);
}
