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

/* Column blocks of 256, rows in bands of 64 (a band of a block stays in L2 while its
 * 16-column groups walk it), each group's 16 sums in registers through a band. */
enum { FG_CPU_BIAS_LANES = 16, FG_CPU_BIAS_BAND = 64, FG_CPU_BIAS_BLOCK = 256 };

/* acc[0, w) += the sums of columns [c0, c0 + w), w <= 16, over rows [r0, r1) of a
 * (rows, cols) dy, f32 or bf16 (widened: exact, so the same sums), in row order in double.
 * Inlined with w the constant 16 the sums stay in registers through the band. */
static inline __attribute__((always_inline)) void
fg_cpu_bias_band(const fg_cpu_bias_ctx *c, size_t r0, size_t r1, size_t c0, size_t w,
                 double *acc, int bf16)
{
    size_t cols = (size_t)c->cols;
    double l[FG_CPU_BIAS_LANES];
    for (size_t i = 0; i < w; i++)
        l[i] = acc[i];
    for (size_t r = r0; r < r1; r++) {
        size_t at = r * cols + c0;
        for (size_t i = 0; i < w; i++)
            l[i] += (double)(bf16 ? fg_bf16_to_f32(c->in_bf16[at + i]) : c->in[at + i]);
    }
    for (size_t i = 0; i < w; i++)
        acc[i] = l[i];
}

/* acc[0, w) += the sums of columns [c0, c0 + w) over rows [r0, r1) of a (rows, cols,
 * spatial) dy: each row's plane summed by fg_cpu_span_sum */
static void fg_cpu_bias_planes(const fg_cpu_bias_ctx *c, size_t r0, size_t r1, size_t c0,
                               size_t w, double *acc)
{
    size_t cols = (size_t)c->cols, sp = (size_t)c->spatial;
    for (size_t r = r0; r < r1; r++)
        for (size_t j = 0; j < w; j++)
            acc[j] += fg_cpu_span_sum(c->in + (r * cols + c0 + j) * sp, sp);
}

/* acc[0, w) += columns [c0, c0 + w) over rows [r0, r1), w <= 16 */
static inline __attribute__((always_inline)) void
fg_cpu_bias_group(const fg_cpu_bias_ctx *c, size_t r0, size_t r1, size_t c0, size_t w,
                  double *acc)
{
    int bf16 = c->in_bf16 != NULL;
    if (c->spatial != 1)
        fg_cpu_bias_planes(c, r0, r1, c0, w, acc);
    else if (w == FG_CPU_BIAS_LANES && bf16)
        fg_cpu_bias_band(c, r0, r1, c0, FG_CPU_BIAS_LANES, acc, 1);
    else if (w == FG_CPU_BIAS_LANES)
        fg_cpu_bias_band(c, r0, r1, c0, FG_CPU_BIAS_LANES, acc, 0);
    else if (bf16)
        fg_cpu_bias_band(c, r0, r1, c0, w, acc, 1);
    else
        fg_cpu_bias_band(c, r0, r1, c0, w, acc, 0);
}

/* Columns [b, e): each column sums its rows in row order, whatever the partition; the
 * vectors run across 16 columns, so the clones give the baseline's sums bit for bit
 * (tests/kernel-lab/bias_grad_lab.c, version 2). */
FG_CPU_VECTOR_CLONES static void fg_cpu_bias_grad_cols(void *p, size_t b, size_t e)
{
    fg_cpu_bias_ctx *c = p;
    size_t rows = (size_t)c->rows;
    for (size_t b0 = b; b0 < e; b0 += FG_CPU_BIAS_BLOCK) {
        size_t b1 = e - b0 < FG_CPU_BIAS_BLOCK ? e : b0 + FG_CPU_BIAS_BLOCK;
        double acc[FG_CPU_BIAS_BLOCK] = {0};
        for (size_t r0 = 0; r0 < rows; r0 += FG_CPU_BIAS_BAND) {
            size_t r1 = rows - r0 < FG_CPU_BIAS_BAND ? rows : r0 + FG_CPU_BIAS_BAND;
            for (size_t c0 = b0; c0 < b1; c0 += FG_CPU_BIAS_LANES) {
                size_t w = b1 - c0 < FG_CPU_BIAS_LANES ? b1 - c0 : FG_CPU_BIAS_LANES;
                fg_cpu_bias_group(c, r0, r1, c0, w, acc + (c0 - b0));
            }
        }
        for (size_t j = b0; j < b1; j++)
            c->out[j] = c->accumulate ? (float)((double)c->out[j] + acc[j - b0])
                                      : (float)acc[j - b0];
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
