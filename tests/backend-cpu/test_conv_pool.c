/* conv2d and pooling against direct double-precision loops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_backend tb;
#define Q tb.state, tb.queue

static fg_conv2d_desc make_desc(int n, int c, int h, int w, int k, int r, int s, int ph,
                                int pw, int sh, int sw)
{
    fg_conv2d_desc d = { sizeof d, n, c, h, w, k, r, s, ph, pw, sh, sw, 0, 0, FG_LAYOUT_NCHW };
    d.out_h = (h + 2 * ph - r) / sh + 1;
    d.out_w = (w + 2 * pw - s) / sw + 1;
    return d;
}

static size_t at4(const fg_conv2d_desc *d, int n, int c, int h, int w, int C, int H, int W)
{
    (void)d;
    return (((size_t)n * C + c) * H + h) * W + w;
}

/* Sums of |terms| behind each reference value, for test_compare_terms. */
typedef struct conv_terms {
    double *y, *dx, *dw, *db;
} conv_terms;

/* y = conv(x, w) + bias, and the three gradients for upstream dy, in double. */
static void conv_reference(const fg_conv2d_desc *d, const float *x, const float *w,
                           const float *bias, const float *dy, double *y, double *dx,
                           double *dw, double *db, conv_terms *t)
{
    size_t xs = (size_t)d->n * d->c * d->h * d->w, ws = (size_t)d->k * d->c * d->r * d->s;
    memset(dx, 0, xs * 8);
    memset(dw, 0, ws * 8);
    memset(db, 0, (size_t)d->k * 8);
    memset(t->dx, 0, xs * 8);
    memset(t->dw, 0, ws * 8);
    memset(t->db, 0, (size_t)d->k * 8);
    for (int n = 0; n < d->n; n++)
        for (int k = 0; k < d->k; k++)
            for (int oh = 0; oh < d->out_h; oh++)
                for (int ow = 0; ow < d->out_w; ow++) {
                    size_t o = at4(d, n, k, oh, ow, d->k, d->out_h, d->out_w);
                    double acc = bias ? bias[k] : 0.0, mag = fabs(acc);
                    db[k] += dy[o];
                    t->db[k] += fabs(dy[o]);
                    for (int c = 0; c < d->c; c++)
                        for (int r = 0; r < d->r; r++)
                            for (int s = 0; s < d->s; s++) {
                                int ih = oh * d->stride_h - d->pad_h + r;
                                int iw = ow * d->stride_w - d->pad_w + s;
                                if (ih < 0 || ih >= d->h || iw < 0 || iw >= d->w)
                                    continue;
                                size_t xi = at4(d, n, c, ih, iw, d->c, d->h, d->w);
                                size_t wi = at4(d, k, c, r, s, d->c, d->r, d->s);
                                acc += (double)x[xi] * w[wi];
                                dx[xi] += (double)dy[o] * w[wi];
                                dw[wi] += (double)dy[o] * x[xi];
                                mag += fabs((double)x[xi] * w[wi]);
                                t->dx[xi] += fabs((double)dy[o] * w[wi]);
                                t->dw[wi] += fabs((double)dy[o] * x[xi]);
                            }
                    y[o] = acc;
                    t->y[o] = mag;
                }
}

