/* The transformer kernels of kernels/cpu (layernorm, rmsnorm, embedding, attention) against
 * float64 references: forward values, and gradients against central differences of the
 * float64 forward (the loss is sum(w * y) for a random w, so dy = w). Odd sizes: T across
 * query blocks and partial blocks, odd head sizes, with and without the causal mask. The
 * bf16 attention (attention_bf16) against the f32 kernels on the same bf16 values.
 * Usage: test_lm_kernels <case> */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu_kernels.h"
#include "half.h"

static uint64_t rng_state = 12345;

static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static float *random_floats(size_t n, double lo, double hi)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * uniform());
    return x;
}

static double *to_double(const float *x, size_t n)
{
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

/* max |a - b| / (|b| + floor) over n */
static double max_rel(const float *a, const double *b, size_t n, double floor)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (fabs(b[i]) + floor);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* ---- float64 references ------------------------------------------------------------- */

static void ref_layernorm(int rms, int rows, int cols, const double *x, const double *g,
                          const double *b, double eps, double *y)
{
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * cols;
        double mean = 0.0, var = 0.0;
        if (!rms) {
            for (int i = 0; i < cols; i++)
                mean += xr[i];
            mean /= cols;
        }
        for (int i = 0; i < cols; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        double rstd = 1.0 / sqrt(var / cols + eps);
        for (int i = 0; i < cols; i++)
            y[(size_t)r * cols + i] = (xr[i] - mean) * rstd * g[i] + (rms ? 0.0 : b[i]);
    }
}

static void ref_attention(const fg_cpu_attn_shape *a, const double *qkv, double *y)
{
    int T = a->seq, D = a->head_dim, H = a->heads, C = H * D;
    double *p = malloc((size_t)T * sizeof *p);
    for (int b = 0; b < a->batch; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * 3 * C + (size_t)h * D;
                int lim = a->causal ? i + 1 : T;
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < lim; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * D;
                    double s = 0.0;
                    for (int d = 0; d < D; d++)
                        s += q[d] * k[d];
                    p[j] = s / sqrt((double)D);
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j < lim; j++)
                    sum += (p[j] = exp(p[j] - mx));
                for (int j = 0; j < lim; j++) {
                    uint64_t draw = a->offset + (((uint64_t)b * H + h) * T + i) * T + j;
                    p[j] *= a->dropout == 0.0f ? 1.0
                            : fg_cpu_dropout_keep(a->seed, draw, a->dropout)
                                ? 1.0 / (1.0 - a->dropout) : 0.0;
                }
                double *yo = y + ((size_t)b * T + i) * C + (size_t)h * D;
                for (int d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int j = 0; j < lim; j++)
                        acc += p[j] / sum *
                               qkv[((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * D + d];
                    yo[d] = acc;
                }
            }
    free(p);
}

/* d(sum w*f(x))/dx_i by central differences, for `probes` indices spread over x. */
typedef void (*ref_fn)(const void *ctx, const double *x, double *y);

static double weighted(const double *w, const double *y, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += w[i] * y[i];
    return s;
}

static void check_grad(const char *what, ref_fn f, const void *ctx, double *x, size_t nx,
                       const double *w, size_t ny, const float *grad, double tol)
{
    double *y = malloc(ny * sizeof *y);
    double worst = 0.0;
    size_t step = nx / 97 + 1;
    for (size_t i = 0; i < nx; i += step) {
        double keep = x[i], h = 1e-6;
        x[i] = keep + h;
        f(ctx, x, y);
        double up = weighted(w, y, ny);
        x[i] = keep - h;
        f(ctx, x, y);
        double down = weighted(w, y, ny);
        x[i] = keep;
        double fd = (up - down) / (2 * h);
        double e = fabs((double)grad[i] - fd) / (fabs(fd) + 1e-2);
        worst = e > worst ? e : worst;
    }
    printf("%s: gradient max rel error %.2e\n", what, worst);
    CHECK(worst < tol, "%s: gradient error %.3e >= %.1e", what, worst, tol);
    free(y);
}

/* ---- layernorm / rmsnorm ------------------------------------------------------------- */

typedef struct ln_ctx {
    int rms, rows, cols, wrt; /* wrt: 0 x, 1 gamma, 2 beta */
    const double *x, *g, *b;
} ln_ctx;

static void ln_ref(const void *p, const double *v, double *y)
{
    const ln_ctx *c = p;
    ref_layernorm(c->rms, c->rows, c->cols, c->wrt == 0 ? v : c->x, c->wrt == 1 ? v : c->g,
                  c->wrt == 2 ? v : c->b, 1e-5, y);
}

static int run_norm(int rms)
{
    int rows = 37, cols = 77;
    size_t n = (size_t)rows * cols;
    fg_cpu_pool *pool;
    CHECK_EQ(fg_cpu_pool_create(2, &pool), 0);
    float *x = random_floats(n, -2, 3), *g = random_floats((size_t)cols, 0.5, 1.5);
    float *b = random_floats((size_t)cols, -1, 1), *w = random_floats(n, -1, 1);
    float *y = malloc(n * sizeof *y), *dx = malloc(n * sizeof *dx);
    float *mean = malloc((size_t)rows * sizeof *mean), *rstd = malloc((size_t)rows * sizeof *rstd);
    float *dg = calloc((size_t)cols, sizeof *dg), *db = calloc((size_t)cols, sizeof *db);
    fg_cpu_layernorm_forward(pool, rms, rows, cols, x, g, b, 1e-5f, mean, rstd, y);
    fg_cpu_layernorm_backward(pool, rms, rows, cols, x, g, mean, rstd, w, dx, dg, db, 0);
    double *xd = to_double(x, n), *gd = to_double(g, (size_t)cols), *bd = to_double(b, (size_t)cols);
    double *wd = to_double(w, n), *yd = malloc(n * sizeof *yd);
    ref_layernorm(rms, rows, cols, xd, gd, bd, 1e-5, yd);
    double fe = max_rel(y, yd, n, 1.0); /* y is O(1): near-zero outputs cancel */
    printf("%s forward: max rel error %.2e\n", rms ? "rmsnorm" : "layernorm", fe);
    CHECK(fe < 1e-5, "forward error %.3e", fe);
    ln_ctx c = {.rms = rms, .rows = rows, .cols = cols, .x = xd, .g = gd, .b = bd};
    check_grad("dx", ln_ref, &c, xd, n, wd, n, dx, 1e-3);
    c.wrt = 1;
    check_grad("dgamma", ln_ref, &c, gd, (size_t)cols, wd, n, dg, 1e-3);
    if (!rms) {
        c.wrt = 2;
        check_grad("dbeta", ln_ref, &c, bd, (size_t)cols, wd, n, db, 1e-3);
    }
    /* accumulate adds onto what is there */
    float *dg2 = malloc((size_t)cols * sizeof *dg2);
    for (int i = 0; i < cols; i++)
        dg2[i] = 1.0f;
    fg_cpu_layernorm_backward(pool, rms, rows, cols, x, g, mean, rstd, w, NULL, dg2, NULL, 1);
    int acc_ok = 1;
    for (int i = 0; i < cols; i++)
        acc_ok &= fabsf(dg2[i] - (dg[i] + 1.0f)) <= 1e-5f * (1.0f + fabsf(dg[i]));
    CHECK(acc_ok, "accumulate = 1 does not add to dgamma");
    free(dg2);
    free(x); free(g); free(b); free(w); free(y); free(dx); free(mean); free(rstd);
    free(dg); free(db); free(xd); free(gd); free(bd); free(wd); free(yd);
    fg_cpu_pool_destroy(pool);
    return 0;
}

static int case_layernorm(void) { return run_norm(0); }
static int case_rmsnorm(void) { return run_norm(1); }

/* ---- embedding ----------------------------------------------------------------------- */

static int case_embedding(void)
{
    int vocab = 11, dim = 9, n = 40;
    fg_cpu_pool *pool;
    CHECK_EQ(fg_cpu_pool_create(2, &pool), 0);
    int32_t ids[40];
    for (int i = 0; i < n; i++)
        ids[i] = (i * 7 + 3) % vocab; /* repeated ids: gradients must sum */
    float *table = random_floats((size_t)vocab * dim, -1, 1), *out = malloc((size_t)n * dim * 4);
    float *dout = random_floats((size_t)n * dim, -1, 1), *dt = malloc((size_t)vocab * dim * 4);
    fg_cpu_embedding_forward(pool, ids, n, dim, table, out, 0);
    int same = 1;
    for (int i = 0; i < n; i++)
        same &= memcmp(out + (size_t)i * dim, table + (size_t)ids[i] * dim, (size_t)dim * 4) == 0;
    CHECK(same, "forward rows are not the table's rows");
    fg_cpu_embedding_forward(pool, ids, n, dim, table, out, 1);
    CHECK(out[5] == 2 * table[(size_t)ids[0] * dim + 5], "accumulate doubles the row");
    fg_cpu_embedding_backward(pool, ids, n, dim, vocab, dout, dt, 0);
    double worst = 0.0;
    for (int v = 0; v < vocab; v++)
        for (int d = 0; d < dim; d++) {
            double ref = 0.0;
            for (int i = 0; i < n; i++)
                ref += ids[i] == v ? dout[(size_t)i * dim + d] : 0.0;
            double e = fabs(dt[(size_t)v * dim + d] - ref);
            worst = e > worst ? e : worst;
        }
    CHECK(worst < 1e-5, "embedding gradient error %.3e", worst);
    free(table); free(out); free(dout); free(dt);
    fg_cpu_pool_destroy(pool);
    return 0;
}

/* ---- attention ------------------------------------------------------------------------ */

typedef struct attn_ctx {
    fg_cpu_attn_shape shape;
} attn_ctx;

static void attn_ref(const void *p, const double *qkv, double *y)
{
    ref_attention(&((const attn_ctx *)p)->shape, qkv, y);
}

static void run_attention_p(int batch, int seq, int heads, int dim, int causal, float p)
{
    fg_cpu_attn_shape a = {batch, seq, heads, dim, causal, p, 5, 1000, 0, NULL};
    int C = heads * dim;
    size_t nq = (size_t)batch * seq * 3 * C, ny = (size_t)batch * seq * C;
    fg_cpu_pool *pool;
    CHECK_EQ(fg_cpu_pool_create(2, &pool), 0);
    float *qkv = random_floats(nq, -1.5, 1.5), *w = random_floats(ny, -1, 1);
    float *y = malloc(ny * 4), *dqkv = malloc(nq * 4);
    float *lse = malloc((size_t)batch * heads * seq * 4);
    void *ws = malloc(fg_cpu_attention_workspace(&a, fg_cpu_pool_threads(pool)));
    fg_cpu_attention_forward(pool, &a, qkv, y, lse, ws);
    fg_cpu_attention_backward(pool, &a, qkv, y, lse, w, dqkv, ws);
    double *qd = to_double(qkv, nq), *wd = to_double(w, ny), *yd = malloc(ny * sizeof *yd);
    ref_attention(&a, qd, yd);
    double fe = max_rel(y, yd, ny, 1e-2);
    char what[96];
    snprintf(what, sizeof what, "attention B%d T%d H%d D%d %s dropout %g", batch, seq, heads,
             dim, causal ? "causal" : "full", (double)p);
    printf("%s forward: max rel error %.2e\n", what, fe);
    CHECK(fe < 1e-4, "%s: forward error %.3e", what, fe);
    attn_ctx c = {a};
    check_grad(what, attn_ref, &c, qd, nq, wd, ny, dqkv, 2e-3);
    free(qkv); free(w); free(y); free(dqkv); free(lse); free(ws); free(qd); free(wd); free(yd);
    fg_cpu_pool_destroy(pool);
}

static void run_attention(int batch, int seq, int heads, int dim, int causal)
{
    run_attention_p(batch, seq, heads, dim, causal, 0.0f);
}

static int case_attention_causal(void)
{
    run_attention(2, 67, 3, 5, 1);   /* two query blocks, the second partial; odd D */
    run_attention(1, 130, 2, 8, 1);  /* three blocks */
    run_attention(1, 1, 1, 3, 1);    /* one token sees itself only */
    return 0;
}

static int case_attention_full(void)
{
    run_attention(2, 67, 3, 7, 0);
    run_attention(1, 9, 4, 4, 0);
    return 0;
}

/* The same draws in forward and backward, across query blocks. */
static int case_attention_dropout(void)
{
    run_attention_p(2, 70, 2, 6, 1, 0.25f);
    run_attention_p(1, 20, 3, 4, 0, 0.5f);
    return 0;
}

static int attention_threads_agree(int batch, int heads, int seq, int dim, double tol);

/* 1 and 2 pool threads (below), and the workspace at T = 1024 against what a T x T score
 * matrix needs. */
static int case_attention_memory(void)
{
    fg_cpu_attn_shape a = {.batch = 1, .seq = 1024, .heads = 12, .head_dim = 64, .causal = 1};
    size_t ws = fg_cpu_attention_workspace(&a, 1), ws2 = fg_cpu_attention_workspace(&a, 2);
    size_t lse = (size_t)a.heads * a.seq * sizeof(float);
    size_t naive = (size_t)a.heads * a.seq * a.seq * sizeof(float) * 2; /* scores + probs */
    printf("attention T=1024 H=12 D=64 per sample: workspace %zu KiB per thread + lse %zu KiB; "
           "a naive kernel keeps %zu MiB of scores and probabilities\n", ws >> 10, lse >> 10,
           naive >> 20);
    size_t B = FG_CPU_ATTN_BLOCK, T = 1024, D = 64; /* the f32 scores and dP, and bf16's */
    CHECK_EQ(ws, (2 * B * T + B * T + B * D + 2 * T * D + B * T + T * D) * sizeof(float));
    CHECK_EQ(ws2, 2 * ws);
    /* four items, each run whole by one thread: the same bits; one item, whose gemms the
     * pool splits by blocks of C: OpenBLAS rounds a block's edge tiles its own way, so the
     * bits follow the thread count (7.5e-8 of the largest output measured on a Zen 3), the
     * values agree to rounding */
    return attention_threads_agree(2, 2, 150, 16, 0.0) ||
           attention_threads_agree(1, 1, 1024, 64, 1e-5);
}

static double max_abs(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)x[i]));
    return m;
}

