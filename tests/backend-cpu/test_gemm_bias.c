/* gemm_bias (ABI 1.2) and the bf16 gemms: f32 gemm_bias bitwise against gemm then bias_add
 * (the CPU adds the bias to each block after its sgemm); half gemm_bias rounded once
 * against a double reference; bf16 = native (oneDNN on avx512_bf16) against bf16 = emulated
 * within bf16's rounding; the "bf16 emulated" note, said once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_backend tb;
#define Q tb.state, tb.queue

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* v rounded to nearest even with `bits` significant bits (normal range) */
static double round_sig(double v, int bits)
{
    if (v == 0.0)
        return 0.0;
    int e;
    frexp(v, &e);
    double ulp = ldexp(1.0, e - bits);
    return rint(v / ulp) * ulp;
}

/* One bf16 ulp at v's magnitude */
static double bf16_ulp(double v)
{
    int e;
    frexp(v == 0.0 ? 1e-30 : v, &e);
    return ldexp(1.0, e - 8);
}

/* n values U(lo, hi) already bf16 (held both as f32 and as bf16 bits) */
static void fill_bf16(float *f, uint16_t *h, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)round_sig(test_uniform(lo, hi), 8);
        h[i] = (uint16_t)(float_bits(f[i]) >> 16);
    }
}

static float bf16_float(uint16_t h)
{
    return bits_float((uint32_t)h << 16);
}

/* ---- f32: bitwise gemm then bias_add ---------------------------------------------------- */

static void f32_case(int ta, int tb_, int m, int n, int k, int pad)
{
    int lda = (ta ? m : k) + pad, ldb = (tb_ ? k : n) + pad, ldc = n + pad;
    size_t as = (size_t)(ta ? k : m) * lda, bs = (size_t)(tb_ ? n : k) * ldb;
    size_t cs = (size_t)m * ldc;
    float *a = test_alloc(as * 4), *b = test_alloc(bs * 4), *bias = test_alloc((size_t)n * 4);
    float *c1 = test_alloc(cs * 4), *c2 = test_alloc(cs * 4), *c3 = test_alloc(cs * 4);
    test_fill_uniform(a, as, -1, 1);
    test_fill_uniform(b, bs, -1, 1);
    test_fill_uniform(bias, (size_t)n, -1, 1);
    test_fill_uniform(c1, cs, -1, 1);
    memcpy(c2, c1, cs * 4);
    memcpy(c3, c1, cs * 4);
    CHECK_OK(tb.vt->gemm(Q, FG_F32, FG_F32, FG_F32, ta, tb_, m, n, k, 1.0f, a, lda, b, ldb,
                         0.0f, c1, ldc, &test_err));
    memcpy(c3, c1, cs * 4);
    for (int i = 0; i < m; i++) /* bias_add takes dense rows: row by row past the padding */
        CHECK_OK(tb.vt->bias_add(Q, FG_F32, FG_F32, c1 + (size_t)i * ldc, bias, 1, n, 1,
                                 &test_err));
    CHECK_OK(tb.vt->gemm_bias(Q, FG_F32, FG_F32, FG_F32, ta, tb_, m, n, k, a, lda, b, ldb, bias,
                              c2, ldc, &test_err));
    size_t diff = 0;
    for (size_t i = 0; i < cs; i++)
        diff += float_bits(c1[i]) != float_bits(c2[i]);
    CHECK(diff == 0, "gemm_bias f32 ta=%d tb=%d %dx%dx%d pad=%d: %zu of %zu values differ "
          "from gemm + bias_add", ta, tb_, m, n, k, pad, diff, cs);
    /* bias NULL: the plain product */
    CHECK_OK(tb.vt->gemm_bias(Q, FG_F32, FG_F32, FG_F32, ta, tb_, m, n, k, a, lda, b, ldb, NULL,
                              c2, ldc, &test_err));
    diff = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            diff += float_bits(c2[(size_t)i * ldc + j]) != float_bits(c3[(size_t)i * ldc + j]);
    CHECK(diff == 0, "gemm_bias f32 without bias %dx%dx%d: %zu values differ from gemm", m, n,
          k, diff);
    free(a);
    free(b);
    free(bias);
    free(c1);
    free(c2);
    free(c3);
}

