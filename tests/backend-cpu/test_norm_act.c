/* batch norm, activations, dropout and softmax cross-entropy against double references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_backend tb;
#define Q tb.state, tb.queue

static void test_batchnorm_case(int n, int c, int sp)
{
    size_t total = (size_t)n * c * sp;
    float *x = test_alloc(total * 4), *y = test_alloc(total * 4), *dy = test_alloc(total * 4);
    float *dx = test_alloc(total * 4), *gamma = test_alloc((size_t)c * 4);
    float *beta = test_alloc((size_t)c * 4), *rm = test_alloc((size_t)c * 4);
    float *rv = test_alloc((size_t)c * 4), *sm = test_alloc((size_t)c * 4);
    float *si = test_alloc((size_t)c * 4), *dg = test_alloc((size_t)c * 4);
    float *dbt = test_alloc((size_t)c * 4);
    double *wy = test_alloc(total * 8), *wdx = test_alloc(total * 8);
    double *wrm = test_alloc((size_t)c * 8), *wrv = test_alloc((size_t)c * 8);
    double *wsm = test_alloc((size_t)c * 8), *wsi = test_alloc((size_t)c * 8);
    double *wdg = test_alloc((size_t)c * 8), *wdb = test_alloc((size_t)c * 8);
    test_fill_uniform(x, total, 2, 5); /* a mean far from 0 */
    test_fill_uniform(dy, total, -1, 1);
    test_fill_uniform(gamma, (size_t)c, 0.5, 1.5);
    test_fill_uniform(beta, (size_t)c, -1, 1);
    test_fill_uniform(rm, (size_t)c, -1, 1);
    test_fill_uniform(rv, (size_t)c, 0.5, 2);
    float momentum = 0.1f, eps = 1e-5f;
    double m_count = (double)n * sp;
    for (int ch = 0; ch < c; ch++) {
        double s = 0.0, ss = 0.0;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < sp; k++)
                s += x[((size_t)i * c + ch) * sp + k];
        double mean = s / m_count;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < sp; k++) {
                double d = x[((size_t)i * c + ch) * sp + k] - mean;
                ss += d * d;
            }
        double var = ss / m_count, invstd = 1.0 / sqrt(var + eps);
        wsm[ch] = mean;
        wsi[ch] = invstd;
        wrm[ch] = (1 - momentum) * (double)rm[ch] + momentum * mean;
        wrv[ch] = (1 - momentum) * (double)rv[ch] + momentum * var * m_count / (m_count - 1);
        double sdy = 0.0, sdyx = 0.0;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < sp; k++) {
                size_t o = ((size_t)i * c + ch) * sp + k;
                double xh = (x[o] - mean) * invstd;
                wy[o] = xh * gamma[ch] + beta[ch];
                sdy += dy[o];
                sdyx += dy[o] * xh;
            }
        wdb[ch] = sdy;
        wdg[ch] = sdyx;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < sp; k++) {
                size_t o = ((size_t)i * c + ch) * sp + k;
                double xh = (x[o] - mean) * invstd;
                wdx[o] = gamma[ch] * invstd * (dy[o] - sdy / m_count - xh * sdyx / m_count);
            }
    }
    CHECK_OK(tb.vt->batchnorm_forward(Q, FG_F32, FG_F32, 1, n, c, sp, x, gamma, beta, rm, rv,
                                      momentum, eps, sm, si, y, &test_err));
    test_compare("bn train y", y, wy, total, 1e-5);
    test_compare("bn saved_mean", sm, wsm, (size_t)c, 1e-6);
    test_compare("bn saved_invstd", si, wsi, (size_t)c, 1e-5);
    test_compare("bn running_mean", rm, wrm, (size_t)c, 1e-6);
    test_compare("bn running_var (unbiased)", rv, wrv, (size_t)c, 1e-6);
    CHECK_OK(tb.vt->batchnorm_backward(Q, FG_F32, FG_F32, FG_F32, n, c, sp, x, gamma, sm, si, dy,
                                       dx, dg, dbt, 0, &test_err));
    test_compare("bn dx", dx, wdx, total, 1e-4);
    test_compare("bn dgamma", dg, wdg, (size_t)c, 1e-5);
    test_compare("bn dbeta", dbt, wdb, (size_t)c, 1e-5);
    for (int ch = 0; ch < c; ch++) {
        wdg[ch] += dg[ch];
        wdb[ch] += dbt[ch];
    }
    CHECK_OK(tb.vt->batchnorm_backward(Q, FG_F32, FG_F32, FG_F32, n, c, sp, x, gamma, sm, si, dy,
                                       NULL, dg, dbt, 1, &test_err));
    test_compare("bn dgamma accumulate", dg, wdg, (size_t)c, 1e-5);
    test_compare("bn dbeta accumulate", dbt, wdb, (size_t)c, 1e-5);
    /* eval: the running statistics */
    for (size_t o = 0; o < total; o++) {
        int ch = (int)(o / sp % c);
        wy[o] = ((double)x[o] - rm[ch]) / sqrt((double)rv[ch] + eps) * gamma[ch] + beta[ch];
    }
    CHECK_OK(tb.vt->batchnorm_forward(Q, FG_F32, FG_F32, 0, n, c, sp, x, gamma, beta, rm, rv,
                                      momentum, eps, NULL, NULL, y, &test_err));
    test_compare("bn eval y", y, wy, total, 1e-5);
    free(x); free(y); free(dy); free(dx); free(gamma); free(beta); free(rm); free(rv);
    free(sm); free(si); free(dg); free(dbt); free(wy); free(wdx); free(wrm); free(wrv);
    free(wsm); free(wsi); free(wdg); free(wdb);
}