static double max_diff(const float *x, const float *y, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)x[i] - (double)y[i]));
    return m;
}

/* batch x heads items at 1 and 2 pool threads: output and input gradient within tol of their
 * largest value (0: the same bits). */
static int attention_threads_agree(int batch, int heads, int seq, int dim, double tol)
{
    fg_cpu_attn_shape s = {.batch = batch, .seq = seq, .heads = heads, .head_dim = dim,
                           .causal = 1};
    size_t ny = (size_t)batch * seq * heads * dim, nq = 3 * ny;
    float *qkv = random_floats(nq, -1, 1), *dy = random_floats(ny, -1, 1);
    float *y[2], *dq[2], *lse2[2];
    void *w = malloc(fg_cpu_attention_workspace(&s, 2));
    for (int t = 0; t < 2; t++) {
        fg_cpu_pool *pool;
        CHECK_EQ(fg_cpu_pool_create(t + 1, &pool), 0);
        y[t] = malloc(ny * 4);
        dq[t] = malloc(nq * 4);
        lse2[t] = malloc((size_t)batch * heads * seq * 4);
        fg_cpu_attention_forward(pool, &s, qkv, y[t], lse2[t], w);
        fg_cpu_attention_backward(pool, &s, qkv, y[t], lse2[t], dy, dq[t], w);
        fg_cpu_pool_destroy(pool);
    }
    double dy_rel = max_diff(y[0], y[1], ny) / max_abs(y[0], ny);
    double dq_rel = max_diff(dq[0], dq[1], nq) / max_abs(dq[0], nq);
    printf("attention B%d H%d T%d D%d, 1 against 2 pool threads: output %.2g, dqkv %.2g of "
           "their largest (bound %g)\n", batch, heads, seq, dim, dy_rel, dq_rel, tol);
    if (tol == 0)
        CHECK(memcmp(y[0], y[1], ny * 4) == 0 && memcmp(dq[0], dq[1], nq * 4) == 0,
              "attention differs between 1 and 2 pool threads");
    CHECK(dy_rel <= tol && dq_rel <= tol, "attention: 1 and 2 pool threads disagree");
    free(qkv); free(dy); free(w);
    for (int t = 0; t < 2; t++) {
        free(y[t]);
        free(dq[t]);
        free(lse2[t]);
    }
    return 0;
}

