/* [backend] gemm (plugins/backend-cpu/cpu_gemm_choice.c): validated; oneDNN's f32 matmul
 * against OpenBLAS on assorted shapes, transposes, strides and alpha/beta (and gemm_bias),
 * both against a double reference; the fixed choice honoured and logged per shape; auto's
 * timed choice logged with both times. Without oneDNN, `onednn` is refused with a message
 * saying so. The group gemm_generic runs under OPENBLAS_CORETYPE=Prescott (ctest's
 * ENVIRONMENT): on an AVX2 or AVX-512 CPU the notice must be logged and auto, and the
 * default (gemm unset), must take oneDNN; on an older CPU the notice must be absent. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* oneDNN and OpenBLAS sum the same products in different orders: per element,
 * |onednn - openblas| <= TOL * (|alpha| sum |a_ik b_kj| + |beta c_ij| + |bias_j|). */
#define TOL 1e-5

typedef struct gemm_case {
    int ta, tb, m, n, k, pad;
    float alpha, beta;
    int bias; /* gemm_bias (alpha 1, beta 0) */
} gemm_case;

/* Small products run on the calling thread, large ones split across the pool; the strided
 * cases have lda, ldb, ldc wider than the rows. */
static const gemm_case cases[] = {
    {0, 0, 7, 5, 3, 0, 1.0f, 0.0f, 0},      {0, 1, 33, 17, 29, 0, 1.0f, 1.0f, 0},
    {1, 0, 64, 48, 40, 3, 0.5f, 0.0f, 0},   {1, 1, 19, 70, 55, 5, -1.5f, 0.25f, 0},
    {0, 0, 128, 256, 784, 0, 1.0f, 0.0f, 0}, {1, 0, 256, 784, 128, 0, 1.0f, 1.0f, 0},
    {0, 1, 128, 784, 256, 7, 2.0f, -1.0f, 0}, {0, 0, 96, 40, 64, 2, 1.0f, 0.0f, 1},
    {0, 1, 128, 256, 784, 0, 1.0f, 0.0f, 1}, {1, 1, 50, 33, 21, 4, 1.0f, 0.0f, 1},
};
#define NCASES (sizeof cases / sizeof cases[0])

typedef struct gemm_io {
    int lda, ldb, ldc;
    size_t as, bs, cs;
    float *a, *b, *bias, *c0;
} gemm_io;

static void io_make(gemm_io *io, const gemm_case *g)
{
    io->lda = (g->ta ? g->m : g->k) + g->pad;
    io->ldb = (g->tb ? g->k : g->n) + g->pad;
    io->ldc = g->n + g->pad;
    io->as = (size_t)(g->ta ? g->k : g->m) * io->lda;
    io->bs = (size_t)(g->tb ? g->n : g->k) * io->ldb;
    io->cs = (size_t)g->m * io->ldc;
    io->a = test_alloc(io->as * 4);
    io->b = test_alloc(io->bs * 4);
    io->bias = test_alloc((size_t)g->n * 4);
    io->c0 = test_alloc(io->cs * 4);
    test_fill_uniform(io->a, io->as, -1, 1);
    test_fill_uniform(io->b, io->bs, -1, 1);
    test_fill_uniform(io->bias, (size_t)g->n, -1, 1);
    test_fill_uniform(io->c0, io->cs, -1, 1);
}

static void io_free(gemm_io *io)
{
    free(io->a);
    free(io->b);
    free(io->bias);
    free(io->c0);
}

static float at(const float *x, int trans, int ld, int row, int col)
{
    return trans ? x[(size_t)col * ld + row] : x[(size_t)row * ld + col];
}

