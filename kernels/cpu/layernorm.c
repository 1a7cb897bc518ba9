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

typedef struct fg_cpu_ln_ctx {
    int rms, rows, cols, accumulate;
    float eps;
    const float *x, *gamma, *beta, *dy, *mean_in, *rstd_in;
    float *y, *mean_out, *rstd_out, *dx, *dgamma, *dbeta;
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

FG_CPU_VECTOR_CLONES static void fg_cpu_ln_forward_rows(void *p, size_t r0, size_t r1)
{
    const fg_cpu_ln_ctx *c = p;
    size_t n = (size_t)c->cols;
    for (size_t r = r0; r < r1; r++) {
        const float *x = c->x + r * n;
        double mean = c->rms ? 0.0 : fg_cpu_ln_sum(x, n) / (double)n;
        double sq = fg_cpu_ln_sq(x, n, (float)mean);
        double rstd = 1.0 / sqrt(sq / (double)n + (double)c->eps);
        if (c->mean_out)
            c->mean_out[r] = (float)mean;
        c->rstd_out[r] = (float)rstd;
        float fm = (float)mean, fr = (float)rstd;
        float *y = c->y + r * n;
        for (size_t i = 0; i < n; i++) {
            float v = (x[i] - fm) * fr;
            if (c->gamma)
                v *= c->gamma[i];
            if (c->beta)
                v += c->beta[i];
            y[i] = v;
        }
    }
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

/* xhat of row r at column i, as the forward computed it. */
static inline float fg_cpu_ln_xhat(const fg_cpu_ln_ctx *c, size_t r, size_t i)
{
    float m = c->rms ? 0.0f : c->mean_in[r];
    return (c->x[r * (size_t)c->cols + i] - m) * c->rstd_in[r];
}

/* One row's dx = rstd * (g*dy - mean(g*dy) - xhat * mean(g*dy*xhat)); RMS drops the
 * mean(g*dy). In double as version 1 (the difference cancels: a row of one element has
 * dx ~ 1e-5 g), the sums in 16 double lanes. Always inlined with has_gamma a constant, so
 * each case is its own loop. */
static inline __attribute__((always_inline)) void
fg_cpu_ln_backward_row(const fg_cpu_ln_ctx *c, size_t r, int has_gamma)
{
    size_t n = (size_t)c->cols;
    const float *x = c->x + r * n, *dy = c->dy + r * n, *gm = c->gamma;
    float *dx = c->dx + r * n;
    float m = c->rms ? 0.0f : c->mean_in[r], rs = c->rstd_in[r];
    double l1[FG_CPU_LN_LANES] = {0}, l2[FG_CPU_LN_LANES] = {0};
    size_t i = 0;
    for (; i + FG_CPU_LN_LANES <= n; i += FG_CPU_LN_LANES)
        for (int l = 0; l < FG_CPU_LN_LANES; l++) {
            double g = has_gamma ? (double)dy[i + l] * (double)gm[i + l] : (double)dy[i + l];
            double xh = (double)((x[i + l] - m) * rs);
            l1[l] += g;
            l2[l] += g * xh;
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
    for (size_t r = r0; r < r1; r++) {
        if (c->gamma)
            fg_cpu_ln_backward_row(c, r, 1);
        else
            fg_cpu_ln_backward_row(c, r, 0);
    }
}

enum { FG_CPU_LN_COL_BLOCK = 256 };

/* dgamma, dbeta for columns [c0, c1): every row, in row order, in double (vectorised
 * across columns: each column's sum keeps its order). */
FG_CPU_VECTOR_CLONES static void fg_cpu_ln_param_cols(void *p, size_t c0, size_t c1)
{
    const fg_cpu_ln_ctx *c = p;
    size_t n = (size_t)c->cols;
    for (size_t b0 = c0; b0 < c1; b0 += FG_CPU_LN_COL_BLOCK) {
        size_t b1 = b0 + FG_CPU_LN_COL_BLOCK < c1 ? b0 + FG_CPU_LN_COL_BLOCK : c1;
        double g[FG_CPU_LN_COL_BLOCK] = {0}, b[FG_CPU_LN_COL_BLOCK] = {0};
        for (size_t r = 0; r < (size_t)c->rows; r++) {
            const float *dy = c->dy + r * n;
            for (size_t i = b0; i < b1; i++) {
                g[i - b0] += (double)dy[i] * (double)fg_cpu_ln_xhat(c, r, i);
                b[i - b0] += dy[i];
            }
        }
        for (size_t i = b0; i < b1; i++) {
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
        fg_cpu_parallel_for(pool, (size_t)cols, col_grain, FG_CPU_LN_COL_BLOCK,
                            fg_cpu_ln_param_cols, &c);
    }
}