static void test_f32(void)
{
    /* small (one thread), split by rows (m > n), by columns, the MLP's fc1 and fc3 */
    static const int shapes[][3] = {{7, 33, 129}, {300, 40, 64}, {40, 300, 64},
                                    {256, 256, 784}, {256, 10, 256}, {1, 1, 1}};
    for (int s = 0; s < 6; s++)
        for (int t = 0; t < 4; t++)
            f32_case(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], (s + t) % 2);
    float x[4] = {0};
    fg_status st = tb.vt->gemm_bias(Q, FG_F32, FG_F32, FG_F32, 0, 0, 2, 2, 2, x, 1, x, 2, x, x,
                                    2, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "gemm_bias: lda = 1"),
          "got %s: %s", fg_status_name(st), test_err.message);
}

/* ---- half: one rounding ----------------------------------------------------------------- */

typedef struct bf16_problem {
    int m, n, k;
    float *a, *b, *bias; /* f32 copies of the bf16 values; a (m, k), b (n, k) as linear's W */
    uint16_t *ah, *bh, *biash;
    double *ref; /* a b^T + bias in double */
} bf16_problem;

static void problem_make(bf16_problem *p, int m, int n, int k)
{
    p->m = m, p->n = n, p->k = k;
    size_t as = (size_t)m * k, bs = (size_t)n * k;
    p->a = test_alloc(as * 4), p->b = test_alloc(bs * 4), p->bias = test_alloc((size_t)n * 4);
    p->ah = test_alloc(as * 2), p->bh = test_alloc(bs * 2), p->biash = test_alloc((size_t)n * 2);
    p->ref = test_alloc((size_t)m * n * 8);
    fill_bf16(p->a, p->ah, as, -1, 1);
    fill_bf16(p->b, p->bh, bs, -0.2, 0.2);
    fill_bf16(p->bias, p->biash, (size_t)n, -2, 2);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0.0;
            for (int l = 0; l < k; l++)
                acc += (double)p->a[(size_t)i * k + l] * (double)p->b[(size_t)j * k + l];
            p->ref[(size_t)i * n + j] = acc + p->bias[j];
        }
}

static void problem_free(bf16_problem *p)
{
    free(p->a), free(p->b), free(p->bias), free(p->ah), free(p->bh), free(p->biash),
        free(p->ref);
}

/* Of the bf16 values y: how many are the reference rounded once, and the largest distance
 * from it in ulps. */
static size_t rounded_once(const bf16_problem *p, const uint16_t *y, double *worst)
{
    size_t same = 0;
    *worst = 0.0;
    for (size_t i = 0; i < (size_t)p->m * p->n; i++) {
        double want = p->ref[i], got = bf16_float(y[i]);
        same += got == round_sig(want, 8);
        double d = fabs(got - want) / bf16_ulp(want);
        if (d > *worst)
            *worst = d;
    }
    return same;
}