/* The double reference of element (i, j) and the size of its terms. */
static double reference(const gemm_case *g, const gemm_io *io, int i, int j, double *scale)
{
    double sum = 0, mag = 0;
    for (int p = 0; p < g->k; p++) {
        double t = (double)at(io->a, g->ta, io->lda, i, p) * at(io->b, g->tb, io->ldb, p, j);
        sum += t;
        mag += fabs(t);
    }
    double c = io->c0[(size_t)i * io->ldc + j];
    if (g->bias) {
        *scale = mag + fabs(io->bias[j]);
        return sum + io->bias[j];
    }
    *scale = fabs(g->alpha) * mag + (g->beta != 0.0f ? fabs(g->beta * c) : 0.0);
    return g->alpha * sum + (g->beta != 0.0f ? g->beta * c : 0.0);
}

static void run_case(test_backend *be, const gemm_case *g, const gemm_io *io, float *c)
{
    memcpy(c, io->c0, io->cs * 4);
    if (g->bias)
        CHECK_OK(be->vt->gemm_bias(be->state, be->queue, FG_F32, FG_F32, FG_F32, g->ta, g->tb,
                                   g->m, g->n, g->k, io->a, io->lda, io->b, io->ldb, io->bias,
                                   c, io->ldc, &test_err));
    else
        CHECK_OK(be->vt->gemm(be->state, be->queue, FG_F32, FG_F32, FG_F32, g->ta, g->tb, g->m,
                              g->n, g->k, g->alpha, io->a, io->lda, io->b, io->ldb, g->beta, c,
                              io->ldc, &test_err));
}

/* Every element of both within TOL of each other (relative to its terms) and of the double
 * reference; the gaps past n in C's rows untouched. */
static void compare_case(const gemm_case *g, const gemm_io *io, const float *blas,
                         const float *dnnl)
{
    int misses = 0;
    double worst = 0;
    for (int i = 0; i < g->m; i++)
        for (int j = 0; j < io->ldc; j++) {
            size_t x = (size_t)i * io->ldc + j;
            if (j >= g->n) {
                misses += dnnl[x] != io->c0[x];
                continue;
            }
            double scale, want = reference(g, io, i, j, &scale);
            scale = scale > 1e-3 ? scale : 1e-3;
            double d1 = fabs((double)dnnl[x] - blas[x]) / scale;
            double d2 = fabs((double)dnnl[x] - want) / scale;
            worst = d1 > worst ? d1 : worst;
            misses += d1 > TOL || d2 > TOL;
        }
    CHECK(misses == 0, "gemm%s %c%c m%d n%d k%d pad %d alpha %g beta %g: %d elements differ "
          "(worst |onednn - openblas| / terms %.3g)", g->bias ? "_bias" : "", g->ta ? 'T' : 'N',
          g->tb ? 'T' : 'N', g->m, g->n, g->k, g->pad, g->alpha, g->beta, misses, worst);
}

/* The log's line for a case's shape under a fixed gemm = library. */
static void check_logged(const test_backend *be, const gemm_case *g, const char *library)
{
    char want[160];
    snprintf(want, sizeof want, "%s m%d n%d k%d %c%c%s f32: %s (gemm = %s)",
             g->bias ? "gemm_bias" : "gemm", g->m, g->n, g->k, g->ta ? 'T' : 'N',
             g->tb ? 'T' : 'N', !g->bias && g->beta != 0.0f ? " accumulate" : "", library,
             library);
    CHECK(strstr(be->host.log, want) != NULL, "no \"%s\" in the log: %s", want, be->host.log);
}