static void test_batchnorm(void)
{
    test_batchnorm_case(5, 3, 7);
    test_batchnorm_case(33, 129, 1);
    test_batchnorm_case(7, 4, 169);
    float one = 1.0f;
    fg_status st = tb.vt->batchnorm_forward(Q, FG_F32, FG_F32, 1, 1, 1, 1, &one, NULL, NULL, NULL,
                                            NULL, 0.1f, 1e-5f, &one, &one, &one, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "more than 1 value"), "%s",
          test_err.message);
}

static double act_ref(int act, double x, double *grad)
{
    switch (act) {
    case FG_ACT_RELU:
        *grad = x > 0 ? 1 : 0;
        return x > 0 ? x : 0;
    case FG_ACT_GELU: {
        double k0 = sqrt(2.0 / 3.14159265358979323846), k1 = 0.044715;
        double t = tanh(k0 * (x + k1 * x * x * x));
        *grad = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k0 * (1 + 3 * k1 * x * x);
        return 0.5 * x * (1 + t);
    }
    case FG_ACT_TANH:
        *grad = 1 - tanh(x) * tanh(x);
        return tanh(x);
    case FG_ACT_SIGMOID: {
        double s = 1 / (1 + exp(-x));
        *grad = s * (1 - s);
        return s;
    }
    default:
        *grad = 1;
        return x;
    }
}

static void test_activations(void)
{
    static const char *names[] = { "none", "relu", "gelu", "tanh", "sigmoid" };
    size_t n = 100003;
    float *x = test_alloc(n * 4), *y = test_alloc(n * 4), *dy = test_alloc(n * 4);
    float *dx = test_alloc(n * 4);
    double *wy = test_alloc(n * 8), *wdx = test_alloc(n * 8);
    for (int act = FG_ACT_NONE; act <= FG_ACT_SIGMOID; act++) {
        test_fill_uniform(x, n, -6, 6);
        test_fill_uniform(dy, n, -1, 1);
        for (size_t i = 0; i < n; i++) {
            double g;
            wy[i] = act_ref(act, x[i], &g);
            wdx[i] = g * dy[i];
        }
        char what[48];
        snprintf(what, sizeof what, "%s forward", names[act]);
        CHECK_OK(tb.vt->activation_forward(Q, FG_F32, act, x, y, n, &test_err));
        test_compare(what, y, wy, n, 1e-6);
        snprintf(what, sizeof what, "%s backward", names[act]);
        CHECK_OK(tb.vt->activation_backward(Q, FG_F32, act, x, y, dy, dx, n, &test_err));
        test_compare(what, dx, wdx, n, 2e-6);
        /* in place: y over x, dx over dy */
        CHECK_OK(tb.vt->activation_forward(Q, FG_F32, act, x, x, n, &test_err));
        test_compare("in-place forward", x, wy, n, 1e-6);
    }
    fg_status st = tb.vt->activation_forward(Q, FG_F32, 9, x, y, n, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "unknown activation 9"), "%s",
          test_err.message);
    free(x); free(y); free(dy); free(dx); free(wy); free(wdx);
}