/* ---- bf16 storage ---------------------------------------------------------------------- */

/* sqrt(sum (x - ref)^2 / sum ref^2) */
static double norm_rel(const float *x, const float *ref, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]);
        r += (double)ref[i] * ref[i];
    }
    return sqrt(d / (r > 0 ? r : 1));
}

static uint16_t *to_bf16(const float *x, size_t n)
{
    uint16_t *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++)
        b[i] = fg_f32_to_bf16(x[i]);
    return b;
}

static float *widened(const uint16_t *b, size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = fg_bf16_to_f32(b[i]);
    return x;
}

/* The bf16 kernels (no gemm hook: their bf16 products widened for OpenBLAS) against the f32
 * kernels on the same values: y and dqkv within what bf16's roundings of P, dS and the
 * outputs allow (2^-9 each), lse as the f32 scores give it; and the same bits on 1 and 2
 * pool threads. */
static void run_attention_bf16(int batch, int seq, int heads, int kv_heads, int dim, int causal,
                               float p)
{
    fg_cpu_attn_shape a = {batch, seq, heads, dim, causal, p, 5, 1000, kv_heads, NULL};
    size_t C = (size_t)heads * dim, W = (size_t)(heads + 2 * kv_heads) * dim;
    size_t nq = (size_t)batch * seq * W, ny = (size_t)batch * seq * C;
    size_t nl = (size_t)batch * heads * seq;
    float *q32 = random_floats(nq, -1.5, 1.5), *dy32 = random_floats(ny, -1, 1);
    uint16_t *qkv = to_bf16(q32, nq), *dy = to_bf16(dy32, ny);
    free(q32);
    free(dy32);
    q32 = widened(qkv, nq);
    dy32 = widened(dy, ny);
    void *ws = malloc(fg_cpu_attention_workspace(&a, 2));
    float *y32 = malloc(ny * 4), *g32 = malloc(nq * 4), *l32 = malloc(nl * 4);
    fg_cpu_pool *pool;
    CHECK_EQ(fg_cpu_pool_create(2, &pool), 0);
    fg_cpu_attention_forward(pool, &a, q32, y32, l32, ws);
    uint16_t *y[2], *g[2];
    float *l[2];
    for (int t = 0; t < 2; t++) {
        fg_cpu_pool *tp;
        CHECK_EQ(fg_cpu_pool_create(2 - t, &tp), 0);
        y[t] = malloc(ny * 2);
        g[t] = malloc(nq * 2);
        l[t] = malloc(nl * 4);
        fg_cpu_attention_forward_bf16(tp, &a, qkv, y[t], l[t], ws);
        fg_cpu_attention_backward_bf16(tp, &a, qkv, y[t], l[t], dy, g[t], ws);
        fg_cpu_pool_destroy(tp);
    }
    /* the f32 backward from the bf16 forward's y (rowsum(dY * Y) reads it) */
    float *yb = widened(y[0], ny), *gb = widened(g[0], nq);
    fg_cpu_attention_backward(pool, &a, q32, yb, l32, dy32, g32, ws);
    float *yw = widened(y[0], ny);
    double ye = norm_rel(yw, y32, ny), ge = norm_rel(gb, g32, nq);
    double ymax = max_diff(yw, y32, ny) / max_abs(y32, ny);
    double gmax = max_diff(gb, g32, nq) / max_abs(g32, nq);
    double le = max_diff(l[0], l32, nl) / max_abs(l32, nl);
    printf("attention bf16 B%d T%d H%d KV%d D%d %s dropout %g against f32: y %.2e (largest "
           "%.2e), dqkv %.2e (largest %.2e), lse %.2e\n", batch, seq, heads, kv_heads, dim,
           causal ? "causal" : "full", (double)p, ye, ymax, ge, gmax, le);
    CHECK(ye < 5e-3 && ymax < 1e-2, "attention bf16: y off the f32 kernel's");
    CHECK(ge < 1e-2 && gmax < 2e-2, "attention bf16: dqkv off the f32 kernel's");
    CHECK(le < 1e-6, "attention bf16: lse off the f32 kernel's");
    CHECK(memcmp(y[0], y[1], ny * 2) == 0 && memcmp(g[0], g[1], nq * 2) == 0 &&
              memcmp(l[0], l[1], nl * 4) == 0,
          "attention bf16 differs between 2 and 1 pool threads");
    for (int t = 0; t < 2; t++) {
        free(y[t]);
        free(g[t]);
        free(l[t]);
    }
    free(qkv); free(dy); free(q32); free(dy32); free(ws); free(y32); free(g32); free(l32);
    free(yb); free(gb); free(yw);
    fg_cpu_pool_destroy(pool);
}

