/* fill, scale, axpy, clamp and sum of squares over flat float ranges. */
#include "bf16_avx512.h"
#include "cpu_kernels.h"
#include "half.h"

typedef struct fg_cpu_ew_ctx {
    float *x;
    const float *src;
    float value;
} fg_cpu_ew_ctx;

static void fg_cpu_fill_range(void *p, size_t b, size_t e)
{
    fg_cpu_ew_ctx *c = p;
    float *x = c->x, v = c->value;
    for (size_t i = b; i < e; i++)
        x[i] = v;
}

static void fg_cpu_scale_range(void *p, size_t b, size_t e)
{
    fg_cpu_ew_ctx *c = p;
    float *x = c->x, a = c->value;
    for (size_t i = b; i < e; i++)
        x[i] *= a;
}

static void fg_cpu_axpy_range(void *p, size_t b, size_t e)
{
    fg_cpu_ew_ctx *c = p;
    float *restrict y = c->x;
    const float *restrict x = c->src;
    float a = c->value;
    for (size_t i = b; i < e; i++)
        y[i] += a * x[i];
}

typedef struct fg_cpu_clamp_ctx {
    float *x;
    float lo, hi;
} fg_cpu_clamp_ctx;

/* As torch.clamp: max with lo first, then min with hi (lo > hi gives hi); NaN stays NaN
 * because both comparisons are false for it. */
static void fg_cpu_clamp_range(void *p, size_t b, size_t e)
{
    fg_cpu_clamp_ctx *c = p;
    float *x = c->x, lo = c->lo, hi = c->hi;
    for (size_t i = b; i < e; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        x[i] = v > hi ? hi : v;
    }
}

void fg_cpu_clamp(fg_cpu_pool *pool, float *x, float lo, float hi, size_t n)
{
    fg_cpu_clamp_ctx c = { x, lo, hi };
    fg_cpu_parallel_for(pool, n, fg_cpu_stream_grain(pool), 16, fg_cpu_clamp_range, &c);
}

void fg_cpu_fill(fg_cpu_pool *pool, float *x, float value, size_t n)
{
    fg_cpu_ew_ctx c = { x, NULL, value };
    fg_cpu_parallel_for(pool, n, fg_cpu_stream_grain(pool), 16, fg_cpu_fill_range, &c);
}

void fg_cpu_scale(fg_cpu_pool *pool, float *x, float alpha, size_t n)
{
    fg_cpu_ew_ctx c = { x, NULL, alpha };
    fg_cpu_parallel_for(pool, n, fg_cpu_stream_grain(pool), 16, fg_cpu_scale_range, &c);
}

void fg_cpu_axpy(fg_cpu_pool *pool, float alpha, const float *x, float *y, size_t n)
{
    fg_cpu_ew_ctx c = { y, x, alpha };
    fg_cpu_parallel_for(pool, n, fg_cpu_stream_grain(pool), 16, fg_cpu_axpy_range, &c);
}

/* y(n) += alpha x(n) on bf16 storage, in f32: blocks widened onto the stack, the f32 axpy's
 * arithmetic, rounded back (the f32 axpy on the widened operands, rounded). */
typedef struct fg_cpu_axpy_bf16_ctx {
    uint16_t *y;
    const uint16_t *x;
    float alpha;
} fg_cpu_axpy_bf16_ctx;

#ifdef FG_CPU_HAVE_AVX512BF16
/* 16 lanes at a time in registers: the f32 axpy's product then sum, rounded */
FG_CPU_BF16_TARGET static void fg_cpu_axpy_bf16_avx512(const fg_cpu_axpy_bf16_ctx *c,
                                                       size_t b, size_t e)
{
    __m512 a = _mm512_set1_ps(c->alpha);
    for (size_t i = b; i < e; i += 16) {
        __mmask16 lanes = fg_cpu_bf16_lanes(i, e);
        __m512 x = fg_cpu_bf16_load16(c->x + i, lanes), y = fg_cpu_bf16_load16(c->y + i, lanes);
        fg_cpu_bf16_store16(c->y + i, _mm512_add_ps(y, _mm512_mul_ps(a, x)), lanes);
    }
}
#endif

static void fg_cpu_axpy_bf16_range(void *p, size_t b, size_t e)
{
    const fg_cpu_axpy_bf16_ctx *c = p;
#ifdef FG_CPU_HAVE_AVX512BF16
    if (fg_cpu_bf16_round_isa() == FG_CPU_BF16_ROUND_AVX512BF16) {
        fg_cpu_axpy_bf16_avx512(c, b, e);
        return;
    }
#endif
    float x[FG_CPU_BF16_BLOCK], y[FG_CPU_BF16_BLOCK];
    for (size_t i = b; i < e; i += FG_CPU_BF16_BLOCK) {
        size_t m = e - i < FG_CPU_BF16_BLOCK ? e - i : FG_CPU_BF16_BLOCK;
        fg_cpu_bf16_widen(x, c->x + i, m);
        fg_cpu_bf16_widen(y, c->y + i, m);
        fg_cpu_ew_ctx f = {y, x, c->alpha};
        fg_cpu_axpy_range(&f, 0, m);
        fg_cpu_bf16_round(c->y + i, y, m);
    }
}

void fg_cpu_axpy_bf16(fg_cpu_pool *pool, float alpha, const uint16_t *x, uint16_t *y, size_t n)
{
    fg_cpu_axpy_bf16_ctx c = {y, x, alpha};
    fg_cpu_parallel_for(pool, n, fg_cpu_stream_grain(pool), 16, fg_cpu_axpy_bf16_range, &c);
}

/* ---- sum of squares: fixed chunks, double partials combined in chunk order ---------- */

typedef struct fg_cpu_sumsq_ctx {
    const float *x;
    size_t n, chunk;
    double *partial; /* one per chunk */
} fg_cpu_sumsq_ctx;

/* Eight interleaved accumulators: a fixed summation order that still pipelines. */
static double fg_cpu_sumsq_span(const float *x, size_t n)
{
    double acc[8] = { 0 };
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += (double)x[i + j] * (double)x[i + j];
    for (; i < n; i++)
        acc[0] += (double)x[i] * (double)x[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static void fg_cpu_sumsq_range(void *p, size_t b, size_t e)
{
    fg_cpu_sumsq_ctx *c = p;
    for (size_t k = b; k < e; k++) {
        size_t lo = k * c->chunk, hi = lo + c->chunk < c->n ? lo + c->chunk : c->n;
        c->partial[k] = fg_cpu_sumsq_span(c->x + lo, hi - lo);
    }
}

double fg_cpu_sum_squares(fg_cpu_pool *pool, const float *x, size_t n)
{
    double partial[FG_CPU_MAX_CHUNKS];
    size_t chunk = fg_cpu_reduce_chunk(n, 8192);
    size_t chunks = (n + chunk - 1) / chunk;
    fg_cpu_sumsq_ctx c = { x, n, chunk, partial };
    fg_cpu_parallel_for(pool, chunks, (FG_CPU_GRAIN + chunk - 1) / chunk, 1,
                        fg_cpu_sumsq_range, &c);
    double total = 0.0;
    for (size_t k = 0; k < chunks; k++)
        total += partial[k];
    return total;
}