static void test_dropout(void)
{
    size_t n = 1000000;
    float p = 0.3f;
    float *x = test_alloc(n * 4), *y = test_alloc(n * 4), *y2 = test_alloc(n * 4);
    float *dx = test_alloc(n * 4);
    uint8_t *m1 = test_alloc(n), *m2 = test_alloc(n), *m3 = test_alloc(n);
    test_fill_uniform(x, n, -1, 1);
    CHECK_OK(tb.vt->dropout_forward(Q, FG_F32, p, 42, 1000, x, y, m1, n, &test_err));
    CHECK_OK(tb.vt->dropout_forward(Q, FG_F32, p, 42, 1000, x, y2, m2, n, &test_err));
    CHECK(memcmp(m1, m2, n) == 0 && memcmp(y, y2, n * 4) == 0,
          "same seed and offset gave different masks");
    size_t kept = 0, bad_scale = 0;
    for (size_t i = 0; i < n; i++) {
        kept += m1[i];
        float want = m1[i] ? x[i] * (1.0f / (1.0f - p)) : 0.0f;
        bad_scale += y[i] != want;
    }
    double frac = (double)kept / (double)n;
    CHECK(fabs(frac - (1.0 - p)) < 0.01, "keep fraction %.4f, want %.4f +- 0.01", frac,
          1.0 - p);
    CHECK(bad_scale == 0, "%zu outputs are not x/(1-p) or 0", bad_scale);
    /* element i depends only on (seed, offset + i): shifting the offset shifts the mask */
    CHECK_OK(tb.vt->dropout_forward(Q, FG_F32, p, 42, 1001, x, y2, m3, n, &test_err));
    CHECK(memcmp(m1 + 1, m3, n - 1) == 0, "offset+1 is not the mask shifted by one");
    size_t same = 0;
    for (size_t i = 0; i < n; i++)
        same += m1[i] == m3[i];
    CHECK(same < n * 0.7, "a different offset gave a nearly identical mask (%zu of %zu)", same,
          n);
    CHECK_OK(tb.vt->dropout_forward(Q, FG_F32, p, 43, 1000, x, y2, m3, n, &test_err));
    CHECK(memcmp(m1, m3, n) != 0, "a different seed gave the same mask");
    CHECK_OK(tb.vt->dropout_backward(Q, FG_F32, p, m1, x, dx, n, &test_err));
    CHECK(memcmp(dx, y, n * 4) == 0, "dropout backward of dy = x differs from forward");
    CHECK_OK(tb.vt->dropout_forward(Q, FG_F32, 0.0f, 42, 0, x, y, m1, n, &test_err));
    CHECK(memcmp(x, y, n * 4) == 0, "p = 0 changed values");
    fg_status st = tb.vt->dropout_forward(Q, FG_F32, 1.5f, 42, 0, x, y, m1, n, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "p = 1.5"), "%s",
          test_err.message);
    free(x); free(y); free(y2); free(dx); free(m1); free(m2); free(m3);
}

