/* Backward ops against central finite differences of a double-precision forward, for
 * L = sum(dy * y): conv2d (x, w, bias), pooling, batch norm (x, gamma, beta),
 * activations and softmax cross-entropy. The plugin's float gradients must match the
 * double numerical ones to 1e-4 relative. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_backend tb;
#define Q tb.state, tb.queue

#define FD_STEP 1e-6
#define FD_TOL 1e-4

typedef double (*loss_fn)(void *ctx);

/* grad[i] = dL/dtheta[i] by central differences; theta is one of ctx's inputs. */
static void fd_grad(loss_fn f, void *ctx, double *theta, size_t n, double *grad)
{
    for (size_t i = 0; i < n; i++) {
        double keep = theta[i];
        theta[i] = keep + FD_STEP;
        double lp = f(ctx);
        theta[i] = keep - FD_STEP;
        double lm = f(ctx);
        theta[i] = keep;
        grad[i] = (lp - lm) / (2 * FD_STEP);
    }
}

static double *to_double(const float *x, size_t n)
{
    double *d = test_alloc(n * 8);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static void check_fd(const char *what, loss_fn f, void *ctx, double *theta, const float *got,
                     size_t n)
{
    double *g = test_alloc(n * 8);
    fd_grad(f, ctx, theta, n, g);
    test_compare(what, got, g, n, FD_TOL);
    free(g);
}

/* ---- conv2d ------------------------------------------------------------------------------ */

typedef struct conv_ctx {
    fg_conv2d_desc d;
    double *x, *w, *b, *r;
} conv_ctx;

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    const fg_conv2d_desc *d = &c->d;
    double loss = 0.0;
    size_t o = 0;
    for (int n = 0; n < d->n; n++)
        for (int k = 0; k < d->k; k++)
            for (int oh = 0; oh < d->out_h; oh++)
                for (int ow = 0; ow < d->out_w; ow++, o++) {
                    double acc = c->b[k];
                    for (int ch = 0; ch < d->c; ch++)
                        for (int r = 0; r < d->r; r++)
                            for (int s = 0; s < d->s; s++) {
                                int ih = oh * d->stride_h - d->pad_h + r;
                                int iw = ow * d->stride_w - d->pad_w + s;
                                if (ih < 0 || ih >= d->h || iw < 0 || iw >= d->w)
                                    continue;
                                acc += c->x[(((size_t)n * d->c + ch) * d->h + ih) * d->w + iw] *
                                       c->w[(((size_t)k * d->c + ch) * d->r + r) * d->s + s];
                            }
                    loss += c->r[o] * acc;
                }
    return loss;
}

static void test_conv_grad(void)
{
    fg_conv2d_desc d = { sizeof d, 2, 3, 7, 6, 4, 3, 3, 1, 1, 2, 2, 0, 0, FG_LAYOUT_NCHW };
    d.out_h = (d.h + 2 * d.pad_h - d.r) / d.stride_h + 1;
    d.out_w = (d.w + 2 * d.pad_w - d.s) / d.stride_w + 1;
    size_t xs = (size_t)d.n * d.c * d.h * d.w, ws = (size_t)d.k * d.c * d.r * d.s;
    size_t ys = (size_t)d.n * d.k * d.out_h * d.out_w;
    float *x = test_alloc(xs * 4), *w = test_alloc(ws * 4), *b = test_alloc((size_t)d.k * 4);
    float *dy = test_alloc(ys * 4), *dx = test_alloc(xs * 4), *dw = test_alloc(ws * 4);
    float *db = test_alloc((size_t)d.k * 4), *y = test_alloc(ys * 4);
    test_fill_uniform(x, xs, -1, 1);
    test_fill_uniform(w, ws, -1, 1);
    test_fill_uniform(b, (size_t)d.k, -1, 1);
    test_fill_uniform(dy, ys, -1, 1);
    void *work = test_alloc(tb.vt->conv2d_workspace(tb.state, &d));
    CHECK_OK(tb.vt->conv2d_forward(Q, FG_F32, FG_F32, &d, x, w, b, y, work, &test_err));
    CHECK_OK(tb.vt->conv2d_backward(Q, FG_F32, FG_F32, FG_F32, &d, x, w, dy, dx, dw, db, 0, work,
                                    &test_err));
    conv_ctx c = { d, to_double(x, xs), to_double(w, ws), to_double(b, (size_t)d.k),
                   to_double(dy, ys) };
    check_fd("conv dx vs finite differences", conv_loss, &c, c.x, dx, xs);
    check_fd("conv dw vs finite differences", conv_loss, &c, c.w, dw, ws);
    check_fd("conv dbias vs finite differences", conv_loss, &c, c.b, db, (size_t)d.k);
    free(c.x); free(c.w); free(c.b); free(c.r);
    free(x); free(w); free(b); free(dy); free(dx); free(dw); free(db); free(y); free(work);
}

