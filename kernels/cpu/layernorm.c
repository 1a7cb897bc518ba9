/* Layer normalisation and RMS normalisation over the last dimension of x (rows, cols),
 * PyTorch semantics (biased variance, eps inside the square root). Rows are independent
 * and split across the pool; the parameter gradients are reduced column by column over
 * every row in row order in double, so results do not depend on the thread count.
 *
 * tests/kernel-lab/layernorm_lab.c, version 4: a row's sums run in 16 lanes (float for the
 * forward's, combined in double; double for the backward's, whose difference cancels), as a
 * single double accumulator is a dependency chain that no vector unit takes; every loop is
 * compiled for AVX-512 / AVX2 as well. */
#include <math.h>

#include "cpu_kernels.h"
#include "half.h"

typedef struct fg_cpu_ln_ctx {
    int rms, rows, cols, accumulate;
    float eps;
    const float *x, *gamma, *beta, *dy, *mean_in, *rstd_in;
    float *y, *mean_out, *rstd_out, *dx, *dgamma, *dbeta;
    const uint16_t *x_bf16, *dy_bf16; /* bf16 storage (the _bf16 entry points), else NULL */
    uint16_t *y_bf16, *dx_bf16;
} fg_cpu_ln_ctx;

enum { FG_CPU_LN_LANES = 16 };

/* sum of x[0, n) */
static inline __attribute__((always_inline)) double fg_cpu_ln_sum(const float *x, size_t n)
{
    float lane[FG_CPU_LN_LANES] = {0};
    size_t i = 0;
    for (; i + FG_CPU_LN_LANES <= n; i += FG_CPU_LN_LANES)
        for (int l = 0; l < FG_CPU_LN_LANES; l++)
            lane[l] += x[i + l];
    double sum = 0.0;
    for (; i < n; i++)
        sum += x[i];
    for (int l = 0; l < FG_CPU_LN_LANES; l++)
        sum += lane[l];
    return sum;
}

/* sum of (x - m)^2 over [0, n) */
static inline __attribute__((always_inline)) double fg_cpu_ln_sq(const float *x, size_t n, float m)
{
    float lane[FG_CPU_LN_LANES] = {0};
    size_t i = 0;
    for (; i + FG_CPU_LN_LANES <= n; i += FG_CPU_LN_LANES)
        for (int l = 0; l < FG_CPU_LN_LANES; l++) {
            float d = x[i + l] - m;
            lane[l] += d * d;
        }
    double sq = 0.0;
    for (; i < n; i++) {
        float d = x[i] - m;
        sq += d * d;
    }
    for (int l = 0; l < FG_CPU_LN_LANES; l++)
        sq += lane[l];
    return sq;
}

/* Row r of x (n values at x) normalised into y; the row's mean and rstd saved. */
static inline __attribute__((always_inline)) void
fg_cpu_ln_forward_row(const fg_cpu_ln_ctx *c, size_t r, const float *x, float *y)
{
    size_t n = (size_t)c->cols;
    double mean = c->rms ? 0.0 : fg_cpu_ln_sum(x, n) / (double)n;
    double sq = fg_cpu_ln_sq(x, n, (float)mean);
    double rstd = 1.0 / sqrt(sq / (double)n + (double)c->eps);
    if (c->mean_out)
        c->mean_out[r] = (float)mean;
    c->rstd_out[r] = (float)rstd;
    float fm = (float)mean, fr = (float)rstd;
    for (size_t i = 0; i < n; i++) {
        float v = (x[i] - fm) * fr;
        if (c->gamma)
            v *= c->gamma[i];
        if (c->beta)
            v += c->beta[i];
        y[i] = v;
    }
}

FG_CPU_VECTOR_CLONES static void fg_cpu_ln_forward_rows(void *p, size_t r0, size_t r1)
{
    const fg_cpu_ln_ctx *c = p;
    size_t n = (size_t)c->cols;
    for (size_t r = r0; r < r1; r++)
        fg_cpu_ln_forward_row(c, r, c->x + r * n, c->y + r * n);
}