static void test_xent_case(int rows, int classes)
{
    size_t n = (size_t)rows * classes;
    float *logits = test_alloc(n * 4), *probs = test_alloc(n * 4), *dl = test_alloc(n * 4);
    int32_t *labels = test_alloc((size_t)rows * 4);
    double *wp = test_alloc(n * 8), *wdl = test_alloc(n * 8);
    test_fill_uniform(logits, n, -30, 30); /* large logits: needs the max shift */
    double loss = 0.0, hits = 0.0;
    float scale = 1.0f / rows;
    for (int r = 0; r < rows; r++) {
        labels[r] = (int32_t)(test_uniform(0, classes)) % classes;
        const float *x = logits + (size_t)r * classes;
        double m = x[0], s = 0.0;
        int best = 0;
        for (int j = 1; j < classes; j++)
            if (x[j] > m) {
                m = x[j];
                best = j;
            }
        for (int j = 0; j < classes; j++)
            s += exp(x[j] - m);
        loss += m + log(s) - x[labels[r]];
        hits += best == labels[r];
        for (int j = 0; j < classes; j++) {
            wp[(size_t)r * classes + j] = exp(x[j] - m) / s;
            wdl[(size_t)r * classes + j] = (wp[(size_t)r * classes + j] - (j == labels[r])) * scale;
        }
    }
    float loss_sum = 1.5f, correct = 2.0f; /* accumulated into */
    CHECK_OK(tb.vt->softmax_xent_forward(Q, FG_F32, logits, labels, rows, classes, probs, &loss_sum,
                                         &correct, &test_err));
    test_compare("xent probs", probs, wp, n, 1e-6);
    test_compare_scalar("xent loss_sum", loss_sum, 1.5 + loss, 1e-5);
    test_compare_scalar("xent correct", correct, 2.0 + hits, 0);
    CHECK_OK(tb.vt->softmax_xent_backward(Q, FG_F32, probs, labels, rows, classes, scale, dl,
                                          &test_err));
    test_compare("xent dlogits", dl, wdl, n, 1e-6);
    /* in place: dlogits over probs */
    CHECK_OK(tb.vt->softmax_xent_backward(Q, FG_F32, probs, labels, rows, classes, scale, probs,
                                          &test_err));
    test_compare("xent dlogits in place", probs, wdl, n, 1e-6);
    free(logits); free(probs); free(dl); free(labels); free(wp); free(wdl);
}

static void test_xent(void)
{
    test_xent_case(7, 1);
    test_xent_case(7, 10);
    test_xent_case(33, 33);
    test_xent_case(129, 129);
    test_xent_case(5000, 10);
    float logits[30] = { 0 }, probs[30], loss = 0, correct = 0;
    int32_t labels[3] = { 1, 9, 10 };
    fg_status st = tb.vt->softmax_xent_forward(Q, FG_F32, logits, labels, 3, 10, probs, &loss,
                                               &correct, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "row 2 has label 10") &&
              strstr(test_err.message, "[0, 10)"),
          "%s", test_err.message);
    labels[2] = -2;
    st = tb.vt->softmax_xent_backward(Q, FG_F32, probs, labels, 3, 10, 1.0f, probs, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "row 2 has label -2"), "%s",
          test_err.message);
    /* FG_IGNORED_LABEL: no loss, no hit, a zero gradient row; the others as without it */
    labels[2] = FG_IGNORED_LABEL;
    for (int i = 0; i < 30; i++)
        logits[i] = (float)((i * 7) % 11) / 4.0f;
    float ref_loss = 0, ref_hits = 0, ref_probs[30], d[30];
    st = tb.vt->softmax_xent_forward(Q, FG_F32, logits, labels, 2, 10, ref_probs, &ref_loss,
                                     &ref_hits, &test_err);
    CHECK(st == FG_OK, "%s", test_err.message);
    st = tb.vt->softmax_xent_forward(Q, FG_F32, logits, labels, 3, 10, probs, &loss, &correct,
                                     &test_err);
    CHECK(st == FG_OK && loss == ref_loss && correct == ref_hits,
          "ignored row: loss %g hits %g, without the row %g %g (%s)", loss, correct, ref_loss,
          ref_hits, test_err.message);
    st = tb.vt->softmax_xent_backward(Q, FG_F32, probs, labels, 3, 10, 0.5f, d, &test_err);
    CHECK(st == FG_OK, "%s", test_err.message);
    for (int j = 0; j < 10; j++)
        CHECK(d[20 + j] == 0.0f && d[j] != 0.0f, "ignored row's gradient [%d] = %g", j,
              d[20 + j]);
}

void test_group_norm_act(void)
{
    test_seed(3);
    test_backend_open(&tb, 1, 2, 0);
    test_batchnorm();
    test_activations();
    test_dropout();
    test_xent();
    test_backend_close(&tb);
}
