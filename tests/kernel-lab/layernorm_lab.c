/* Kernel lab: layer normalisation (and RMS normalisation) forward + backward over the last
 * dimension (kernels/cpu/layernorm.c): two per transformer block and one before the output
 * layer. Shapes: the bench_lm GPTs (768 rows x 128, 4096 rows x 384).
 *
 *   version 0  reference: every sum and product in double, one row at a time
 *   version 1  kernels/cpu/layernorm.c as of d8ca546: rows on the pool, the row sums in
 *              double one element at a time (a dependency chain: no vector code), the
 *              parameter gradients column blocks over every row in double
 *   version 2  version 1 compiled for AVX-512 / AVX2 as well (FG_CPU_VECTOR_CLONES): only the
 *              elementwise loops and the column sums vectorise; bitwise version 1
 *   version 3  (dropped) version 2 with every row sum in 16 float lanes and dx in float:
 *              4.3 against version 4's 5.0 ms, but dx lost what cancels (rows of one
 *              element have dx ~1e-5 of dy: 5e-3 relative error, caught by
 *              cudaemu.parity.layernorm; the 3 x 1 shape below checks it here)
 *   version 4  version 2 with the forward's sums in 16 float lanes (combined in double),
 *              the backward's in 16 double lanes, dx in double as version 1
 *              <- the winner, now kernels/cpu/layernorm.c
 *   version 5  version 4 with the dgamma/dbeta columns split across the pool at multiples of
 *              16, not 256 (384 columns are 256 + 128: one thread idles a third of the pass;
 *              128 columns run on one thread): 127 against 183 us at 768 x 128, but 2.56
 *              against 2.14 ms at 4096 x 384 (quiet machine): not taken
 *
 * Version 2 must equal version 1 bit for bit, version 5 and the product version 4; every version is checked against the
 * reference within 1e-5 of each output's largest value (y, dx, dgamma, dbeta): their
 * summation orders differ from it.
 *
 *   layernorm_lab check               (ctest kernel_lab.layernorm)
 *   layernorm_lab time [rows cols]    median us of forward + backward per version */
#include "lab.h" /* first: it sets _POSIX_C_SOURCE */

#include <math.h>

#include "cpu_kernels.h"

#define LAB_INLINE static inline __attribute__((always_inline))

typedef struct ln_args {
    int rms, rows, cols;
    float eps;
    const float *x, *gamma, *beta, *dy, *mean_in, *rstd_in;
    float *y, *mean_out, *rstd_out, *dx, *dgamma, *dbeta;
} ln_args;

/* ---- version 0 ------------------------------------------------------------------------- */

static void v0_forward(const ln_args *c)
{
    size_t n = (size_t)c->cols;
    for (size_t r = 0; r < (size_t)c->rows; r++) {
        const float *x = c->x + r * n;
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < n && !c->rms; i++)
            mean += x[i];
        mean /= (double)n;
        for (size_t i = 0; i < n; i++)
            var += ((double)x[i] - mean) * ((double)x[i] - mean);
        double rstd = 1.0 / sqrt(var / (double)n + c->eps);
        for (size_t i = 0; i < n; i++)
            c->y[r * n + i] = (float)(((double)x[i] - mean) * rstd * (double)c->gamma[i] +
                                      (c->rms ? 0.0 : (double)c->beta[i]));
        c->mean_out[r] = (float)mean;
        c->rstd_out[r] = (float)rstd;
    }
}

static double xhat_f(float x, float m, float rstd) { return (double)((x - m) * rstd); }