/* ---- pooling ------------------------------------------------------------------------------ */

typedef struct pool_ctx {
    fg_conv2d_desc d;
    int is_max;
    double *x, *r;
} pool_ctx;

static double pool_loss(void *p)
{
    pool_ctx *c = p;
    const fg_conv2d_desc *d = &c->d;
    double loss = 0.0;
    size_t o = 0;
    for (int n = 0; n < d->n * d->c; n++)
        for (int oh = 0; oh < d->out_h; oh++)
            for (int ow = 0; ow < d->out_w; ow++, o++) {
                double best = -INFINITY, sum = 0.0;
                for (int r = 0; r < d->r; r++)
                    for (int s = 0; s < d->s; s++) {
                        int ih = oh * d->stride_h - d->pad_h + r;
                        int iw = ow * d->stride_w - d->pad_w + s;
                        if (ih < 0 || ih >= d->h || iw < 0 || iw >= d->w)
                            continue;
                        double v = c->x[((size_t)n * d->h + ih) * d->w + iw];
                        sum += v;
                        best = v > best ? v : best;
                    }
                loss += c->r[o] * (c->is_max ? best : sum / (d->r * d->s));
            }
    return loss;
}

static void test_pool_grad(int mode, int r, int stride, int pad)
{
    fg_conv2d_desc d = { sizeof d, 2, 3, 7, 8, 0, r, r, pad, pad, stride, stride, 0, 0,
                         FG_LAYOUT_NCHW };
    d.out_h = (d.h + 2 * pad - r) / stride + 1;
    d.out_w = (d.w + 2 * pad - r) / stride + 1;
    size_t xs = (size_t)d.n * d.c * d.h * d.w, ys = (size_t)d.n * d.c * d.out_h * d.out_w;
    float *x = test_alloc(xs * 4), *y = test_alloc(ys * 4), *dy = test_alloc(ys * 4);
    float *dx = test_alloc(xs * 4);
    int32_t *am = test_alloc(ys * 4);
    /* distinct values 0.01 apart, shuffled: no ties within a finite-difference step */
    for (size_t i = 0; i < xs; i++)
        x[i] = (float)(0.01 * (double)i - 1.0);
    for (size_t i = xs - 1; i > 0; i--) {
        size_t j = (size_t)test_uniform(0, (double)i + 1) % (i + 1);
        float t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
    test_fill_uniform(dy, ys, -1, 1);
    CHECK_OK(tb.vt->pool2d_forward(Q, FG_F32, mode, &d, x, y, am, &test_err));
    CHECK_OK(tb.vt->pool2d_backward(Q, FG_F32, mode, &d, dy, am, dx, &test_err));
    pool_ctx c = { d, mode == FG_POOL_MAX, to_double(x, xs), to_double(dy, ys) };
    char what[80];
    snprintf(what, sizeof what, "%s pool %dx%d stride %d dx vs finite differences",
             mode == FG_POOL_MAX ? "max" : "avg", r, r, stride);
    check_fd(what, pool_loss, &c, c.x, dx, xs);
    free(c.x); free(c.r); free(x); free(y); free(dy); free(dx); free(am);
}

/* ---- batch norm --------------------------------------------------------------------------- */

typedef struct bn_ctx {
    int n, c, sp;
    double eps;
    double *x, *gamma, *beta, *r;
} bn_ctx;

static double bn_loss(void *p)
{
    bn_ctx *b = p;
    double loss = 0.0, count = (double)b->n * b->sp;
    for (int ch = 0; ch < b->c; ch++) {
        double s = 0.0, ss = 0.0;
        for (int i = 0; i < b->n; i++)
            for (int k = 0; k < b->sp; k++)
                s += b->x[((size_t)i * b->c + ch) * b->sp + k];
        double mean = s / count;
        for (int i = 0; i < b->n; i++)
            for (int k = 0; k < b->sp; k++) {
                double d = b->x[((size_t)i * b->c + ch) * b->sp + k] - mean;
                ss += d * d;
            }
        double invstd = 1.0 / sqrt(ss / count + b->eps);
        for (int i = 0; i < b->n; i++)
            for (int k = 0; k < b->sp; k++) {
                size_t o = ((size_t)i * b->c + ch) * b->sp + k;
                loss += b->r[o] * ((b->x[o] - mean) * invstd * b->gamma[ch] + b->beta[ch]);
            }
    }
    return loss;
}

static void test_bn_grad(int n, int c, int sp)
{
    size_t total = (size_t)n * c * sp;
    float *x = test_alloc(total * 4), *y = test_alloc(total * 4), *dy = test_alloc(total * 4);
    float *dx = test_alloc(total * 4), *g = test_alloc((size_t)c * 4);
    float *be = test_alloc((size_t)c * 4), *sm = test_alloc((size_t)c * 4);
    float *si = test_alloc((size_t)c * 4), *dg = test_alloc((size_t)c * 4);
    float *db = test_alloc((size_t)c * 4);
    test_fill_uniform(x, total, -2, 2);
    test_fill_uniform(dy, total, -1, 1);
    test_fill_uniform(g, (size_t)c, 0.5, 1.5);
    test_fill_uniform(be, (size_t)c, -1, 1);
    float eps = 1e-3f;
    CHECK_OK(tb.vt->batchnorm_forward(Q, FG_F32, FG_F32, 1, n, c, sp, x, g, be, NULL, NULL, 0.1f,
                                      eps, sm, si, y, &test_err));
    CHECK_OK(tb.vt->batchnorm_backward(Q, FG_F32, FG_F32, FG_F32, n, c, sp, x, g, sm, si, dy, dx,
                                       dg, db, 0, &test_err));
    bn_ctx b = { n, c, sp, eps, to_double(x, total), to_double(g, (size_t)c),
                 to_double(be, (size_t)c), to_double(dy, total) };
    check_fd("bn dx vs finite differences", bn_loss, &b, b.x, dx, total);
    check_fd("bn dgamma vs finite differences", bn_loss, &b, b.gamma, dg, (size_t)c);
    check_fd("bn dbeta vs finite differences", bn_loss, &b, b.beta, db, (size_t)c);
    free(b.x); free(b.gamma); free(b.beta); free(b.r);
    free(x); free(y); free(dy); free(dx); free(g); free(be); free(sm); free(si); free(dg);
    free(db);
}

/* ---- activations -------------------------------------------------------------------------- */

typedef struct act_ctx {
    int act;
    size_t n;
    double *x, *r;
} act_ctx;

static double act_loss(void *p)
{
    act_ctx *a = p;
    double loss = 0.0;
    for (size_t i = 0; i < a->n; i++) {
        double x = a->x[i], y;
        switch (a->act) {
        case FG_ACT_RELU: y = x > 0 ? x : 0; break;
        case FG_ACT_GELU:
            y = 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
            break;
        case FG_ACT_TANH: y = tanh(x); break;
        case FG_ACT_SIGMOID: y = 1 / (1 + exp(-x)); break;
        default: y = x; break;
        }
        loss += a->r[i] * y;
    }
    return loss;
}

static void test_act_grad(void)
{
    size_t n = 257;
    float *x = test_alloc(n * 4), *y = test_alloc(n * 4), *dy = test_alloc(n * 4);
    float *dx = test_alloc(n * 4);
    for (int act = FG_ACT_NONE; act <= FG_ACT_SIGMOID; act++) {
        for (size_t i = 0; i < n; i++) {
            double v = test_uniform(0.01, 4);
            x[i] = (float)(i % 2 ? v : -v); /* away from relu's kink */
        }
        test_fill_uniform(dy, n, -1, 1);
        CHECK_OK(tb.vt->activation_forward(Q, FG_F32, act, x, y, n, &test_err));
        CHECK_OK(tb.vt->activation_backward(Q, FG_F32, act, x, y, dy, dx, n, &test_err));
        act_ctx a = { act, n, to_double(x, n), to_double(dy, n) };
        char what[64];
        snprintf(what, sizeof what, "activation %d dx vs finite differences", act);
        /* double loss over single element perturbations: each element is independent */
        check_fd(what, act_loss, &a, a.x, dx, n);
        free(a.x);
        free(a.r);
    }
    free(x); free(y); free(dy); free(dx);
}

/* ---- softmax cross-entropy ------------------------------------------------------------------ */

typedef struct xent_ctx {
    int rows, classes;
    double scale;
    double *logits;
    const int32_t *labels;
} xent_ctx;

static double xent_loss(void *p)
{
    xent_ctx *c = p;
    double loss = 0.0;
    for (int r = 0; r < c->rows; r++) {
        const double *x = c->logits + (size_t)r * c->classes;
        double m = x[0], s = 0.0;
        for (int j = 1; j < c->classes; j++)
            m = x[j] > m ? x[j] : m;
        for (int j = 0; j < c->classes; j++)
            s += exp(x[j] - m);
        loss += m + log(s) - x[c->labels[r]];
    }
    return c->scale * loss;
}

static void test_xent_grad(void)
{
    int rows = 9, classes = 11;
    size_t n = (size_t)rows * classes;
    float *logits = test_alloc(n * 4), *probs = test_alloc(n * 4), *dl = test_alloc(n * 4);
    int32_t *labels = test_alloc((size_t)rows * 4);
    test_fill_uniform(logits, n, -5, 5);
    for (int r = 0; r < rows; r++)
        labels[r] = (r * 7) % classes;
    float loss = 0, correct = 0, scale = 1.0f / (float)rows;
    CHECK_OK(tb.vt->softmax_xent_forward(Q, FG_F32, logits, labels, rows, classes, probs, &loss,
                                         &correct, &test_err));
    CHECK_OK(tb.vt->softmax_xent_backward(Q, FG_F32, probs, labels, rows, classes, scale, dl,
                                          &test_err));
    xent_ctx c = { rows, classes, scale, to_double(logits, n), labels };
    check_fd("softmax xent dlogits vs finite differences", xent_loss, &c, c.logits, dl, n);
    test_compare_scalar("softmax xent loss", loss * scale, xent_loss(&c), 1e-5);
    free(c.logits); free(logits); free(probs); free(dl); free(labels);
}

void test_group_gradients(void)
{
    test_seed(4);
    test_backend_open(&tb, 1, 2, 0);
    test_conv_grad();
    test_pool_grad(FG_POOL_MAX, 2, 2, 0);
    test_pool_grad(FG_POOL_MAX, 3, 1, 1);
    test_pool_grad(FG_POOL_AVG, 2, 2, 0);
    test_pool_grad(FG_POOL_AVG, 3, 1, 1);
    test_bn_grad(4, 3, 5);
    test_bn_grad(6, 5, 1);
    test_act_grad();
    test_xent_grad();
    test_backend_close(&tb);
}