void fg_cpu_layernorm_forward(fg_cpu_pool *pool, int rms, int rows, int cols, const float *x,
                              const float *gamma, const float *beta, float eps, float *mean,
                              float *rstd, float *y)
{
    fg_cpu_ln_ctx c = {.rms = rms, .rows = rows, .cols = cols, .eps = eps, .x = x,
                       .gamma = gamma, .beta = rms ? NULL : beta, .y = y, .mean_out = mean,
                       .rstd_out = rstd};
    size_t grain = FG_CPU_GRAIN / (size_t)(cols > 0 ? cols : 1) + 1;
    fg_cpu_parallel_for(pool, (size_t)rows, grain, 1, fg_cpu_ln_forward_rows, &c);
}

/* xhat of row r at column i (its value x), as the forward computed it. */
static inline float fg_cpu_ln_xhat(const fg_cpu_ln_ctx *c, size_t r, float x)
{
    float m = c->rms ? 0.0f : c->mean_in[r];
    return (x - m) * c->rstd_in[r];
}

/* One row's dx = rstd * (g*dy - mean(g*dy) - xhat * mean(g*dy*xhat)); RMS drops the
 * mean(g*dy). In double as version 1 (the difference cancels: a row of one element has
 * dx ~ 1e-5 g), the sums in 16 double lanes. Always inlined with has_gamma a constant, so
 * each case is its own loop. */
static inline __attribute__((always_inline)) void
fg_cpu_ln_backward_row(const fg_cpu_ln_ctx *c, size_t r, const float *x, const float *dy,
                       float *dx, int has_gamma)
{
    size_t n = (size_t)c->cols;
    const float *gm = c->gamma;
    float m = c->rms ? 0.0f : c->mean_in[r], rs = c->rstd_in[r];
    double l1[FG_CPU_LN_LANES] = {0}, l2[FG_CPU_LN_LANES] = {0};
    size_t i = 0;
    for (; i + FG_CPU_LN_LANES <= n; i += FG_CPU_LN_LANES) {
        /* the block's own pointers: indexed by the lane alone, GCC vectorises the lanes */
        const float *xb = x + i, *dyb = dy + i, *gb = has_gamma ? gm + i : NULL;
        for (size_t l = 0; l < FG_CPU_LN_LANES; l++) {
            double g = has_gamma ? (double)dyb[l] * (double)gb[l] : (double)dyb[l];
            double xh = (double)((xb[l] - m) * rs);
            l1[l] += g;
            l2[l] += g * xh;
        }
    }
    double s1 = 0.0, s2 = 0.0;
    for (; i < n; i++) {
        double g = has_gamma ? (double)dy[i] * (double)gm[i] : (double)dy[i];
        s1 += g;
        s2 += g * (double)((x[i] - m) * rs);
    }
    for (int l = 0; l < FG_CPU_LN_LANES; l++) {
        s1 += l1[l];
        s2 += l2[l];
    }
    double m1 = c->rms ? 0.0 : s1 / (double)n, m2 = s2 / (double)n, rstd = rs;
    for (i = 0; i < n; i++) {
        double g = has_gamma ? (double)dy[i] * (double)gm[i] : (double)dy[i];
        dx[i] = (float)(rstd * (g - m1 - (double)((x[i] - m) * rs) * m2));
    }
}

FG_CPU_VECTOR_CLONES static void fg_cpu_ln_backward_rows(void *p, size_t r0, size_t r1)
{
    const fg_cpu_ln_ctx *c = p;
    size_t n = (size_t)c->cols;
    for (size_t r = r0; r < r1; r++) {
        const float *x = c->x + r * n, *dy = c->dy + r * n;
        if (c->gamma)
            fg_cpu_ln_backward_row(c, r, x, dy, c->dx + r * n, 1);
        else
            fg_cpu_ln_backward_row(c, r, x, dy, c->dx + r * n, 0);
    }
}


/* The sums of columns [b0, b0 + w) of rows [0, rows), w <= 16, in row order in double into
 * g, b; x and dy read in place, f32 or bf16 (widened: exact, so the same sums). Inlined with
 * w the constant 16 the 32 sums stay in registers for the whole column. */