static void test_bf16_once(void)
{
    bf16_problem p;
    problem_make(&p, 128, 96, 300);
    size_t cn = (size_t)p.m * p.n;
    uint16_t *y = test_alloc(cn * 2);
    CHECK_OK(tb.vt->gemm_bias(Q, FG_BF16, FG_BF16, FG_BF16, 0, 1, p.m, p.n, p.k, p.ah, p.k, p.bh,
                              p.k, p.biash, y, p.n, &test_err));
    double worst;
    size_t fused = rounded_once(&p, y, &worst);
    /* f32 accumulation moves a sum by ~1e-6 of it: only a value that close to a bf16
     * midpoint may round the other way */
    CHECK(worst < 1.0 && fused >= cn * 995 / 1000, "gemm_bias bf16: %zu of %zu rounded once, "
          "worst %.3f ulp", fused, cn, worst);
    /* the old path, gemm rounded to bf16 and then the bias added, rounds twice */
    CHECK_OK(tb.vt->gemm(Q, FG_BF16, FG_BF16, FG_BF16, 0, 1, p.m, p.n, p.k, 1.0f, p.ah, p.k,
                         p.bh, p.k, 0.0f, y, p.n, &test_err));
    CHECK_OK(tb.vt->bias_add(Q, FG_BF16, FG_BF16, y, p.biash, p.m, p.n, 1, &test_err));
    double worst2;
    size_t twice = rounded_once(&p, y, &worst2);
    printf("  bf16 %dx%dx%d: gemm_bias rounds once in %zu of %zu (worst %.3f ulp); gemm + "
           "bias_add in %zu (worst %.3f ulp)\n", p.m, p.n, p.k, fused, cn, worst, twice,
           worst2);
    CHECK(twice < fused, "gemm + bias_add matched the one rounding as often (%zu) as "
          "gemm_bias (%zu)", twice, fused);
    free(y);
    problem_free(&p);
}

/* f16 runs on the emulation: f32 product plus bias, one rounding (11 significant bits) */
static void test_f16_once(void)
{
    int m = 33, n = 17, k = 65;
    float *a = test_alloc((size_t)m * k * 4), *b = test_alloc((size_t)n * k * 4);
    float *bias = test_alloc((size_t)n * 4), *y = test_alloc((size_t)m * n * 4);
    uint16_t *ah = test_alloc((size_t)m * k * 2), *bh = test_alloc((size_t)n * k * 2);
    uint16_t *biash = test_alloc((size_t)n * 2), *yh = test_alloc((size_t)m * n * 2);
    test_fill_uniform(a, (size_t)m * k, -1, 1);
    test_fill_uniform(b, (size_t)n * k, -1, 1);
    test_fill_uniform(bias, (size_t)n, -1, 1);
    CHECK_OK(tb.vt->cast(Q, FG_F16, FG_F32, ah, a, (size_t)m * k, &test_err));
    CHECK_OK(tb.vt->cast(Q, FG_F16, FG_F32, bh, b, (size_t)n * k, &test_err));
    CHECK_OK(tb.vt->cast(Q, FG_F16, FG_F32, biash, bias, (size_t)n, &test_err));
    CHECK_OK(tb.vt->cast(Q, FG_F32, FG_F16, a, ah, (size_t)m * k, &test_err));
    CHECK_OK(tb.vt->cast(Q, FG_F32, FG_F16, b, bh, (size_t)n * k, &test_err));
    CHECK_OK(tb.vt->cast(Q, FG_F32, FG_F16, bias, biash, (size_t)n, &test_err));
    CHECK_OK(tb.vt->gemm_bias(Q, FG_F16, FG_F16, FG_F16, 0, 1, m, n, k, ah, k, bh, k, biash, yh,
                              n, &test_err));
    CHECK_OK(tb.vt->cast(Q, FG_F32, FG_F16, y, yh, (size_t)m * n, &test_err));
    size_t off = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = bias[j];
            for (int l = 0; l < k; l++)
                acc += (double)a[(size_t)i * k + l] * (double)b[(size_t)j * k + l];
            off += y[(size_t)i * n + j] != (float)round_sig(acc, 11);
        }
    CHECK(off <= 1, "gemm_bias f16: %zu of %d values are not the sum rounded once", off, m * n);
    free(a), free(b), free(bias), free(y), free(ah), free(bh), free(biash), free(yh);
}

/* ---- bf16 native against emulated ------------------------------------------------------- */

static int cpu_bf16(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
#else
    return 0;
#endif
}

/* |x - y| within bf16 rounding of the result (1 ulp of the larger, plus the f32 sum's
 * reordering relative to the sum of |terms|) */
static size_t bf16_far(const float *x, const float *y, size_t n, double terms)
{
    size_t far = 0;
    for (size_t i = 0; i < n; i++) {
        double big = fabs(x[i]) > fabs(y[i]) ? fabs(x[i]) : fabs(y[i]);
        far += fabs((double)x[i] - (double)y[i]) > bf16_ulp(big) + 1e-5 * terms;
    }
    return far;
}