static int case_attention_bf16(void)
{
    run_attention_bf16(2, 67, 3, 3, 5, 1, 0.0f);  /* two query blocks, odd D */
    run_attention_bf16(2, 130, 2, 2, 32, 1, 0.0f); /* three blocks */
    run_attention_bf16(1, 9, 4, 4, 16, 0, 0.0f);
    run_attention_bf16(2, 70, 4, 2, 8, 1, 0.0f);  /* grouped: two query heads per key */
    run_attention_bf16(2, 70, 2, 2, 6, 1, 0.25f); /* the f32 kernel's draws */
    run_attention_bf16(1, 1, 1, 1, 3, 1, 0.0f);
    return 0;
}

/* One query against the cache: row pos of the causal forward over the whole window, for
 * every pos and every (batch, head), against the float64 reference; more heads than one
 * workspace chunk (2 * BLOCK) holds. */
static void run_attention_decode(int batch, int seq, int heads, int dim)
{
    fg_cpu_attn_shape a = {.batch = batch, .seq = seq, .heads = heads, .head_dim = dim,
                           .causal = 1};
    int C = heads * dim;
    size_t nq = (size_t)batch * seq * 3 * C, ny = (size_t)batch * seq * C;
    fg_cpu_pool *pool;
    CHECK_EQ(fg_cpu_pool_create(2, &pool), 0);
    float *qkv = random_floats(nq, -1.5, 1.5), *row = malloc((size_t)batch * C * 4);
    void *ws = malloc(fg_cpu_attention_workspace(&a, 1)); /* the least: one thread */
    double *qd = to_double(qkv, nq), *yd = malloc(ny * sizeof *yd);
    ref_attention(&a, qd, yd);
    double worst = 0;
    for (int pos = 0; pos < seq; pos++) {
        fg_cpu_attention_decode(pool, &a, pos, qkv, row, ws);
        for (int b = 0; b < batch; b++)
            for (int c = 0; c < C; c++) {
                double ref = yd[((size_t)b * seq + pos) * C + c];
                double e = fabs((double)row[(size_t)b * C + c] - ref) / (fabs(ref) + 1e-2);
                worst = e > worst ? e : worst;
            }
    }
    printf("attention_decode B%d T%d H%d D%d: every position, max rel error %.2e\n", batch, seq,
           heads, dim, worst);
    CHECK(worst < 1e-5, "attention_decode: error %.3e", worst);
    free(qkv); free(row); free(ws); free(qd); free(yd);
    fg_cpu_pool_destroy(pool);
}

static int case_attention_decode(void)
{
    run_attention_decode(2, 67, 3, 5);
    run_attention_decode(1, 9, 2 * FG_CPU_ATTN_BLOCK + 3, 4);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(void);
    } cases[] = {
        {"layernorm", case_layernorm},         {"rmsnorm", case_rmsnorm},
        {"embedding", case_embedding},         {"attention_causal", case_attention_causal},
        {"attention_full", case_attention_full}, {"attention_dropout", case_attention_dropout},
        {"attention_memory", case_attention_memory}, {"attention_decode", case_attention_decode},
        {"attention_bf16", case_attention_bf16},
    };
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof *cases; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            cases[i].run();
            return fg_test_report(argv[1]);
        }
    fprintf(stderr, "usage: %s CASE\n", argv[0]);
    return 2;
}