static inline __attribute__((always_inline)) void
fg_cpu_ln_param_lanes(const fg_cpu_ln_ctx *c, size_t b0, size_t w, double *g, double *b,
                      int bf16)
{
    size_t n = (size_t)c->cols;
    double gl[FG_CPU_LN_LANES] = {0}, bl[FG_CPU_LN_LANES] = {0};
    for (size_t r = 0; r < (size_t)c->rows; r++) {
        size_t at = r * n + b0;
        float m = c->rms ? 0.0f : c->mean_in[r], rs = c->rstd_in[r];
        for (size_t i = 0; i < w; i++) {
            float x = bf16 ? fg_bf16_to_f32(c->x_bf16[at + i]) : c->x[at + i];
            float dy = bf16 ? fg_bf16_to_f32(c->dy_bf16[at + i]) : c->dy[at + i];
            gl[i] += (double)dy * (double)((x - m) * rs); /* fg_cpu_ln_xhat */
            bl[i] += dy;
        }
    }
    for (size_t i = 0; i < w; i++) {
        g[i] = gl[i];
        b[i] = bl[i];
    }
}

/* dgamma, dbeta for columns [c0, c1): every row, in row order, in double, 16 columns at a
 * time (each column's sum keeps its order, so any cut of the columns gives the same bits;
 * the pool cuts them at 16, so a GPT's 128 or 384 columns run on both threads). */
FG_CPU_VECTOR_CLONES static void fg_cpu_ln_param_cols(void *p, size_t c0, size_t c1)
{
    const fg_cpu_ln_ctx *c = p;
    int bf16 = c->x_bf16 != NULL;
    for (size_t b0 = c0; b0 < c1; b0 += FG_CPU_LN_LANES) {
        size_t w = c1 - b0 < FG_CPU_LN_LANES ? c1 - b0 : FG_CPU_LN_LANES;
        double g[FG_CPU_LN_LANES], b[FG_CPU_LN_LANES];
        if (w == FG_CPU_LN_LANES && bf16)
            fg_cpu_ln_param_lanes(c, b0, FG_CPU_LN_LANES, g, b, 1);
        else if (w == FG_CPU_LN_LANES)
            fg_cpu_ln_param_lanes(c, b0, FG_CPU_LN_LANES, g, b, 0);
        else if (bf16)
            fg_cpu_ln_param_lanes(c, b0, w, g, b, 1);
        else
            fg_cpu_ln_param_lanes(c, b0, w, g, b, 0);
        for (size_t i = b0; i < b0 + w; i++) {
            if (c->dgamma)
                c->dgamma[i] = (float)(g[i - b0] + (c->accumulate ? c->dgamma[i] : 0.0f));
            if (c->dbeta)
                c->dbeta[i] = (float)(b[i - b0] + (c->accumulate ? c->dbeta[i] : 0.0f));
        }
    }
}

void fg_cpu_layernorm_backward(fg_cpu_pool *pool, int rms, int rows, int cols, const float *x,
                               const float *gamma, const float *mean, const float *rstd,
                               const float *dy, float *dx, float *dgamma, float *dbeta,
                               int accumulate)
{
    fg_cpu_ln_ctx c = {.rms = rms, .rows = rows, .cols = cols, .accumulate = accumulate,
                       .x = x, .gamma = gamma, .dy = dy, .mean_in = mean, .rstd_in = rstd,
                       .dx = dx, .dgamma = dgamma, .dbeta = rms ? NULL : dbeta};
    size_t row_grain = FG_CPU_GRAIN / (size_t)(cols > 0 ? cols : 1) + 1;
    if (dx)
        fg_cpu_parallel_for(pool, (size_t)rows, row_grain, 1, fg_cpu_ln_backward_rows, &c);
    if (dgamma || c.dbeta) {
        size_t col_grain = FG_CPU_GRAIN / (size_t)(rows > 0 ? rows : 1) + 1;
        fg_cpu_parallel_for(pool, (size_t)cols, col_grain, FG_CPU_LN_LANES,
                            fg_cpu_ln_param_cols, &c);
    }
}

