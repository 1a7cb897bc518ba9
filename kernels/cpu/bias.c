/* Bias broadcast over (rows, cols, spatial) and its gradient. */
#include "cpu_kernels.h"
#include "half.h"

typedef struct fg_cpu_bias_ctx {
    float *out;
    const float *in;
    int rows, cols, spatial, accumulate;
    const uint16_t *in_bf16; /* bias_grad of bf16 dy (spatial 1): read instead of in */
} fg_cpu_bias_ctx;

FG_CPU_VECTOR_CLONES static void fg_cpu_bias_add_rows(void *p, size_t b, size_t e)
{
    fg_cpu_bias_ctx *c = p;
    size_t cols = (size_t)c->cols, sp = (size_t)c->spatial;
    const float *restrict bias = c->in;
    for (size_t r = b; r < e; r++) {
        float *restrict y = c->out + r * cols * sp; /* (cols, spatial) */
        if (sp == 1) {
            for (size_t j = 0; j < cols; j++)
                y[j] += bias[j];
            continue;
        }
        for (size_t j = 0; j < cols; j++) {
            float v = bias[j];
            float *restrict plane = y + j * sp;
            for (size_t s = 0; s < sp; s++)
                plane[s] += v;
        }
    }
}

void fg_cpu_bias_add(fg_cpu_pool *pool, float *y, const float *bias, int rows, int cols,
                     int spatial)
{
    fg_cpu_bias_ctx c = { y, bias, rows, cols, spatial, 0, NULL };
    size_t per_row = (size_t)cols * (size_t)spatial;
    size_t grain = per_row ? fg_cpu_stream_grain(pool) / per_row : 1;
    fg_cpu_parallel_for(pool, (size_t)rows, grain ? grain : 1, 1, fg_cpu_bias_add_rows, &c);
}

/* Fixed-order sum of a contiguous span in double: eight interleaved accumulators. */
static double fg_cpu_span_sum(const float *x, size_t n)
{
    double acc[8] = { 0 };
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += (double)x[i + j];
    for (; i < n; i++)
        acc[0] += (double)x[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

#define FG_CPU_BIAS_BLOCK 256

/* Columns [b, e): each column sums its rows in row order, whatever the partition; the
 * vectors run across the columns, so the clones give the baseline's sums bit for bit
 * (tests/kernel-lab/bias_grad_lab.c, version 2). */
FG_CPU_VECTOR_CLONES static void fg_cpu_bias_grad_cols(void *p, size_t b, size_t e)
{
    fg_cpu_bias_ctx *c = p;
    size_t rows = (size_t)c->rows, cols = (size_t)c->cols, sp = (size_t)c->spatial;
    double acc[FG_CPU_BIAS_BLOCK];
    for (size_t c0 = b; c0 < e; c0 += FG_CPU_BIAS_BLOCK) {
        size_t c1 = c0 + FG_CPU_BIAS_BLOCK < e ? c0 + FG_CPU_BIAS_BLOCK : e;
        for (size_t j = c0; j < c1; j++)
            acc[j - c0] = 0.0;
        for (size_t r = 0; r < rows; r++) {
            const float *dy = c->in_bf16 ? NULL : c->in + r * cols * sp;
            if (c->in_bf16) { /* the widened values: exact, so the f32 sums' bits */
                const uint16_t *h = c->in_bf16 + r * cols;
                for (size_t j = c0; j < c1; j++)
                    acc[j - c0] += (double)fg_bf16_to_f32(h[j]);
            } else if (sp == 1) {
                for (size_t j = c0; j < c1; j++)
                    acc[j - c0] += (double)dy[j];
            } else {
                for (size_t j = c0; j < c1; j++)
                    acc[j - c0] += fg_cpu_span_sum(dy + j * sp, sp);
            }
        }
        for (size_t j = c0; j < c1; j++)
            c->out[j] = c->accumulate ? (float)((double)c->out[j] + acc[j - c0])
                                      : (float)acc[j - c0];
    }
}

void fg_cpu_bias_grad(fg_cpu_pool *pool, float *dbias, const float *dy, int rows, int cols,
                      int spatial, int accumulate)
{
    fg_cpu_bias_ctx c = { dbias, dy, rows, cols, spatial, accumulate, NULL };
    size_t per_col = (size_t)rows * (size_t)spatial;
    size_t grain = per_col ? FG_CPU_GRAIN / per_col : 1;
    fg_cpu_parallel_for(pool, (size_t)cols, grain ? grain : 1, 16, fg_cpu_bias_grad_cols, &c);
}

void fg_cpu_bias_grad_bf16(fg_cpu_pool *pool, float *dbias, const uint16_t *dy, int rows,
                           int cols, int accumulate)
{
    fg_cpu_bias_ctx c = {dbias, NULL, rows, cols, 1, accumulate, dy};
    size_t grain = rows > 0 ? FG_CPU_GRAIN / (size_t)rows : 1;
    fg_cpu_parallel_for(pool, (size_t)cols, grain ? grain : 1, 16, fg_cpu_bias_grad_cols, &c);
}
