/* gemm, bias, elementwise helpers and optimizer updates against double references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_backend tb;
#define Q tb.state, tb.queue

static void test_gemm_case(int ta, int tb_, int m, int n, int k, int pad)
{
    int lda = (ta ? m : k) + pad, ldb = (tb_ ? k : n) + pad, ldc = n + pad;
    size_t a_rows = ta ? (size_t)k : (size_t)m, b_rows = tb_ ? (size_t)n : (size_t)k;
    float *a = test_alloc(a_rows * (size_t)lda * 4), *b = test_alloc(b_rows * (size_t)ldb * 4);
    float *c = test_alloc((size_t)m * (size_t)ldc * 4);
    double *want = test_alloc((size_t)m * (size_t)ldc * 8);
    test_fill_uniform(a, a_rows * (size_t)lda, -1, 1);
    test_fill_uniform(b, b_rows * (size_t)ldb, -1, 1);
    test_fill_uniform(c, (size_t)m * (size_t)ldc, -1, 1);
    float alpha = 0.75f, beta = m % 2 ? 0.5f : 0.0f;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldc; j++) {
            double acc = 0.0;
            for (int p = 0; j < n && p < k; p++) {
                double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double bv = tb_ ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                acc += av * bv;
            }
            size_t o = (size_t)i * ldc + j;
            /* columns past n (padding) must stay untouched */
            want[o] = j < n ? alpha * acc + (beta == 0.0f ? 0.0 : beta * c[o]) : c[o];
        }
    CHECK_OK(tb.vt->gemm(Q, FG_F32, FG_F32, FG_F32, ta, tb_, m, n, k, alpha, a, lda, b, ldb, beta,
                         c, ldc, &test_err));
    char what[64];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d m=%d n=%d k=%d pad=%d", ta, tb_, m, n, k, pad);
    test_compare(what, c, want, (size_t)m * (size_t)ldc, 1e-5);
    free(a);
    free(b);
    free(c);
    free(want);
}

static void test_gemm(void)
{
    static const int sizes[] = { 1, 7, 33, 129 };
    for (int ta = 0; ta < 2; ta++)
        for (int tb_ = 0; tb_ < 2; tb_++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    for (int l = 0; l < 4; l++)
                        test_gemm_case(ta, tb_, sizes[i], sizes[j], sizes[l], (i + j + l) % 3);
    /* bad leading dimension */
    float x[4] = { 0 };
    fg_status st = tb.vt->gemm(Q, FG_F32, FG_F32, FG_F32, 0, 0, 2, 2, 2, 1.0f, x, 1, x, 2, 0.0f, x,
                               2, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "lda = 1"), "got %s: %s",
          fg_status_name(st), test_err.message);
}

/* bf16 dy (y's values truncated to bf16): read in place, the same bits as the f32 op on
 * the widened values. */
static void check_bias_grad_bf16(const float *y, int rows, int cols, int accumulate)
{
    size_t n = (size_t)rows * cols;
    uint16_t *h = test_alloc(n * 2);
    float *w = test_alloc(n * 4), *db[2];
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &y[i], 4);
        h[i] = (uint16_t)(bits >> 16);
        bits &= 0xffff0000u;
        memcpy(&w[i], &bits, 4);
    }
    for (int k = 0; k < 2; k++) {
        db[k] = test_alloc((size_t)cols * 4);
        for (int c = 0; c < cols; c++)
            db[k][c] = 0.5f - (float)c / 64.0f;
    }
    CHECK_OK(tb.vt->bias_grad(Q, FG_F32, FG_F32, db[0], w, rows, cols, 1, accumulate,
                              &test_err));
    CHECK_OK(tb.vt->bias_grad(Q, FG_F32, FG_BF16, db[1], h, rows, cols, 1, accumulate,
                              &test_err));
    CHECK(memcmp(db[0], db[1], (size_t)cols * 4) == 0, "bias_grad of bf16 dy (%dx%d%s) is not "
          "the f32 op's on its values", rows, cols, accumulate ? ", accumulate" : "");
    free(h), free(w), free(db[0]), free(db[1]);
}