static void test_agreement_and_record(void)
{
    test_backend blas, dnnl;
    test_backend_open_with(&blas, 1, 2, 0, "gemm = openblas");
    test_backend_open_with(&dnnl, 1, 2, 0, "gemm = onednn");
    test_seed(29);
    for (size_t i = 0; i < NCASES; i++) {
        gemm_io io;
        io_make(&io, &cases[i]);
        float *c_blas = test_alloc(io.cs * 4), *c_dnnl = test_alloc(io.cs * 4);
        run_case(&blas, &cases[i], &io, c_blas);
        run_case(&dnnl, &cases[i], &io, c_dnnl);
        compare_case(&cases[i], &io, c_blas, c_dnnl);
        /* the second call of the shape runs the cached choice: the same bits */
        float *again = test_alloc(io.cs * 4);
        run_case(&dnnl, &cases[i], &io, again);
        CHECK(memcmp(again, c_dnnl, io.cs * 4) == 0, "gemm = onednn: case %zu's second call "
              "differs from its first", i);
        check_logged(&blas, &cases[i], "openblas");
        check_logged(&dnnl, &cases[i], "onednn");
        free(again);
        free(c_blas);
        free(c_dnnl);
        io_free(&io);
    }
    CHECK(strstr(blas.host.log, ": onednn (") == NULL, "gemm = openblas logged a oneDNN "
          "choice: %s", blas.host.log);
    CHECK(strstr(dnnl.host.log, "has no matmul") == NULL, "gemm = onednn fell back to "
          "OpenBLAS: %s", dnnl.host.log);
    test_backend_close(&blas);
    test_backend_close(&dnnl);
}

/* auto: each shape timed once, logged with both times, and a result within TOL. */
static void test_auto(void)
{
    test_backend au;
    test_backend_open_with(&au, 1, 2, 0, "gemm = auto");
    test_seed(30);
    const gemm_case *g = &cases[4];
    gemm_io io;
    io_make(&io, g);
    float *c = test_alloc(io.cs * 4);
    run_case(&au, g, &io, c);
    run_case(&au, g, &io, c);
    const char *line = strstr(au.host.log, "gemm m128 n256 k784 NN f32: ");
    CHECK(line && strstr(line, "timed: onednn ") && strstr(line, " ms, openblas "),
          "auto did not log its timed choice: %s", au.host.log);
    CHECK(line && !strstr(line + 1, "gemm m128 n256 k784 NN f32: "),
          "auto decided the shape twice: %s", au.host.log);
    compare_case(g, &io, c, c);
    free(c);
    io_free(&io);
    test_backend_close(&au);
}

static void test_option(void)
{
    test_backend tb;
    fg_status st = test_backend_try_open_with(&tb, 1, 2, 0, "gemm = fastest");
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "gemm = 'fastest'"),
          "gemm = fastest: %s (%s)", fg_status_name(st), test_err.message);
    if (st == FG_OK)
        test_backend_close(&tb);
}

void test_group_gemm_choice(void)
{
    test_option();
#ifdef FG_TEST_WITH_DNNL
    test_agreement_and_record();
    test_auto();
#else
    test_backend tb;
    fg_status st = test_backend_try_open_with(&tb, 1, 2, 0, "gemm = onednn");
    CHECK(st == FG_UNAVAILABLE && strstr(test_err.message, "without oneDNN"),
          "gemm = onednn without oneDNN: %s (%s)", fg_status_name(st), test_err.message);
    if (st == FG_OK)
        test_backend_close(&tb);
#endif
}

static int cpu_has_avx2(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* Under OPENBLAS_CORETYPE=Prescott (set by ctest for this group only). */
#ifdef FG_TEST_WITH_DNNL
/* The largest |a - b| relative to max(1, |b|) over n elements. */
static double worst_gap(const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double m = fabs((double)b[i]) > 1 ? fabs((double)b[i]) : 1;
        double g = fabs((double)a[i] - b[i]) / m;
        worst = g > worst ? g : worst;
    }
    return worst;
}

/* Causal attention (T = 150: three query blocks of 64), forward and backward: y, dqkv. */
static void run_attention(test_backend *be, const float *qkv, const float *dy, float *y,
                          float *dqkv)
{
    fg_attention_desc d = {sizeof d, 2, 150, 2, 16, 1, 0.0f, 0, 0, 0};
    float lse[2 * 2 * 150];
    void *ws = test_alloc(be->vt->attention_workspace(be->state, &d));
    CHECK_OK(be->vt->attention_forward(be->state, be->queue, FG_F32, &d, qkv, y, lse, ws,
                                       &test_err));
    CHECK_OK(be->vt->attention_backward(be->state, be->queue, FG_F32, &d, qkv, y, lse, dy, dqkv,
                                        ws, &test_err));
    free(ws);
}