/* The linear layer's three products in bf16-mixed on both backends. */
static void test_native_vs_emulated(test_backend *native, test_backend *emul, int rows, int in,
                                    int out)
{
    float *x = test_alloc((size_t)rows * in * 4), *w = test_alloc((size_t)out * in * 4);
    float *bias = test_alloc((size_t)out * 4), *dy = test_alloc((size_t)rows * out * 4);
    uint16_t *xh = test_alloc((size_t)rows * in * 2), *wh = test_alloc((size_t)out * in * 2);
    uint16_t *bh = test_alloc((size_t)out * 2), *dyh = test_alloc((size_t)rows * out * 2);
    fill_bf16(x, xh, (size_t)rows * in, -1, 1);
    fill_bf16(w, wh, (size_t)out * in, -0.3, 0.3);
    fill_bf16(bias, bh, (size_t)out, -1, 1);
    fill_bf16(dy, dyh, (size_t)rows * out, -1, 1);
    test_backend *be[2] = {native, emul};
    uint16_t *y[2], *dx[2];
    float *dw[2], yf[2][64], dxf[2][64];
    for (int s = 0; s < 2; s++) {
        y[s] = test_alloc((size_t)rows * out * 2);
        dx[s] = test_alloc((size_t)rows * in * 2);
        dw[s] = test_alloc((size_t)out * in * 4);
        for (size_t i = 0; i < (size_t)out * in; i++)
            dw[s][i] = 0.5f; /* accumulate: dW += dy^T x */
        void *st = be[s]->state, *q = be[s]->queue;
        CHECK_OK(be[s]->vt->gemm_bias(st, q, FG_BF16, FG_BF16, FG_BF16, 0, 1, rows, out, in, xh,
                                      in, wh, in, bh, y[s], out, &test_err));
        CHECK_OK(be[s]->vt->gemm(st, q, FG_BF16, FG_BF16, FG_F32, 1, 0, out, in, rows, 1.0f, dyh,
                                 out, xh, in, 1.0f, dw[s], in, &test_err));
        CHECK_OK(be[s]->vt->gemm(st, q, FG_BF16, FG_BF16, FG_BF16, 0, 0, rows, in, out, 1.0f,
                                 dyh, out, wh, in, 0.0f, dx[s], in, &test_err));
    }
    size_t far = 0, nd = 0;
    for (size_t i = 0; i < (size_t)rows * out; i += 64) { /* y, in chunks of 64 */
        size_t c = (size_t)rows * out - i < 64 ? (size_t)rows * out - i : 64;
        for (int s = 0; s < 2; s++)
            for (size_t j = 0; j < c; j++)
                yf[s][j] = bf16_float(y[s][i + j]);
        far += bf16_far(yf[0], yf[1], c, in * 0.3);
        for (size_t j = 0; j < c; j++)
            nd += float_bits(yf[0][j]) != float_bits(yf[1][j]);
    }
    CHECK(far == 0, "bf16 native gemm_bias: %zu values beyond bf16 rounding of the emulation",
          far);
    for (size_t i = 0; i < (size_t)rows * in; i += 64) {
        size_t c = (size_t)rows * in - i < 64 ? (size_t)rows * in - i : 64;
        for (int s = 0; s < 2; s++)
            for (size_t j = 0; j < c; j++)
                dxf[s][j] = bf16_float(dx[s][i + j]);
        far += bf16_far(dxf[0], dxf[1], c, out * 0.3);
    }
    CHECK(far == 0, "bf16 native dx gemm: %zu values beyond bf16 rounding", far);
    /* f32 output, accumulated: only the f32 sum's order differs */
    size_t dw_far = 0;
    for (size_t i = 0; i < (size_t)out * in; i++)
        dw_far += fabs(dw[0][i] - dw[1][i]) > 1e-5 * (rows + 0.5);
    CHECK(dw_far == 0, "bf16 native dW gemm (f32 out, beta 1): %zu values differ beyond f32 "
          "reordering", dw_far);
    printf("  native vs emulated %dx%dx%d: y differs bitwise in %zu of %d values, all within "
           "bf16 rounding\n", rows, out, in, nd, rows * out);
    for (int s = 0; s < 2; s++)
        free(y[s]), free(dx[s]), free(dw[s]);
    free(x), free(w), free(bias), free(dy), free(xh), free(wh), free(bh), free(dyh);
}