static void test_conv_case(fg_conv2d_desc d, int with_bias)
{
    size_t xs = (size_t)d.n * d.c * d.h * d.w, ws = (size_t)d.k * d.c * d.r * d.s;
    size_t ys = (size_t)d.n * d.k * d.out_h * d.out_w;
    float *x = test_alloc(xs * 4), *w = test_alloc(ws * 4), *bias = test_alloc((size_t)d.k * 4);
    float *y = test_alloc(ys * 4), *dy = test_alloc(ys * 4), *dx = test_alloc(xs * 4);
    float *dw = test_alloc(ws * 4), *db = test_alloc((size_t)d.k * 4);
    double *wy = test_alloc(ys * 8), *wdx = test_alloc(xs * 8), *wdw = test_alloc(ws * 8);
    double *wdb = test_alloc((size_t)d.k * 8);
    conv_terms t = { test_alloc(ys * 8), test_alloc(xs * 8), test_alloc(ws * 8),
                     test_alloc((size_t)d.k * 8) };
    test_fill_uniform(x, xs, -1, 1);
    test_fill_uniform(w, ws, -1, 1);
    test_fill_uniform(bias, (size_t)d.k, -1, 1);
    test_fill_uniform(dy, ys, -1, 1);
    size_t wsb = tb.vt->conv2d_workspace(tb.state, &d);
    CHECK(wsb > 0, "conv2d_workspace is 0");
    void *work = test_alloc(wsb);
    const float *b = with_bias ? bias : NULL;
    conv_reference(&d, x, w, b, dy, wy, wdx, wdw, wdb, &t);
    char what[128];
    snprintf(what, sizeof what, "conv n%d c%d %dx%d k%d %dx%d pad %d,%d stride %d,%d", d.n,
             d.c, d.h, d.w, d.k, d.r, d.s, d.pad_h, d.pad_w, d.stride_h, d.stride_w);
    CHECK_OK(tb.vt->conv2d_forward(Q, FG_F32, FG_F32, &d, x, w, b, y, work, &test_err));
    test_compare_terms(what, y, wy, t.y, ys, 1e-5);
    test_fill_uniform(dx, xs, 5, 6); /* dx must be overwritten */
    CHECK_OK(tb.vt->conv2d_backward(Q, FG_F32, FG_F32, FG_F32, &d, x, w, dy, dx, dw, db, 0, work,
                                    &test_err));
    test_compare_terms("conv dx", dx, wdx, t.dx, xs, 1e-5);
    test_compare_terms("conv dw", dw, wdw, t.dw, ws, 1e-5);
    test_compare_terms("conv dbias", db, wdb, t.db, (size_t)d.k, 1e-5);
    /* accumulate: dw and dbias add, dx NULL is allowed */
    for (size_t i = 0; i < ws; i++) {
        wdw[i] += dw[i];
        t.dw[i] += fabs(dw[i]);
    }
    for (int k = 0; k < d.k; k++) {
        wdb[k] += db[k];
        t.db[k] += fabs(db[k]);
    }
    CHECK_OK(tb.vt->conv2d_backward(Q, FG_F32, FG_F32, FG_F32, &d, x, w, dy, NULL, dw, db, 1, work,
                                    &test_err));
    test_compare_terms("conv dw accumulate", dw, wdw, t.dw, ws, 1e-5);
    test_compare_terms("conv dbias accumulate", db, wdb, t.db, (size_t)d.k, 1e-5);
    free(x); free(w); free(bias); free(y); free(dy); free(dx); free(dw); free(db);
    free(wy); free(wdx); free(wdw); free(wdb); free(work);
    free(t.y); free(t.dx); free(t.dw); free(t.db);
}

static void test_conv(void)
{
    test_conv_case(make_desc(3, 5, 11, 9, 7, 3, 3, 1, 1, 2, 2), 1);
    test_conv_case(make_desc(2, 1, 28, 28, 4, 3, 3, 0, 0, 1, 1), 1);
    test_conv_case(make_desc(4, 3, 7, 6, 2, 5, 3, 2, 1, 1, 2), 0);
    test_conv_case(make_desc(1, 6, 5, 5, 3, 1, 1, 0, 0, 1, 1), 1);
    test_conv_case(make_desc(2, 2, 4, 4, 3, 4, 4, 0, 0, 1, 1), 1); /* 1x1 output */
    /* a column matrix of 40 images exceeds the plugin's 2 MiB group: several groups */
    test_conv_case(make_desc(40, 16, 12, 12, 5, 3, 3, 1, 1, 1, 1), 1);
    fg_conv2d_desc bad = make_desc(1, 1, 5, 5, 1, 3, 3, 0, 0, 1, 1);
    bad.out_h = 4;
    float buf[64] = { 0 };
    fg_status st = tb.vt->conv2d_forward(Q, FG_F32, FG_F32, &bad, buf, buf, NULL, buf, buf,
                                         &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "out_h = 4"), "%s",
          test_err.message);
}