static void v0_backward(const ln_args *c)
{
    size_t n = (size_t)c->cols;
    for (size_t i = 0; i < n; i++)
        c->dgamma[i] = c->dbeta[i] = 0.0f;
    double *g = calloc(2 * n, sizeof *g);
    if (!g) {
        fprintf(stderr, "layernorm lab: out of memory\n");
        exit(1);
    }
    double *b = g + n;
    for (size_t r = 0; r < (size_t)c->rows; r++) {
        const float *x = c->x + r * n, *dy = c->dy + r * n;
        double m = c->rms ? 0.0 : c->mean_in[r], rstd = c->rstd_in[r], s1 = 0.0, s2 = 0.0;
        /* xhat as the forward rounds it (float): for a row of one element dx is ~1e-5 of
         * dy, and an xhat in double moves it by 1e-3 of itself */
        for (size_t i = 0; i < n; i++) {
            double xh = xhat_f(x[i], (float)m, (float)rstd), gd = (double)dy[i] * c->gamma[i];
            s1 += gd;
            s2 += gd * xh;
            g[i] += (double)dy[i] * xh;
            b[i] += dy[i];
        }
        double m1 = c->rms ? 0.0 : s1 / (double)n, m2 = s2 / (double)n;
        for (size_t i = 0; i < n; i++) {
            double xh = xhat_f(x[i], (float)m, (float)rstd), gd = (double)dy[i] * c->gamma[i];
            c->dx[r * n + i] = (float)(rstd * (gd - m1 - xh * m2));
        }
    }
    for (size_t i = 0; i < n; i++) {
        c->dgamma[i] = (float)g[i];
        if (!c->rms)
            c->dbeta[i] = (float)b[i];
    }
    free(g);
}

/* ---- versions 1, 2, 4: the product's loops; lanes = 1 is version 4 -------------------- */