static void test_bias(void)
{
    static const int shapes[][3] = { { 1, 1, 1 }, { 7, 33, 1 }, { 5, 3, 13 }, { 129, 257, 1 },
                                     { 3, 64, 121 } };
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int rows = shapes[t][0], cols = shapes[t][1], sp = shapes[t][2];
        size_t n = (size_t)rows * cols * sp;
        float *y = test_alloc(n * 4), *bias = test_alloc((size_t)cols * 4);
        float *db = test_alloc((size_t)cols * 4);
        double *want = test_alloc(n * 8), *wdb = test_alloc((size_t)cols * 8);
        test_fill_uniform(y, n, -1, 1);
        test_fill_uniform(bias, (size_t)cols, -1, 1);
        for (size_t i = 0; i < n; i++)
            want[i] = (double)y[i] + bias[(i / sp) % cols];
        CHECK_OK(tb.vt->bias_add(Q, FG_F32, FG_F32, y, bias, rows, cols, sp, &test_err));
        test_compare("bias_add", y, want, n, 1e-6);
        for (int accumulate = 0; accumulate < 2; accumulate++) {
            test_fill_uniform(db, (size_t)cols, -1, 1);
            for (int c = 0; c < cols; c++)
                wdb[c] = accumulate ? db[c] : 0.0;
            for (size_t i = 0; i < n; i++)
                wdb[(i / sp) % cols] += y[i];
            CHECK_OK(
                tb.vt->bias_grad(Q, FG_F32, FG_F32, db, y, rows, cols, sp, accumulate, &test_err));
            test_compare(accumulate ? "bias_grad accumulate" : "bias_grad", db, wdb,
                         (size_t)cols, 1e-5);
            if (sp == 1)
                check_bias_grad_bf16(y, rows, cols, accumulate);
        }
        free(y);
        free(bias);
        free(db);
        free(want);
        free(wdb);
    }
}

static void test_clamp_nan(void)
{
    float v[4] = { NAN, -5.0f, 5.0f, 0.25f };
    CHECK_OK(tb.vt->clamp(Q, FG_F32, v, -1.0f, 0.5f, 4, &test_err));
    CHECK(isnan(v[0]) && v[1] == -1.0f && v[2] == 0.5f && v[3] == 0.25f,
          "clamp gave %g %g %g %g", (double)v[0], (double)v[1], (double)v[2], (double)v[3]);
}

static void test_elementwise(void)
{
    static const size_t sizes[] = { 1, 7, 33, 100003, 1000001 };
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        size_t n = sizes[t];
        float *x = test_alloc(n * 4), *y = test_alloc(n * 4);
        double *want = test_alloc(n * 8);
        CHECK_OK(tb.vt->fill(Q, FG_F32, x, 2.5f, n, &test_err));
        for (size_t i = 0; i < n; i++)
            want[i] = 2.5;
        test_compare("fill", x, want, n, 0);
        test_fill_uniform(x, n, -2, 2);
        test_fill_uniform(y, n, -2, 2);
        for (size_t i = 0; i < n; i++)
            want[i] = (double)x[i] * -0.3f;
        CHECK_OK(tb.vt->scale(Q, FG_F32, x, -0.3f, n, &test_err));
        test_compare("scale", x, want, n, 1e-7);
        for (size_t i = 0; i < n; i++)
            want[i] = (double)y[i] + 1.7f * (double)x[i];
        CHECK_OK(tb.vt->axpy(Q, FG_F32, FG_F32, 1.7f, x, y, n, &test_err));
        test_compare("axpy", y, want, n, 1e-6);
        for (size_t i = 0; i < n; i++)
            want[i] = y[i] < -1.0f ? -1.0 : y[i] > 0.5f ? 0.5 : y[i];
        float *z = test_alloc(n * 4);
        memcpy(z, y, n * 4);
        CHECK_OK(tb.vt->clamp(Q, FG_F32, z, -1.0f, 0.5f, n, &test_err));
        test_compare("clamp", z, want, n, 0);
        free(z);
        double ss = 0.0;
        for (size_t i = 0; i < n; i++)
            ss += (double)y[i] * y[i];
        float out = -1.0f;
        CHECK_OK(tb.vt->sum_squares(Q, FG_F32, y, n, &out, &test_err));
        test_compare_scalar("sum_squares", out, ss, 1e-6);
        free(x);
        free(y);
        free(want);
    }
}

/* torch.optim.SGD, one step, in double */
static void sgd_reference(const fg_sgd_args *a, double *p, const float *g, double *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double d = g[i] + (double)a->weight_decay * p[i];
        if (a->momentum != 0.0f) {
            b[i] = a->first_step ? d : a->momentum * b[i] + (1.0 - a->dampening) * d;
            d = a->nesterov ? d + a->momentum * b[i] : b[i];
        }
        p[i] -= a->lr * d;
    }
}

