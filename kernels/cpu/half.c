/* Array conversions between float32 and the half types, on the pool. */
#include "half.h"

typedef struct convert_job {
    void *dst;
    const void *src;
    int dst_type, src_type;
} convert_job;

/* f16 in compiler-vectorised clones (branch-free scalar conversions); bf16 through
 * bf16_round.c: widened in clones, rounded by vcvtneps2bf16 or AVX2 where the CPU has them
 * (the same bits as the scalar fg_f32_to_bf16). The plain loops ran at SSE2 width and were a
 * tenth of a bf16-mixed GPT's step on an avx512_bf16 CPU (tests/bench/RESULTS.md). */
FG_CPU_VECTOR_CLONES static void f16_to_f32(float *d, const uint16_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = fg_f16_to_f32(s[i]);
}

FG_CPU_VECTOR_CLONES static void f32_to_f16(uint16_t *d, const float *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = fg_f32_to_f16(s[i]);
}

static void to_f32(float *d, const uint16_t *s, int type, size_t n)
{
    if (type == FG_CPU_F16)
        f16_to_f32(d, s, n);
    else
        fg_cpu_bf16_widen(d, s, n);
}

static void from_f32(uint16_t *d, const float *s, int type, size_t n)
{
    if (type == FG_CPU_F16)
        f32_to_f16(d, s, n);
    else
        fg_cpu_bf16_round(d, s, n);
}

static size_t elem_size(int type)
{
    return type == FG_CPU_F32 ? 4 : 2;
}

/* Half to half goes through f32 (which holds both exactly) in blocks on the stack, so it
 * rounds once. */
static void half_to_half(uint16_t *d, int dt, const uint16_t *s, int st, size_t n)
{
    float block[256];
    for (size_t i = 0; i < n; i += 256) {
        size_t m = n - i < 256 ? n - i : 256;
        to_f32(block, s + i, st, m);
        from_f32(d + i, block, dt, m);
    }
}

static void convert_range(void *ctx, size_t begin, size_t end)
{
    const convert_job *j = ctx;
    size_t n = end - begin;
    char *d = (char *)j->dst + begin * elem_size(j->dst_type);
    const char *s = (const char *)j->src + begin * elem_size(j->src_type);
    if (j->dst_type == j->src_type)
        memcpy(d, s, n * elem_size(j->dst_type));
    else if (j->dst_type == FG_CPU_F32)
        to_f32((float *)d, (const uint16_t *)s, j->src_type, n);
    else if (j->src_type == FG_CPU_F32)
        from_f32((uint16_t *)d, (const float *)s, j->dst_type, n);
    else
        half_to_half((uint16_t *)d, j->dst_type, (const uint16_t *)s, j->src_type, n);
}

static int known(int type)
{
    return type == FG_CPU_F32 || type == FG_CPU_F16 || type == FG_CPU_BF16;
}

int fg_cpu_convert(fg_cpu_pool *pool, void *dst, int dst_type, const void *src, int src_type,
                   size_t n)
{
    if (!known(dst_type) || !known(src_type))
        return -1;
    if (n == 0)
        return 0;
    convert_job j = {dst, src, dst_type, src_type};
    fg_cpu_parallel_for(pool, n, fg_cpu_stream_grain(pool), 64, convert_range, &j);
    return 0;
}