static void pool_reference(int is_max, const fg_conv2d_desc *d, const float *x,
                           const float *dy, double *y, double *dx)
{
    memset(dx, 0, (size_t)d->n * d->c * d->h * d->w * 8);
    for (int n = 0; n < d->n; n++)
        for (int c = 0; c < d->c; c++)
            for (int oh = 0; oh < d->out_h; oh++)
                for (int ow = 0; ow < d->out_w; ow++) {
                    size_t o = at4(d, n, c, oh, ow, d->c, d->out_h, d->out_w);
                    double best = -INFINITY, sum = 0.0;
                    size_t where = 0;
                    for (int r = 0; r < d->r; r++)
                        for (int s = 0; s < d->s; s++) {
                            int ih = oh * d->stride_h - d->pad_h + r;
                            int iw = ow * d->stride_w - d->pad_w + s;
                            if (ih < 0 || ih >= d->h || iw < 0 || iw >= d->w)
                                continue;
                            size_t xi = at4(d, n, c, ih, iw, d->c, d->h, d->w);
                            sum += x[xi];
                            if (x[xi] > best) {
                                best = x[xi];
                                where = xi;
                            }
                        }
                    if (is_max) {
                        y[o] = best;
                        dx[where] += dy[o];
                        continue;
                    }
                    y[o] = sum / (d->r * d->s);
                    for (int r = 0; r < d->r; r++)
                        for (int s = 0; s < d->s; s++) {
                            int ih = oh * d->stride_h - d->pad_h + r;
                            int iw = ow * d->stride_w - d->pad_w + s;
                            if (ih >= 0 && ih < d->h && iw >= 0 && iw < d->w)
                                dx[at4(d, n, c, ih, iw, d->c, d->h, d->w)] +=
                                    dy[o] / (d->r * d->s);
                        }
                }
}

static void test_pool_case(int mode, fg_conv2d_desc d)
{
    size_t xs = (size_t)d.n * d.c * d.h * d.w, ys = (size_t)d.n * d.c * d.out_h * d.out_w;
    float *x = test_alloc(xs * 4), *y = test_alloc(ys * 4), *dy = test_alloc(ys * 4);
    float *dx = test_alloc(xs * 4);
    int32_t *am = test_alloc(ys * 4);
    double *wy = test_alloc(ys * 8), *wdx = test_alloc(xs * 8);
    test_fill_uniform(x, xs, -1, 1);
    test_fill_uniform(dy, ys, -1, 1);
    test_fill_uniform(dx, xs, 3, 4);
    pool_reference(mode == FG_POOL_MAX, &d, x, dy, wy, wdx);
    char what[96];
    snprintf(what, sizeof what, "%s pool %dx%d stride %d pad %d on %dx%d",
             mode == FG_POOL_MAX ? "max" : "avg", d.r, d.s, d.stride_h, d.pad_h, d.h, d.w);
    CHECK_OK(tb.vt->pool2d_forward(Q, FG_F32, mode, &d, x, y, mode == FG_POOL_MAX ? am : NULL,
                                   &test_err));
    test_compare(what, y, wy, ys, 1e-6);
    CHECK_OK(tb.vt->pool2d_backward(Q, FG_F32, mode, &d, dy, mode == FG_POOL_MAX ? am : NULL, dx,
                                    &test_err));
    test_compare("pool dx", dx, wdx, xs, 1e-6);
    free(x); free(y); free(dy); free(dx); free(am); free(wy); free(wdx);
}

static void test_pool(void)
{
    for (int mode = FG_POOL_MAX; mode <= FG_POOL_AVG; mode++) {
        test_pool_case(mode, make_desc(3, 5, 9, 7, 0, 2, 2, 0, 0, 2, 2));
        test_pool_case(mode, make_desc(2, 3, 9, 7, 0, 3, 3, 0, 0, 1, 1));
        test_pool_case(mode, make_desc(2, 4, 8, 11, 0, 3, 3, 1, 1, 2, 2));
        test_pool_case(mode, make_desc(64, 32, 26, 26, 0, 2, 2, 0, 0, 2, 2));
    }
    fg_conv2d_desc d = make_desc(1, 1, 4, 4, 0, 2, 2, 0, 0, 2, 2);
    float buf[16] = { 0 };
    fg_status st = tb.vt->pool2d_forward(Q, FG_F32, FG_POOL_MAX, &d, buf, buf, NULL, &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "argmax"), "%s",
          test_err.message);
}

void test_group_conv_pool(void)
{
    test_seed(2);
    test_backend_open(&tb, 1, 2, 0);
    test_conv();
    test_pool();
    test_backend_close(&tb);
}