/* im2col's convolution (conv_algorithm = im2col), forward and backward: y, dx, dw, db. */
static void run_im2col(test_backend *be, const float *x, const float *w, const float *dy,
                       float *out)
{
    fg_conv2d_desc d = {sizeof d, 4, 3, 12, 12, 8, 3, 3, 1, 1, 1, 1, 12, 12, FG_LAYOUT_NCHW};
    size_t ny = 4 * 8 * 144, nx = 4 * 3 * 144, nw = 8 * 3 * 9;
    float b[8] = {0.5f, -0.25f, 0.125f, 1, -1, 0.75f, 0, 2};
    void *ws = test_alloc(be->vt->conv2d_workspace(be->state, &d));
    CHECK_OK(be->vt->conv2d_forward(be->state, be->queue, FG_F32, FG_F32, &d, x, w, b, out, ws,
                                    &test_err));
    CHECK_OK(be->vt->conv2d_backward(be->state, be->queue, FG_F32, FG_F32, FG_F32, &d, x, w, dy,
                                     out + ny, out + ny + nx, out + ny + nx + nw, 0, ws,
                                     &test_err));
    free(ws);
}

/* The kernels' own gemms (attention's tiles, im2col's products) follow the choice: under
 * the default (oneDNN) their shapes are logged as oneDNN's, and the results are OpenBLAS's
 * (gemm = openblas) within float rounding. */
static void check_kernel_gemms(test_backend *df)
{
    test_backend ob;
    test_backend_open_with(&ob, 1, 2, 0, "gemm = openblas\nconv_algorithm = im2col");
    size_t nq = (size_t)2 * 150 * 96, ny = (size_t)2 * 150 * 32;
    float *qkv = test_alloc(nq * 4), *dy = test_alloc(ny * 4);
    float *y[2] = {test_alloc(ny * 4), test_alloc(ny * 4)};
    float *dq[2] = {test_alloc(nq * 4), test_alloc(nq * 4)};
    test_fill_uniform(qkv, nq, -1, 1);
    test_fill_uniform(dy, ny, -1, 1);
    run_attention(df, qkv, dy, y[0], dq[0]);
    run_attention(&ob, qkv, dy, y[1], dq[1]);
    CHECK(strstr(df->host.log, "cpu backend: attention_forward m64 n64 k16 NT f32: onednn"),
          "attention's score gemm did not run oneDNN: %s", df->host.log);
    CHECK(strstr(df->host.log, "cpu backend: attention_backward m128 n16 k64 TN accumulate "
                 "f32: onednn"),
          "attention's dV gemm did not run oneDNN: %s", df->host.log);
    CHECK(strstr(ob.host.log, "attention_forward m") == NULL,
          "gemm = openblas logged attention's gemms at info level: %s", ob.host.log);
    double gy = worst_gap(y[0], y[1], ny), gq = worst_gap(dq[0], dq[1], nq);
    printf("attention, oneDNN against OpenBLAS: y %.2e, dqkv %.2e\n", gy, gq);
    CHECK(gy <= 1e-5 && gq <= 1e-5, "attention: oneDNN's y %.2e, dqkv %.2e from OpenBLAS's",
          gy, gq);
    size_t nx = 4 * 3 * 144, nw = 8 * 3 * 9, ncy = 4 * 8 * 144, nout = ncy + nx + nw + 8;
    float *x = test_alloc(nx * 4), *w = test_alloc(nw * 4), *cdy = test_alloc(ncy * 4);
    float *out[2] = {test_alloc(nout * 4), test_alloc(nout * 4)};
    test_fill_uniform(x, nx, -1, 1);
    test_fill_uniform(w, nw, -1, 1);
    test_fill_uniform(cdy, ncy, -1, 1);
    run_im2col(df, x, w, cdy, out[0]);
    run_im2col(&ob, x, w, cdy, out[1]);
    CHECK(strstr(df->host.log, "cpu backend: conv2d_forward m8 n576 k27 NN f32: onednn"),
          "im2col's forward gemm did not run oneDNN: %s", df->host.log);
    CHECK(strstr(df->host.log, "cpu backend: conv2d_backward m27 n576 k8 TN f32: onednn"),
          "im2col's dx gemm did not run oneDNN: %s", df->host.log);
    double gc = worst_gap(out[0], out[1], nout);
    printf("im2col, oneDNN against OpenBLAS: %.2e\n", gc);
    CHECK(gc <= 1e-5, "im2col: oneDNN's outputs %.2e from OpenBLAS's", gc);
    for (int i = 0; i < 2; i++) {
        free(y[i]);
        free(dq[i]);
        free(out[i]);
    }
    free(qkv);
    free(dy);
    free(x);
    free(w);
    free(cdy);
    test_backend_close(&ob);
}
#endif