static void test_sgd(void)
{
    static const fg_sgd_args cases[] = {
        { sizeof(fg_sgd_args), 0.1f, 0.0f, 0.0f, 0.0f, 0, 1, NULL, NULL },
        { sizeof(fg_sgd_args), 0.05f, 0.9f, 0.0f, 1e-2f, 0, 1, NULL, NULL },
        { sizeof(fg_sgd_args), 0.05f, 0.9f, 0.1f, 1e-2f, 0, 0, NULL, NULL },
        { sizeof(fg_sgd_args), 0.05f, 0.9f, 0.0f, 1e-3f, 1, 1, NULL, NULL },
        { sizeof(fg_sgd_args), 0.05f, 0.9f, 0.0f, 1e-3f, 1, 0, NULL, NULL },
    };
    size_t n = 70001;
    float *p = test_alloc(n * 4), *g = test_alloc(n * 4), *b = test_alloc(n * 4);
    double *wp = test_alloc(n * 8), *wb = test_alloc(n * 8);
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        test_fill_uniform(p, n, -1, 1);
        test_fill_uniform(g, n, -1, 1);
        test_fill_uniform(b, n, -1, 1);
        for (size_t i = 0; i < n; i++) {
            wp[i] = p[i];
            wb[i] = b[i];
        }
        sgd_reference(&cases[t], wp, g, wb, n);
        CHECK_OK(tb.vt->sgd_update(Q, FG_F32, FG_F32, &cases[t], p, g, b, n, &test_err));
        char what[48];
        snprintf(what, sizeof what, "sgd case %zu param", t);
        test_compare(what, p, wp, n, 1e-6);
        if (cases[t].momentum != 0.0f) {
            snprintf(what, sizeof what, "sgd case %zu momentum", t);
            test_compare(what, b, wb, n, 1e-6);
        }
    }
    fg_sgd_args bad = { sizeof bad, 0.1f, 0.0f, 0.0f, 0.0f, 1, 0, NULL, NULL };
    fg_status st = tb.vt->sgd_update(Q, FG_F32, FG_F32, &bad, p, g, b, n, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "nesterov"), "%s",
          test_err.message);
    free(p);
    free(g);
    free(b);
    free(wp);
    free(wb);
}

static void test_adamw(void)
{
    size_t n = 50003;
    float *p = test_alloc(n * 4), *g = test_alloc(n * 4), *m = test_alloc(n * 4),
          *v = test_alloc(n * 4);
    double *wp = test_alloc(n * 8), *wm = test_alloc(n * 8), *wv = test_alloc(n * 8);
    test_fill_uniform(p, n, -1, 1);
    for (size_t i = 0; i < n; i++)
        wp[i] = p[i];
    fg_adamw_args a = { sizeof a, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0, NULL, NULL };
    for (int step = 1; step <= 3; step++) {
        a.step = step;
        test_fill_uniform(g, n, -1, 1);
        for (size_t i = 0; i < n; i++) {
            wp[i] *= 1.0 - (double)a.lr * a.weight_decay;
            wm[i] = a.beta1 * wm[i] + (1.0 - a.beta1) * g[i];
            wv[i] = a.beta2 * wv[i] + (1.0 - a.beta2) * (double)g[i] * g[i];
            double mhat = wm[i] / (1.0 - pow(a.beta1, step));
            double vhat = wv[i] / (1.0 - pow(a.beta2, step));
            wp[i] -= a.lr * mhat / (sqrt(vhat) + a.eps);
        }
        CHECK_OK(tb.vt->adamw_update(Q, FG_F32, FG_F32, &a, p, g, m, v, n, &test_err));
    }
    test_compare("adamw param", p, wp, n, 1e-6);
    test_compare("adamw m", m, wm, n, 1e-6);
    test_compare("adamw v", v, wv, n, 1e-6);
    a.step = 0;
    fg_status st = tb.vt->adamw_update(Q, FG_F32, FG_F32, &a, p, g, m, v, n, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "step = 0"), "%s",
          test_err.message);
    free(p);
    free(g);
    free(m);
    free(v);
    free(wp);
    free(wm);
    free(wv);
}

void test_group_linear(void)
{
    test_seed(1);
    test_backend_open(&tb, 1, 2, 0);
    test_gemm();
    test_bias();
    test_elementwise();
    test_clamp_nan();
    test_sgd();
    test_adamw();
    test_backend_close(&tb);
}