/* ---- bf16 storage, f32 math ---------------------------------------------------------------
 * x, y, dy, dx in bf16: each row widened onto the stack (at most FG_CPU_BF16_MAX_COLS
 * columns), the f32 row functions above run on it, the results rounded back; the parameter
 * sums widen their 16 columns of each row in the loop. The values are those of the f32
 * kernels on the widened operands, rounded: the same bits as converting whole tensors around
 * them. */

FG_CPU_VECTOR_CLONES static void fg_cpu_ln_bf16_forward_rows(void *p, size_t r0, size_t r1)
{
    const fg_cpu_ln_ctx *c = p;
    size_t n = (size_t)c->cols;
    float x[FG_CPU_BF16_MAX_COLS], y[FG_CPU_BF16_MAX_COLS];
    for (size_t r = r0; r < r1; r++) {
        fg_cpu_bf16_widen(x, c->x_bf16 + r * n, n);
        fg_cpu_ln_forward_row(c, r, x, y);
        fg_cpu_bf16_round(c->y_bf16 + r * n, y, n);
    }
}

void fg_cpu_layernorm_forward_bf16(fg_cpu_pool *pool, int rms, int rows, int cols,
                                   const uint16_t *x, const float *gamma, const float *beta,
                                   float eps, float *mean, float *rstd, uint16_t *y)
{
    fg_cpu_ln_ctx c = {.rms = rms, .rows = rows, .cols = cols, .eps = eps, .x_bf16 = x,
                       .gamma = gamma, .beta = rms ? NULL : beta, .y_bf16 = y,
                       .mean_out = mean, .rstd_out = rstd};
    size_t grain = FG_CPU_GRAIN / (size_t)(cols > 0 ? cols : 1) + 1;
    fg_cpu_parallel_for(pool, (size_t)rows, grain, 1, fg_cpu_ln_bf16_forward_rows, &c);
}

FG_CPU_VECTOR_CLONES static void fg_cpu_ln_bf16_backward_rows(void *p, size_t r0, size_t r1)
{
    const fg_cpu_ln_ctx *c = p;
    size_t n = (size_t)c->cols;
    float x[FG_CPU_BF16_MAX_COLS], dy[FG_CPU_BF16_MAX_COLS], dx[FG_CPU_BF16_MAX_COLS];
    for (size_t r = r0; r < r1; r++) {
        fg_cpu_bf16_widen(x, c->x_bf16 + r * n, n);
        fg_cpu_bf16_widen(dy, c->dy_bf16 + r * n, n);
        if (c->gamma)
            fg_cpu_ln_backward_row(c, r, x, dy, dx, 1);
        else
            fg_cpu_ln_backward_row(c, r, x, dy, dx, 0);
        fg_cpu_bf16_round(c->dx_bf16 + r * n, dx, n);
    }
}

void fg_cpu_layernorm_backward_bf16(fg_cpu_pool *pool, int rms, int rows, int cols,
                                    const uint16_t *x, const float *gamma, const float *mean,
                                    const float *rstd, const uint16_t *dy, uint16_t *dx,
                                    float *dgamma, float *dbeta, int accumulate)
{
    fg_cpu_ln_ctx c = {.rms = rms, .rows = rows, .cols = cols, .accumulate = accumulate,
                       .x_bf16 = x, .gamma = gamma, .dy_bf16 = dy, .mean_in = mean,
                       .rstd_in = rstd, .dx_bf16 = dx, .dgamma = dgamma,
                       .dbeta = rms ? NULL : dbeta};
    size_t row_grain = FG_CPU_GRAIN / (size_t)(cols > 0 ? cols : 1) + 1;
    if (dx)
        fg_cpu_parallel_for(pool, (size_t)rows, row_grain, 1, fg_cpu_ln_bf16_backward_rows, &c);
    if (dgamma || c.dbeta) {
        size_t col_grain = FG_CPU_GRAIN / (size_t)(rows > 0 ? rows : 1) + 1;
        fg_cpu_parallel_for(pool, (size_t)cols, col_grain, FG_CPU_LN_LANES,
                            fg_cpu_ln_param_cols, &c);
    }
}