/* Every transpose, both block directions (m > n: rows, else columns), padded leading
 * dimensions, C bf16 (beta 0 or 1: half gradients accumulate) or f32 (beta 1), native
 * against emulated. */
static void test_native_transposes(test_backend *native, test_backend *emul)
{
    static const int shapes[][3] = {{300, 40, 64}, {40, 300, 64}, {96, 96, 33}};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 12; t++) {
            int ta = t & 1, tb_ = (t >> 1) & 1, f32_out = (t >> 2) == 1, pad = 3;
            float beta = t >= 4 ? 1.0f : 0.0f;
            int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            int lda = (ta ? m : k) + pad, ldb = (tb_ ? k : n) + pad, ldc = n + pad;
            size_t as = (size_t)(ta ? k : m) * lda, bs = (size_t)(tb_ ? n : k) * ldb;
            size_t cs = (size_t)m * ldc;
            float *af = test_alloc(as * 4), *bf = test_alloc(bs * 4);
            uint16_t *ah = test_alloc(as * 2), *bh = test_alloc(bs * 2);
            fill_bf16(af, ah, as, -1, 1);
            fill_bf16(bf, bh, bs, -1, 1);
            float *out[2];
            for (int side = 0; side < 2; side++) {
                test_backend *t_ = side ? emul : native;
                out[side] = test_alloc(cs * 4);
                uint16_t *ch = test_alloc(cs * 2);
                for (size_t i = 0; i < cs; i++) {
                    out[side][i] = 0.25f;
                    ch[i] = 0x3e80; /* 0.25 */
                }
                CHECK_OK(t_->vt->gemm(t_->state, t_->queue, FG_BF16, FG_BF16,
                                      f32_out ? FG_F32 : FG_BF16, ta, tb_, m, n, k, 1.0f, ah, lda,
                                      bh, ldb, beta,
                                      f32_out ? (void *)out[side] : (void *)ch, ldc, &test_err));
                if (!f32_out)
                    for (size_t i = 0; i < cs; i++)
                        out[side][i] = bf16_float(ch[i]);
                free(ch);
            }
            size_t far = bf16_far(out[0], out[1], cs, k);
            CHECK(far == 0, "bf16 gemm native vs emulated ta=%d tb=%d %dx%dx%d %s %s: %zu "
                  "values apart", ta, tb_, m, n, k, f32_out ? "f32" : "bf16",
                  beta != 0.0f ? "+=" : "=", far);
            /* the padding between rows of C keeps its value, on both paths */
            for (int side = 0; side < 2; side++)
                for (int i = 0; i + 1 < m; i++)
                    for (int j = n; j < ldc; j++)
                        CHECK(out[side][(size_t)i * ldc + j] == 0.25f, "%s: padding of C "
                              "written", side ? "emulated" : "native");
            free(af), free(bf), free(ah), free(bh), free(out[0]), free(out[1]);
        }
}

/* bf16 = emulated says "bf16 emulated" on its first bf16 gemm, once; auto says it only on
 * a CPU without avx512_bf16 (or a build without oneDNN: then the note names that). */