void test_group_gemm_generic(void)
{
    const char *env = getenv("OPENBLAS_CORETYPE");
    CHECK(env && strcmp(env, "Prescott") == 0, "run me with OPENBLAS_CORETYPE=Prescott (ctest "
          "does), not %s", env ? env : "unset");
    test_backend au;
    test_backend_open_with(&au, 1, 2, 0, "gemm = auto");
    const char *notice = strstr(au.host.log, "OpenBLAS runs its Prescott kernels (SSE)");
    if (!cpu_has_avx2()) {
        CHECK(notice == NULL, "a notice on a CPU without AVX2: %s", au.host.log);
        test_backend_close(&au);
        return;
    }
    CHECK(notice != NULL, "no notice of OpenBLAS's Prescott kernels on an AVX2 CPU: %s",
          au.host.log);
    CHECK(strstr(au.host.log, "OPENBLAS_CORETYPE = Prescott; fulgur does not set it"),
          "the notice does not name the user's OPENBLAS_CORETYPE: %s", au.host.log);
#ifdef FG_TEST_WITH_DNNL
    CHECK(strstr(au.host.log, "gemm = auto: f32 gemms run oneDNN's matmul"),
          "the notice does not say auto runs oneDNN: %s", au.host.log);
    test_seed(31);
    const gemm_case *g = &cases[4];
    gemm_io io;
    io_make(&io, g);
    float *c = test_alloc(io.cs * 4);
    run_case(&au, g, &io, c);
    CHECK(strstr(au.host.log, "gemm m128 n256 k784 NN f32: onednn (OpenBLAS runs generic "
                 "kernels; timed: onednn "),
          "auto did not take oneDNN over OpenBLAS's Prescott kernels: %s", au.host.log);
    compare_case(g, &io, c, c);
    /* gemm unset (default): oneDNN for every shape, fixed, and the notice says so */
    test_backend df;
    test_backend_open_with(&df, 1, 2, 0, "conv_algorithm = im2col");
    CHECK(strstr(df.host.log, "; f32 gemms run oneDNN's matmul (gemm unset; gemm = openblas "
                 "would put them on OpenBLAS)"),
          "the default did not take oneDNN over OpenBLAS's Prescott kernels: %s", df.host.log);
    run_case(&df, g, &io, c);
    CHECK(strstr(df.host.log, "debug: cpu backend: gemm m128 n256 k784 NN f32: onednn "
                 "(gemm unset)"),
          "the default ran the shape on %s", df.host.log);
    compare_case(g, &io, c, c);
    check_kernel_gemms(&df);
    test_backend_close(&df);
    free(c);
    io_free(&io);
#endif
    test_backend_close(&au);
}
