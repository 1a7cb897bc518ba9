/* Dropout with a counter-based generator: element i's keep decision is a pure function of
 * (seed, offset + i) — splitmix64's finaliser over a seed-derived key plus the counter —
 * so any partition of the range, any device and any replay draw the same mask. */
#include "cpu_kernels.h"

static inline uint64_t fg_cpu_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* 24-bit threshold: keep when the draw's top 24 bits are >= p * 2^24. */
static inline uint32_t fg_cpu_dropout_threshold(float p)
{
    if (p <= 0.0f)
        return 0;
    if (p >= 1.0f)
        return 1u << 24;
    return (uint32_t)((double)p * 16777216.0 + 0.5);
}

static inline int fg_cpu_keep(uint64_t key, uint64_t index, uint32_t threshold)
{
    uint64_t z = fg_cpu_mix64(key + index * 0x9E3779B97F4A7C15ull);
    return (uint32_t)(z >> 40) >= threshold;
}

static inline uint64_t fg_cpu_dropout_key(uint64_t seed)
{
    return fg_cpu_mix64(seed ^ 0x6A09E667F3BCC909ull);
}

int fg_cpu_dropout_keep(uint64_t seed, uint64_t index, float p)
{
    return fg_cpu_keep(fg_cpu_dropout_key(seed), index, fg_cpu_dropout_threshold(p));
}

typedef struct fg_cpu_dropout_ctx {
    uint64_t key, offset;
    uint32_t threshold;
    float scale;
    const float *x;
    float *y;
    uint8_t *mask;
    const uint8_t *mask_in;
} fg_cpu_dropout_ctx;

static void fg_cpu_dropout_forward_range(void *p, size_t b, size_t e)
{
    fg_cpu_dropout_ctx *c = p;
    for (size_t i = b; i < e; i++) {
        int keep = fg_cpu_keep(c->key, c->offset + i, c->threshold);
        float v = c->x[i] * c->scale; /* unconditional load: the select stays branch-free */
        c->mask[i] = (uint8_t)keep;
        c->y[i] = keep ? v : 0.0f;
    }
}

static void fg_cpu_dropout_backward_range(void *p, size_t b, size_t e)
{
    fg_cpu_dropout_ctx *c = p;
    for (size_t i = b; i < e; i++) {
        float v = c->x[i] * c->scale;
        c->y[i] = c->mask_in[i] ? v : 0.0f;
    }
}

static float fg_cpu_dropout_scale(float p)
{
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

void fg_cpu_dropout_forward(fg_cpu_pool *pool, float p, uint64_t seed, uint64_t offset,
                            const float *x, float *y, uint8_t *mask, size_t n)
{
    fg_cpu_dropout_ctx c = { fg_cpu_dropout_key(seed), offset, fg_cpu_dropout_threshold(p),
                             fg_cpu_dropout_scale(p), x, y, mask, NULL };
    fg_cpu_parallel_for(pool, n, FG_CPU_GRAIN / 4, 64, fg_cpu_dropout_forward_range, &c);
}

void fg_cpu_dropout_backward(fg_cpu_pool *pool, float p, const uint8_t *mask,
                             const float *dy, float *dx, size_t n)
{
    fg_cpu_dropout_ctx c = { 0, 0, 0, fg_cpu_dropout_scale(p), dy, dx, NULL, mask };
    fg_cpu_parallel_for(pool, n, fg_cpu_stream_grain(pool), 64, fg_cpu_dropout_backward_range,
                        &c);
}