LAB_INLINE void ln_forward_body(const ln_args *c, size_t r0, size_t r1, int lanes)
{
    size_t n = (size_t)c->cols;
    for (size_t r = r0; r < r1; r++) {
        const float *x = c->x + r * n;
        double sum = 0.0, sq = 0.0, mean;
        if (lanes) {
            float ls[16] = {0}, lq[16] = {0};
            size_t i = 0;
            for (; i + 16 <= n && !c->rms; i += 16)
                for (int l = 0; l < 16; l++)
                    ls[l] += x[i + l];
            for (; i < n && !c->rms; i++)
                sum += x[i];
            for (int l = 0; l < 16; l++)
                sum += ls[l];
            mean = c->rms ? 0.0 : sum / (double)n;
            float fm = (float)mean;
            for (i = 0; i + 16 <= n; i += 16)
                for (int l = 0; l < 16; l++) {
                    float d = x[i + l] - fm;
                    lq[l] += d * d;
                }
            for (; i < n; i++) {
                float d = x[i] - fm;
                sq += d * d;
            }
            for (int l = 0; l < 16; l++)
                sq += lq[l];
        } else {
            for (size_t i = 0; i < n; i++)
                sum += x[i];
            mean = c->rms ? 0.0 : sum / (double)n;
            for (size_t i = 0; i < n; i++) {
                double d = (double)x[i] - mean;
                sq += d * d;
            }
        }
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

LAB_INLINE float ln_xhat(const ln_args *c, size_t r, size_t i)
{
    float m = c->rms ? 0.0f : c->mean_in[r];
    return (c->x[r * (size_t)c->cols + i] - m) * c->rstd_in[r];
}

LAB_INLINE void ln_backward_body(const ln_args *c, size_t r0, size_t r1, int lanes)
{
    size_t n = (size_t)c->cols;
    for (size_t r = r0; r < r1; r++) {
        const float *dy = c->dy + r * n;
        float *dx = c->dx + r * n;
        double s1 = 0.0, s2 = 0.0;
        if (lanes) {
            const float *x = c->x + r * n, *gm = c->gamma;
            float m = c->rms ? 0.0f : c->mean_in[r], rs = c->rstd_in[r];
            size_t i = 0;
            double l1[16] = {0}, l2[16] = {0};
            for (; i + 16 <= n; i += 16)
                for (int l = 0; l < 16; l++) {
                    double g = (double)dy[i + l] * (double)gm[i + l];
                    l1[l] += g;
                    l2[l] += g * (double)((x[i + l] - m) * rs);
                }
            for (; i < n; i++) {
                double g = (double)dy[i] * (double)gm[i];
                s1 += g;
                s2 += g * (double)((x[i] - m) * rs);
            }
            for (int l = 0; l < 16; l++)
                s1 += l1[l], s2 += l2[l];
            double m1 = c->rms ? 0.0 : s1 / (double)n, m2 = s2 / (double)n, rstd = rs;
            for (i = 0; i < n; i++) {
                double g = (double)dy[i] * (double)gm[i];
                dx[i] = (float)(rstd * (g - m1 - (double)((x[i] - m) * rs) * m2));
            }
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            double g = (double)dy[i] * (c->gamma ? (double)c->gamma[i] : 1.0);
            s1 += g;
            s2 += g * (double)ln_xhat(c, r, i);
        }
        double m1 = c->rms ? 0.0 : s1 / (double)n, m2 = s2 / (double)n;
        double rstd = c->rstd_in[r];
        for (size_t i = 0; i < n; i++) {
            double g = (double)dy[i] * (c->gamma ? (double)c->gamma[i] : 1.0);
            dx[i] = (float)(rstd * (g - m1 - (double)ln_xhat(c, r, i) * m2));
        }
    }
}

LAB_INLINE void ln_param_body(const ln_args *c, size_t c0, size_t c1)
{
    size_t n = (size_t)c->cols;
    for (size_t b0 = c0; b0 < c1; b0 += 256) {
        size_t b1 = b0 + 256 < c1 ? b0 + 256 : c1;
        double g[256] = {0}, b[256] = {0};
        for (size_t r = 0; r < (size_t)c->rows; r++) {
            const float *dy = c->dy + r * n;
            for (size_t i = b0; i < b1; i++) {
                g[i - b0] += (double)dy[i] * (double)ln_xhat(c, r, i);
                b[i - b0] += dy[i];
            }
        }
        for (size_t i = b0; i < b1; i++) {
            c->dgamma[i] = (float)g[i - b0];
            if (c->dbeta)
                c->dbeta[i] = (float)b[i - b0];
        }
    }
}

static void v1_forward(void *p, size_t b, size_t e) { ln_forward_body(p, b, e, 0); }
static void v1_backward(void *p, size_t b, size_t e) { ln_backward_body(p, b, e, 0); }
static void v1_param(void *p, size_t b, size_t e) { ln_param_body(p, b, e); }
LAB_CLONES static void v2_forward(void *p, size_t b, size_t e) { ln_forward_body(p, b, e, 0); }
LAB_CLONES static void v2_backward(void *p, size_t b, size_t e) { ln_backward_body(p, b, e, 0); }
LAB_CLONES static void v2_param(void *p, size_t b, size_t e) { ln_param_body(p, b, e); }
LAB_CLONES static void v4_forward(void *p, size_t b, size_t e) { ln_forward_body(p, b, e, 1); }
LAB_CLONES static void v4_backward(void *p, size_t b, size_t e) { ln_backward_body(p, b, e, 1); }

static void run_ln_aligned(fg_cpu_pool *pool, ln_args *c, fg_cpu_range_fn fwd,
                           fg_cpu_range_fn bwd, fg_cpu_range_fn param, size_t param_align);

static void run_ln(fg_cpu_pool *pool, ln_args *c, fg_cpu_range_fn fwd, fg_cpu_range_fn bwd,
                   fg_cpu_range_fn param)
{
    run_ln_aligned(pool, c, fwd, bwd, param, 256);
}

static void run_ln_aligned(fg_cpu_pool *pool, ln_args *c, fg_cpu_range_fn fwd,
                           fg_cpu_range_fn bwd, fg_cpu_range_fn param, size_t param_align)
{
    ln_args f = *c;
    if (f.rms)
        f.beta = NULL;
    size_t row_grain = FG_CPU_GRAIN / (size_t)c->cols + 1;
    fg_cpu_parallel_for(pool, (size_t)c->rows, row_grain, 1, fwd, &f);
    ln_args b = *c;
    b.mean_in = c->mean_out, b.rstd_in = c->rstd_out;
    if (b.rms)
        b.dbeta = NULL;
    fg_cpu_parallel_for(pool, (size_t)c->rows, row_grain, 1, bwd, &b);
    size_t col_grain = FG_CPU_GRAIN / (size_t)c->rows + 1;
    fg_cpu_parallel_for(pool, (size_t)c->cols, col_grain, param_align, param, &b);
}

typedef void (*lab_ln_fn)(fg_cpu_pool *pool, ln_args *c);

static void run_v0(fg_cpu_pool *pool, ln_args *c)
{
    (void)pool;
    v0_forward(c);
    ln_args b = *c;
    b.mean_in = c->mean_out, b.rstd_in = c->rstd_out;
    v0_backward(&b);
}
static void run_v1(fg_cpu_pool *pool, ln_args *c) { run_ln(pool, c, v1_forward, v1_backward, v1_param); }
static void run_v2(fg_cpu_pool *pool, ln_args *c) { run_ln(pool, c, v2_forward, v2_backward, v2_param); }
static void run_v4(fg_cpu_pool *pool, ln_args *c) { run_ln(pool, c, v4_forward, v4_backward, v2_param); }
static void run_v5(fg_cpu_pool *pool, ln_args *c)
{
    run_ln_aligned(pool, c, v4_forward, v4_backward, v2_param, 16);
}

static void run_product(fg_cpu_pool *pool, ln_args *c)
{
    fg_cpu_layernorm_forward(pool, c->rms, c->rows, c->cols, c->x, c->gamma, c->beta, c->eps,
                             c->mean_out, c->rstd_out, c->y);
    fg_cpu_layernorm_backward(pool, c->rms, c->rows, c->cols, c->x, c->gamma, c->mean_out,
                              c->rstd_out, c->dy, c->dx, c->dgamma, c->dbeta, 0);
}

static const struct {
    const char *name;
    lab_ln_fn fn;
} versions[] = {
    { "v0 reference", run_v0 },
    { "v1 double sums", run_v1 },
    { "v2 v1 + AVX-512 clones", run_v2 },
    { "v4 lane sums", run_v4 },
    { "v5 v4, 16-column split", run_v5 },
    { "kernels/cpu now", run_product },
};
#define NVERSIONS (sizeof versions / sizeof versions[0])

typedef struct ln_bufs {
    float *x, *gamma, *beta, *dy, *y, *mean, *rstd, *dx, *dgamma, *dbeta;
} ln_bufs;

static void bufs_init(ln_bufs *m, int rows, int cols)
{
    size_t n = (size_t)rows * cols;
    m->x = lab_alloc(n), m->dy = lab_alloc(n), m->y = lab_alloc(n), m->dx = lab_alloc(n);
    m->gamma = lab_alloc((size_t)cols), m->beta = lab_alloc((size_t)cols);
    m->dgamma = lab_alloc((size_t)cols), m->dbeta = lab_alloc((size_t)cols);
    m->mean = lab_alloc((size_t)rows), m->rstd = lab_alloc((size_t)rows);
    lab_fill(m->x, n, 11), lab_fill(m->dy, n, 12), lab_fill(m->gamma, (size_t)cols, 13);
    lab_fill(m->beta, (size_t)cols, 14);
    for (size_t i = 0; i < n; i++)
        m->x[i] = 2.0f * m->x[i] + 0.75f; /* an offset mean: the variance must not cancel */
    for (int i = 0; i < cols; i++)
        m->gamma[i] += 1.0f;
}

static void bufs_free(ln_bufs *m)
{
    free(m->x), free(m->dy), free(m->y), free(m->dx), free(m->gamma), free(m->beta);
    free(m->dgamma), free(m->dbeta), free(m->mean), free(m->rstd);
}

static ln_args args_of(const ln_bufs *m, int rms, int rows, int cols)
{
    return (ln_args){.rms = rms, .rows = rows, .cols = cols, .eps = 1e-5f, .x = m->x,
                     .gamma = m->gamma, .beta = m->beta, .dy = m->dy, .y = m->y,
                     .mean_out = m->mean, .rstd_out = m->rstd, .dx = m->dx,
                     .dgamma = m->dgamma, .dbeta = m->dbeta};
}

static double worst_of(double a, double b) { return b > a || b != b ? b : a; }

static int check(fg_cpu_pool *pool)
{
    const int shapes[][2] = { {768, 128}, {300, 384}, {37, 77}, {5, 1000}, {3, 1} };
    const double tol = 1e-5;
    int bad = 0;
    double worst_all = 0.0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int rms = 0; rms < 2; rms++) {
            int rows = shapes[sh][0], cols = shapes[sh][1];
            size_t n = (size_t)rows * cols;
            ln_bufs r, m, m1, m3;
            bufs_init(&r, rows, cols), bufs_init(&m, rows, cols), bufs_init(&m1, rows, cols);
            bufs_init(&m3, rows, cols);
            ln_args a0 = args_of(&r, rms, rows, cols);
            run_v0(pool, &a0);
            ln_args a1 = args_of(&m1, rms, rows, cols);
            run_v1(pool, &a1);
            for (size_t v = 1; v < NVERSIONS; v++) {
                ln_args a = args_of(&m, rms, rows, cols);
                memset(m.y, 0xff, n * 4), memset(m.dx, 0xff, n * 4);
                versions[v].fn(pool, &a);
                double e = lab_max_rel(m.y, r.y, n);
                e = worst_of(e, lab_max_rel(m.dx, r.dx, n));
                e = worst_of(e, lab_max_rel(m.dgamma, r.dgamma, (size_t)cols));
                if (!rms)
                    e = worst_of(e, lab_max_rel(m.dbeta, r.dbeta, (size_t)cols));
                worst_all = worst_of(worst_all, e);
                if (!(e < tol)) {
                    printf("FAIL %s, %dx%d %s: max relative error %.3g (tolerance %g)\n",
                           versions[v].name, rows, cols, rms ? "rms" : "layernorm", e, tol);
                    bad = 1;
                }
                if (v >= 4 && (lab_first_diff(m.y, m3.y, n) < n ||
                                           lab_first_diff(m.dx, m3.dx, n) < n)) {
                    printf("FAIL %s, %dx%d %s: not bitwise version 4\n", versions[v].name,
                           rows, cols, rms ? "rms" : "layernorm");
                    bad = 1;
                }
                if (v == 3) {
                    memcpy(m3.y, m.y, n * 4);
                    memcpy(m3.dx, m.dx, n * 4);
                }
                if (v == 2 && (lab_first_diff(m.y, m1.y, n) < n ||
                               lab_first_diff(m.dx, m1.dx, n) < n ||
                               lab_first_diff(m.dgamma, m1.dgamma, (size_t)cols) < (size_t)cols ||
                               (!rms && lab_first_diff(m.dbeta, m1.dbeta, (size_t)cols) <
                                            (size_t)cols))) {
                    printf("FAIL %s, %dx%d %s: not bitwise version 1\n", versions[v].name,
                           rows, cols, rms ? "rms" : "layernorm");
                    bad = 1;
                }
            }
            bufs_free(&r), bufs_free(&m), bufs_free(&m1), bufs_free(&m3);
        }
    if (!bad)
        printf("layernorm lab: %zu versions x %zu shapes x (layernorm, rms) within %g of the "
               "reference (worst %.2e); version 2 bitwise version 1, version 5 and the product version 4\n", NVERSIONS - 1,
               sizeof shapes / sizeof shapes[0], tol, worst_all);
    return bad;
}

static void time_versions(fg_cpu_pool *pool, int rows, int cols)
{
    enum { ROUNDS = 21 };
    ln_bufs m;
    bufs_init(&m, rows, cols);
    static double t[NVERSIONS][ROUNDS];
    int calls = (int)(2e7 / ((double)rows * cols)) + 1;
    for (int r = 0; r < ROUNDS; r++)
        for (size_t v = 1; v < NVERSIONS; v++) {
            ln_args a = args_of(&m, 0, rows, cols);
            double t0 = lab_now();
            for (int k = 0; k < calls; k++)
                versions[v].fn(pool, &a);
            t[v][r] = (lab_now() - t0) / calls;
        }
    printf("layernorm lab: %d rows x %d, %d threads; median of %d rounds of %d forward + "
           "backward, the versions taking turns\n", rows, cols, fg_cpu_pool_threads(pool),
           ROUNDS, calls);
    for (size_t v = 1; v < NVERSIONS; v++) {
        double med = lab_median(t[v], ROUNDS);
        printf("  %-24s %8.1f us  (fastest %8.1f us)\n", versions[v].name, med * 1e6,
               t[v][0] * 1e6);
    }
    bufs_free(&m);
}

static int time_main(fg_cpu_pool *pool, int argc, char **argv)
{
    int rows = argc >= 2 ? atoi(argv[0]) : 4096, cols = argc >= 2 ? atoi(argv[1]) : 384;
    if (rows < 1 || cols < 1) {
        fprintf(stderr, "layernorm lab: rows and cols must be >= 1\n");
        return 2;
    }
    time_versions(pool, rows, cols);
    return 0;
}

int main(int argc, char **argv)
{
    return lab_main(argc, argv, "layernorm", "[rows cols]", check, time_main);
}
