/* Blocks of f32 results rounded into bf16 storage, by the CPU's best instruction: AVX-512
 * BF16's vcvtneps2bf16 where the CPU has it, else half.h's fg_f32_to_bf16 in a loop the
 * compiler vectorises (AVX-512F / AVX2 clones). The bits are the same on every path:
 * vcvtneps2bf16 rounds to nearest even and quietens NaN as fg_f32_to_bf16 does, but flushes
 * f32 subnormal inputs to zero, so a vector holding one is redone in software. The path is
 * picked once, by cpuid (a relaxed atomic: no lock per block). */
#include <stdatomic.h>

#include "half.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && \
    (__GNUC__ >= 10 || defined(__clang__))
#include <immintrin.h>
#define FG_BF16_HAVE_AVX512BF16 1
#endif

FG_CPU_VECTOR_CLONES void fg_cpu_bf16_round_software(uint16_t *dst, const float *src,
                                                     size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = fg_f32_to_bf16(src[i]);
}

#ifdef FG_BF16_HAVE_AVX512BF16
/* 16 lanes: the instruction's rounding, lanes whose input is an f32 subnormal (exponent
 * field 0, not zero) fixed up by the software rounding */
__attribute__((target("avx512f,avx512bf16,avx512vl,avx512bw"))) static void
round_avx512bf16(uint16_t *dst, const float *src, size_t n)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    const __m512i min_normal = _mm512_set1_epi32(0x00800000);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(src + i);
        __m512i a = _mm512_and_si512(_mm512_castps_si512(v), abs_mask);
        __mmask16 sub = _mm512_cmplt_epu32_mask(a, min_normal) &
                        _mm512_test_epi32_mask(a, a);
        if (sub) {
            fg_cpu_bf16_round_software(dst + i, src + i, 16);
            continue;
        }
        __m256bh h = _mm512_cvtneps_pbh(v);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), (__m256i)h);
    }
    if (i < n)
        fg_cpu_bf16_round_software(dst + i, src + i, n - i);
}
#endif

int fg_cpu_bf16_round_native(uint16_t *dst, const float *src, size_t n)
{
#ifdef FG_BF16_HAVE_AVX512BF16
    if (fg_cpu_bf16_round_isa() == FG_CPU_BF16_ROUND_AVX512BF16) {
        round_avx512bf16(dst, src, n);
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
#ifdef FG_BF16_HAVE_AVX512BF16
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw"))
        level = FG_CPU_BF16_ROUND_AVX512BF16;
#endif
    atomic_store_explicit(&isa, level, memory_order_relaxed);
    return level;
}

void fg_cpu_bf16_round(uint16_t *dst, const float *src, size_t n)
{
    if (fg_cpu_bf16_round_native(dst, src, n) != 0)
        fg_cpu_bf16_round_software(dst, src, n);
}