static void test_note(test_backend *emul, test_backend *autob)
{
    uint16_t a[4] = {0x3f80, 0x3f80, 0x3f80, 0x3f80}, c[4];
    for (int i = 0; i < 3; i++)
        CHECK_OK(emul->vt->gemm(emul->state, emul->queue, FG_BF16, FG_BF16, FG_BF16, 0, 0, 2, 2,
                                2, 1.0f, a, 2, a, 2, 0.0f, c, 2, &test_err));
    CHECK(bf16_float(c[0]) == 2.0f, "bf16 gemm gave %g", bf16_float(c[0]));
    const char *log = emul->host.log, *hit = strstr(log, "bf16 emulated");
    CHECK(hit && !strstr(hit + 1, "bf16 emulated") && strstr(log, "backend.bf16 = emulated"),
          "bf16 = emulated logged: '%s'", log);
    CHECK_OK(autob->vt->gemm(autob->state, autob->queue, FG_BF16, FG_BF16, FG_BF16, 0, 0, 2, 2,
                             2, 1.0f, a, 2, a, 2, 0.0f, c, 2, &test_err));
    int said = strstr(autob->host.log, "bf16 emulated") != NULL;
#ifdef FG_TEST_WITH_DNNL
    CHECK(said == !cpu_bf16(), "bf16 = auto on a CPU %s avx512_bf16 logged: '%s'",
          cpu_bf16() ? "with" : "without", autob->host.log);
#else
    CHECK(said, "bf16 = auto without oneDNN did not say bf16 emulated: '%s'", autob->host.log);
#endif
    /* an f32 gemm on the emulated backend says nothing more about bf16 (its one line is
     * the gemm library's choice for the shape, [backend] gemm, at debug level) */
    float f[4] = {1, 1, 1, 1}, g[4];
    int before = emul->host.log_count;
    size_t log_before = strlen(emul->host.log);
    CHECK_OK(emul->vt->gemm(emul->state, emul->queue, FG_F32, FG_F32, FG_F32, 0, 0, 2, 2, 2,
                            1.0f, f, 2, f, 2, 0.0f, g, 2, &test_err));
    CHECK(emul->host.log_count <= before + 1 && !strstr(emul->host.log + log_before, "bf16") &&
              (emul->host.log_count == before ||
               strncmp(emul->host.log + log_before, "debug: cpu backend: gemm m2 n2 k2", 33) == 0),
          "an f32 gemm logged '%s'", emul->host.log + log_before);
}

static void test_options(void)
{
    test_backend t;
    fg_status st = test_backend_try_open_with(&t, 1, 1, 0, "bf16 = sometimes");
    CHECK(st != FG_OK && strstr(test_err.message, "bf16"), "bf16 = sometimes: %s: %s",
          fg_status_name(st), test_err.message);
    if (st == FG_OK)
        t.plugin->deinit(t.state);
    st = test_backend_try_open_with(&t, 1, 1, 0, "bf16 = native");
#ifdef FG_TEST_WITH_DNNL
    int can = cpu_bf16();
#else
    int can = 0;
#endif
    CHECK(can ? st == FG_OK : st == FG_UNAVAILABLE && strstr(test_err.message, "bf16 = native"),
          "bf16 = native on a machine that %s: %s: %s", can ? "has it" : "has it not",
          fg_status_name(st), test_err.message);
    if (st == FG_OK)
        t.plugin->deinit(t.state);
}

void test_group_gemm_bias(void)
{
    test_seed(18);
    test_backend_open(&tb, 1, 2, 0);
    test_f32();
    test_bf16_once();
    test_f16_once();
    test_backend_close(&tb);

    /* the same one-rounding check on the emulation */
    test_backend_open_with(&tb, 1, 2, 0, "bf16 = emulated");
    test_bf16_once();
    test_backend_close(&tb);

    test_backend native, emul, autob;
    test_backend_open_with(&native, 1, 2, 0, NULL);
    test_backend_open_with(&emul, 1, 2, 0, "bf16 = emulated");
    test_backend_open_with(&autob, 1, 1, 0, "bf16 = auto");
    printf("  this CPU %s avx512_bf16\n", cpu_bf16() ? "has" : "lacks");
    test_native_vs_emulated(&native, &emul, 200, 96, 72);
    test_native_vs_emulated(&native, &emul, 256, 784, 256); /* the MLP's fc1, two blocks */
    test_native_transposes(&native, &emul);
    test_note(&emul, &autob);
    test_backend_close(&native);
    test_backend_close(&emul);
    test_backend_close(&autob);
    test_options();
}
