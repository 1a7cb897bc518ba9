/* Parity groups of the layers' ops: bias, activations, conv2d, pooling, batch norm,
 * dropout and softmax cross-entropy, in fp32 and in the half-precision mixes the
 * precision plugins use. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

/* f32; bf16-mixed and fp16-mixed (half activations and parameters, f32 gradients); and
 * half activations over f32 parameters. */
typedef struct mix {
    uint32_t act, param, grad;
} mix;

static const mix mixes[] = {
    {FG_F32, FG_F32, FG_F32},
    {FG_BF16, FG_BF16, FG_F32},
    {FG_F16, FG_F16, FG_F32},
    {FG_BF16, FG_F32, FG_F32},
};
#define MIXES ((int)(sizeof mixes / sizeof mixes[0]))

static const char *mix_name(const mix *dt)
{
    static char buf[32];
    snprintf(buf, sizeof buf, "%s/%s/%s", fg_dtype_name((fg_dtype)dt->act),
             fg_dtype_name((fg_dtype)dt->param), fg_dtype_name((fg_dtype)dt->grad));
    return buf;
}

/* Outputs made from half inputs carry the half tolerance. */
static double tol_mix(const mix *dt)
{
    double t = tol_of(dt->act);
    return tol_of(dt->param) > t ? tol_of(dt->param) : t;
}

/* ---- bias and activations --------------------------------------------------------------- */

static const int bias_shapes[][3] = { { 1, 1, 1 }, { 7, 13, 1 }, { 64, 256, 1 }, { 3, 5, 17 },
                                      { 16, 32, 196 }, { 1000, 10, 1 } };

void test_bias_act(void)
{
    for (int x = 0; x < MIXES; x++) {
        const mix *dt = &mixes[x];
        for (size_t s = 0; s < sizeof bias_shapes / sizeof bias_shapes[0]; s++) {
            int rows = bias_shapes[s][0], cols = bias_shapes[s][1], sp = bias_shapes[s][2];
            size_t n = (size_t)rows * (size_t)cols * (size_t)sp;
            pair y = prandom(n, dt->act, -1, 1), b = prandom((size_t)cols, dt->param, -1, 1);
            const char *what = W("bias_add %d x %d x %d %s", rows, cols, sp, mix_name(dt));
            BOTH(what, V->bias_add(S, Q, dt->act, dt->param, X(y), X(b), rows, cols, sp, E));
            compare(what, y, n, dt->act, tol_of(dt->act));
            for (int acc = 0; acc < 2; acc++) {
                pair db = prandom((size_t)cols, dt->grad, -1, 1);
                if (!acc)
                    ppoison(db);
                what = W("bias_grad %d x %d x %d acc=%d %s", rows, cols, sp, acc, mix_name(dt));
                BOTH(what,
                     V->bias_grad(S, Q, dt->grad, dt->act, X(db), X(y), rows, cols, sp, acc, E));
                compare(what, db, (size_t)cols, dt->grad, 1e-6);
            }
            release_all();
        }
        static const size_t sizes[] = { 1, 1000, 65537 };
        for (size_t s = 0; s < 3; s++)
            for (int act = FG_ACT_NONE; act <= FG_ACT_SIGMOID; act++) {
                size_t n = sizes[s];
                pair in = prandom(n, dt->act, -4, 4), out = pnew(n * dtype_size(dt->act));
                ppoison(out);
                const char *what = W("activation %d forward n=%zu %s", act, n, mix_name(dt));
                BOTH(what, V->activation_forward(S, Q, dt->act, act, X(in), X(out), n, E));
                compare(what, out, n, dt->act, tol_of(dt->act));
                pmirror(out); /* backward from the same y on both sides */
                pair dy = prandom(n, dt->act, -1, 1), dx = pnew(n * dtype_size(dt->act));
                ppoison(dx);
                what = W("activation %d backward n=%zu %s", act, n, mix_name(dt));
                BOTH(what,
                     V->activation_backward(S, Q, dt->act, act, X(in), X(out), X(dy), X(dx), n, E));
                compare(what, dx, n, dt->act, tol_of(dt->act));
                release_all();
            }
    }
    /* the fp32 entries */
    pair y = prandom(64 * 10, FG_F32, -1, 1), b = prandom(10, FG_F32, -1, 1);
    BOTH("bias_add fp32 entry", V->bias_add(S, Q, FG_F32, FG_F32, X(y), X(b), 64, 10, 1, E));
    compare("bias_add fp32 entry", y, 640, FG_F32, 0);
    pair db = pnew(40);
    ppoison(db);
    BOTH("bias_grad fp32 entry", V->bias_grad(S, Q, FG_F32, FG_F32, X(db), X(y), 64, 10, 1, 0, E));
    compare("bias_grad fp32 entry", db, 10, FG_F32, 1e-6);
    pair o = pnew(640 * 4);
    ppoison(o);
    BOTH("gelu fp32 entry", V->activation_forward(S, Q, FG_F32, FG_ACT_GELU, X(y), X(o), 640, E));
    compare("gelu fp32 entry", o, 640, FG_F32, 1e-5);
    pair dx = pnew(640 * 4);
    ppoison(dx);
    BOTH("gelu backward fp32 entry",
         V->activation_backward(S, Q, FG_F32, FG_ACT_GELU, X(y), X(o), X(y), X(dx), 640, E));
    compare("gelu backward fp32 entry", dx, 640, FG_F32, 1e-5);
    release_all();
}

/* ---- conv2d -------------------------------------------------------------------------------- */

static fg_conv2d_desc window(int n, int c, int h, int w, int k, int r, int s, int ph, int pw,
                             int sh, int sw)
{
    fg_conv2d_desc d = { sizeof d, n, c, h, w, k, r, s, ph, pw, sh, sw, 0, 0, FG_LAYOUT_NCHW };
    d.out_h = (h + 2 * ph - r) / sh + 1;
    d.out_w = (w + 2 * pw - s) / sw + 1;
    return d;
}

void test_conv(void)
{
    const fg_conv2d_desc descs[] = {
        window(2, 3, 7, 9, 4, 3, 3, 1, 1, 1, 1),     window(4, 1, 28, 28, 32, 3, 3, 0, 0, 1, 1),
        window(3, 5, 11, 13, 6, 5, 3, 2, 1, 2, 1),   window(2, 32, 13, 13, 64, 3, 3, 0, 0, 1, 1),
        window(1, 2, 4, 4, 3, 4, 4, 0, 0, 1, 1),     window(5, 3, 9, 9, 7, 1, 1, 0, 0, 2, 2),
    };
    for (int x = 0; x < 3; x++) { /* f32, bf16-mixed, fp16-mixed */
        const mix *dt = &mixes[x];
        for (size_t i = 0; i < sizeof descs / sizeof descs[0]; i++) {
            const fg_conv2d_desc *d = &descs[i];
            size_t xn = (size_t)d->n * d->c * d->h * d->w, wn = (size_t)d->k * d->c * d->r * d->s;
            size_t yn = (size_t)d->n * d->k * d->out_h * d->out_w;
            size_t wc = P.ref->conv2d_workspace(P.rs, d), wg = P.dut->conv2d_workspace(P.ds, d);
            checks++;
            if (!wg)
                fail("conv2d_workspace of a valid window is 0");
            pair ws = pnew(wc > wg ? wc : wg);
            pair in = prandom(xn, dt->act, -1, 1), w = prandom(wn, dt->param, -0.5, 0.5);
            pair b = prandom((size_t)d->k, dt->param, -1, 1), y = pnew(yn * dtype_size(dt->act));
            int with_bias = i % 2 == 0;
            ppoison(y);
            const char *what = W("conv2d_forward desc %zu bias=%d %s", i, with_bias,
                                 mix_name(dt));
            BOTH(what, V->conv2d_forward(S, Q, dt->act, dt->param, d, X(in), X(w), XN(with_bias, b),
                                         X(y), X(ws), E));
            compare(what, y, yn, dt->act, tol_mix(dt));
            for (int acc = 0; acc < 2; acc++) {
                int with_dx = !(i == 1 && acc == 0); /* a first layer: no dx */
                pair dy = prandom(yn, dt->act, -1, 1), dx = pnew(xn * dtype_size(dt->act));
                pair dw = prandom(wn, dt->grad, -1, 1), db = prandom((size_t)d->k, dt->grad, -1, 1);
                ppoison(dx);
                if (!acc) {
                    ppoison(dw);
                    ppoison(db);
                }
                what = W("conv2d_backward desc %zu acc=%d dx=%d %s", i, acc, with_dx,
                         mix_name(dt));
                BOTH(what, V->conv2d_backward(S, Q, dt->act, dt->param, dt->grad, d, X(in), X(w),
                                              X(dy), XN(with_dx, dx), X(dw), X(db), acc, X(ws), E));
                if (with_dx)
                    compare(W("conv2d_backward desc %zu acc=%d %s (dx)", i, acc, mix_name(dt)),
                            dx, xn, dt->act, tol_mix(dt));
                compare(W("conv2d_backward desc %zu acc=%d %s (dw)", i, acc, mix_name(dt)), dw,
                        wn, dt->grad, tol_mix(dt));
                compare(W("conv2d_backward desc %zu acc=%d %s (dbias)", i, acc, mix_name(dt)),
                        db, (size_t)d->k, dt->grad, tol_mix(dt));
            }
            release_all();
        }
    }
    /* the fp32 entries, and the same bits twice (deterministic algorithms) */
    const fg_conv2d_desc *d = &descs[3];
    size_t xn = (size_t)d->n * d->c * d->h * d->w, wn = (size_t)d->k * d->c * d->r * d->s;
    size_t yn = (size_t)d->n * d->k * d->out_h * d->out_w;
    size_t wc = P.ref->conv2d_workspace(P.rs, d), wg = P.dut->conv2d_workspace(P.ds, d);
    pair ws = pnew(wc > wg ? wc : wg), in = prandom(xn, FG_F32, -1, 1);
    pair w = prandom(wn, FG_F32, -1, 1), y = pnew(yn * 4), dw = pnew(wn * 4);
    ppoison(y);
    BOTH("conv2d_forward fp32 entry",
         V->conv2d_forward(S, Q, FG_F32, FG_F32, d, X(in), X(w), NULL, X(y), X(ws), E));
    compare("conv2d_forward fp32 entry", y, yn, FG_F32, 1e-5);
    BOTH("conv2d_backward fp32 entry",
         V->conv2d_backward(S, Q, FG_F32, FG_F32, FG_F32, d, X(in), X(w), X(y), NULL, X(dw), NULL,
                            0, X(ws), E));
    compare("conv2d_backward fp32 entry (dw)", dw, wn, FG_F32, 1e-5);
    pair dw2 = pnew(wn * 4);
    fg_error e = {0};
    P.dut->conv2d_backward(P.ds, P.dq, FG_F32, FG_F32, FG_F32, d, in.g, w.g, y.g, NULL, dw2.g, NULL,
                           0, ws.g, &e);
    download(dw, dw2.c);
    compare_exact("conv2d_backward twice gives the same bits", dw2, wn * 4);
    release_all();
}

/* ---- pooling -------------------------------------------------------------------------------- */

void test_pool(void)
{
    const fg_conv2d_desc descs[] = {
        window(2, 3, 28, 28, 0, 2, 2, 0, 0, 2, 2), window(2, 2, 7, 9, 0, 3, 3, 1, 1, 2, 2),
        window(1, 3, 5, 5, 0, 2, 2, 0, 0, 1, 1),   window(2, 1, 6, 6, 0, 3, 3, 1, 1, 1, 1),
        window(3, 4, 13, 11, 0, 3, 2, 0, 1, 3, 2),
    };
    for (int x = 0; x < 3; x++) {
        const mix *dt = &mixes[x];
        for (size_t i = 0; i < sizeof descs / sizeof descs[0]; i++)
            for (int mode = FG_POOL_MAX; mode <= FG_POOL_AVG; mode++) {
                const fg_conv2d_desc *d = &descs[i];
                size_t xn = (size_t)d->n * d->c * d->h * d->w;
                size_t yn = (size_t)d->n * d->c * d->out_h * d->out_w;
                pair in = prandom(xn, dt->act, -1, 1), y = pnew(yn * dtype_size(dt->act));
                pair am = pnew(yn * 4);
                ppoison(y);
                ppoison(am);
                const char *what = W("pool2d_forward desc %zu mode %d %s", i, mode, mix_name(dt));
                BOTH(what, V->pool2d_forward(S, Q, dt->act, mode, d, X(in), X(y),
                                             XN(mode == FG_POOL_MAX, am), E));
                compare(what, y, yn, dt->act, 0);
                if (mode == FG_POOL_MAX) {
                    compare_exact(W("pool2d_forward desc %zu %s (argmax)", i, mix_name(dt)), am,
                                  yn * 4);
                    pmirror(am);
                }
                pair dy = prandom(yn, dt->act, -1, 1), dx = pnew(xn * dtype_size(dt->act));
                ppoison(dx);
                what = W("pool2d_backward desc %zu mode %d %s", i, mode, mix_name(dt));
                BOTH(what, V->pool2d_backward(S, Q, dt->act, mode, d, X(dy),
                                              XN(mode == FG_POOL_MAX, am), X(dx), E));
                compare(what, dx, xn, dt->act, 0);
                release_all();
            }
    }
    const fg_conv2d_desc *d = &descs[0];
    size_t xn = (size_t)d->n * d->c * d->h * d->w, yn = (size_t)d->n * d->c * d->out_h * d->out_w;
    pair in = prandom(xn, FG_F32, -1, 1), y = pnew(yn * 4), am = pnew(yn * 4), dx = pnew(xn * 4);
    ppoison(y);
    BOTH("maxpool fp32 entry",
         V->pool2d_forward(S, Q, FG_F32, FG_POOL_MAX, d, X(in), X(y), X(am), E));
    compare("maxpool fp32 entry", y, yn, FG_F32, 0);
    ppoison(dx);
    BOTH("maxpool backward fp32 entry",
         V->pool2d_backward(S, Q, FG_F32, FG_POOL_MAX, d, X(y), X(am), X(dx), E));
    compare("maxpool backward fp32 entry", dx, xn, FG_F32, 0);
    release_all();
}

/* ---- batch norm ------------------------------------------------------------------------------- */

static const int bn_shapes[][3] = { { 2, 3, 1 }, { 8, 16, 49 }, { 32, 4, 1 }, { 5, 7, 13 } };

void test_batchnorm(void)
{
    for (int x = 0; x < MIXES; x++) {
        const mix *dt = &mixes[x];
        for (size_t s = 0; s < sizeof bn_shapes / sizeof bn_shapes[0]; s++)
            for (int variant = 0; variant < 3; variant++) {
                /* 0: training with affine and running stats; 1: training without either;
                 * 2: evaluation */
                int n = bn_shapes[s][0], c = bn_shapes[s][1], sp = bn_shapes[s][2];
                int training = variant < 2, affine = variant != 1, running = variant != 1;
                size_t xn = (size_t)n * c * sp;
                pair in = prandom(xn, dt->act, -2, 3), y = pnew(xn * dtype_size(dt->act));
                pair gamma = prandom((size_t)c, dt->param, 0.5, 1.5);
                pair beta = prandom((size_t)c, dt->param, -0.5, 0.5);
                pair rm = prandom((size_t)c, FG_F32, -0.5, 0.5), rv = prandom((size_t)c, FG_F32, 0.5, 2);
                pair sm = pnew((size_t)c * 4), si = pnew((size_t)c * 4);
                ppoison(y);
                ppoison(sm);
                ppoison(si);
                const char *what = W("batchnorm_forward %d x %d x %d variant %d %s", n, c, sp,
                                     variant, mix_name(dt));
                BOTH(what, V->batchnorm_forward(S, Q, dt->act, dt->param, training, n, c, sp, X(in),
                                                XN(affine, gamma), XN(affine, beta),
                                                XN(running, rm), XN(running, rv), 0.1f, 1e-5f,
                                                XN(training, sm), XN(training, si), X(y), E));
                compare(what, y, xn, dt->act, tol_mix(dt));
                if (training) {
                    compare(W("batchnorm_forward %d x %d x %d %s (saved mean)", n, c, sp,
                              mix_name(dt)), sm, (size_t)c, FG_F32, tol_mix(dt));
                    compare(W("batchnorm_forward %d x %d x %d %s (saved invstd)", n, c, sp,
                              mix_name(dt)), si, (size_t)c, FG_F32, tol_mix(dt));
                }
                if (training && running) {
                    compare(W("batchnorm_forward %d x %d x %d %s (running mean)", n, c, sp,
                              mix_name(dt)), rm, (size_t)c, FG_F32, 1e-5);
                    compare(W("batchnorm_forward %d x %d x %d %s (running var)", n, c, sp,
                              mix_name(dt)), rv, (size_t)c, FG_F32, 1e-5);
                }
                if (!training)
                    continue;
                pmirror(sm);
                pmirror(si);
                for (int acc = 0; acc < 2; acc++) {
                    pair dy = prandom(xn, dt->act, -1, 1), dx = pnew(xn * dtype_size(dt->act));
                    pair dg = prandom((size_t)c, dt->grad, -1, 1), db = prandom((size_t)c, dt->grad, -1, 1);
                    int with_dx = acc == 0 || variant == 0;
                    ppoison(dx);
                    if (!acc) {
                        ppoison(dg);
                        ppoison(db);
                    }
                    what = W("batchnorm_backward %d x %d x %d variant %d acc=%d %s", n, c, sp,
                             variant, acc, mix_name(dt));
                    BOTH(what, V->batchnorm_backward(S, Q, dt->act, dt->param, dt->grad, n, c, sp,
                                                     X(in), XN(affine, gamma), X(sm), X(si), X(dy),
                                                     XN(with_dx, dx), X(dg), X(db), acc, E));
                    if (with_dx)
                        compare(what, dx, xn, dt->act, tol_mix(dt));
                    compare(W("batchnorm_backward %d x %d x %d acc=%d %s (dgamma)", n, c, sp,
                              acc, mix_name(dt)), dg, (size_t)c, dt->grad, tol_mix(dt));
                    compare(W("batchnorm_backward %d x %d x %d acc=%d %s (dbeta)", n, c, sp,
                              acc, mix_name(dt)), db, (size_t)c, dt->grad, tol_mix(dt));
                }
                release_all();
            }
    }
}

/* ---- dropout ---------------------------------------------------------------------------------- */

void test_dropout(void)
{
    static const float ps[] = { 0.0f, 0.1f, 0.5f, 1.0f };
    static const size_t sizes[] = { 1, 1000, 100003 };
    for (int x = 0; x < 3; x++) {
        const mix *dt = &mixes[x];
        for (size_t pi = 0; pi < 4; pi++)
            for (size_t si = 0; si < 3; si++) {
                size_t n = sizes[si];
                uint64_t seed = 1234 + pi, offset = si * 1000003ull;
                pair in = prandom(n, dt->act, -1, 1), y = pnew(n * dtype_size(dt->act));
                pair mask = pnew(n);
                ppoison(y);
                ppoison(mask);
                const char *what = W("dropout_forward p=%g n=%zu %s", (double)ps[pi], n,
                                     mix_name(dt));
                BOTH(what, V->dropout_forward(S, Q, dt->act, ps[pi], seed, offset, X(in), X(y),
                                              X(mask), n, E));
                compare_exact(W("dropout_forward p=%g n=%zu %s (mask)", (double)ps[pi], n,
                                mix_name(dt)), mask, n);
                compare(W("dropout_forward p=%g n=%zu %s", (double)ps[pi], n, mix_name(dt)), y,
                        n, dt->act, 0);
                pair dy = prandom(n, dt->act, -1, 1), dx = pnew(n * dtype_size(dt->act));
                ppoison(dx);
                what = W("dropout_backward p=%g n=%zu %s", (double)ps[pi], n, mix_name(dt));
                BOTH(what, V->dropout_backward(S, Q, dt->act, ps[pi], X(mask), X(dy), X(dx), n, E));
                compare(what, dx, n, dt->act, 0);
                release_all();
            }
    }
    pair in = prandom(4097, FG_F32, -1, 1), y = pnew(4097 * 4), mask = pnew(4097);
    ppoison(mask);
    BOTH("dropout fp32 entry",
         V->dropout_forward(S, Q, FG_F32, 0.3f, 99, 7, X(in), X(y), X(mask), 4097, E));
    compare_exact("dropout fp32 entry (mask)", mask, 4097);
    release_all();
}

/* ABI 1.10: dropout_forward_dev draws at *offset_dev + offset (the counter read on the
 * queue), the same mask as dropout_forward at that offset, then advances the counter. */
static uint64_t counter_of(pair c, int tested)
{
    uint64_t v = 0;
    if (tested)
        download(c, &v);
    else
        memcpy(&v, c.c, sizeof v);
    return v;
}

static void dropout_dev_case(const mix *dt, size_t n, uint64_t base, uint64_t offset)
{
    const uint64_t step = 1ull << 32;
    const char *name = mix_name(dt);
    pair in = prandom(n, dt->act, -1, 1), y = pnew(n * dtype_size(dt->act));
    pair mask = pnew(n), mask2 = pnew(n), ymask = pnew(n), yv = pnew(n * dtype_size(dt->act));
    pair counter = pnew(sizeof base);
    pput(counter, &base);
    ppoison(y);
    ppoison(mask);
    BOTH(W("dropout_forward_dev n=%zu %s", n, name),
         V->dropout_forward_dev(S, Q, dt->act, 0.5f, 77, offset, X(counter), step, X(in), X(y),
                                X(mask), n, E));
    compare_exact(W("dropout_forward_dev n=%zu %s (mask)", n, name), mask, n);
    compare(W("dropout_forward_dev n=%zu %s", n, name), y, n, dt->act, 0);
    for (int side = 0; side < 2; side++)
        if (counter_of(counter, side) != base + step)
            fail("dropout_forward_dev n=%zu %s: %s counter %llu after one call, want %llu", n,
                 name, side ? "tested" : "cpu", (unsigned long long)counter_of(counter, side),
                 (unsigned long long)(base + step));
    /* dropout_forward at the summed offset: the uncaptured path's mask, bit for bit */
    ppoison(ymask);
    BOTH(W("dropout_forward at base + offset n=%zu %s", n, name),
         V->dropout_forward(S, Q, dt->act, 0.5f, 77, base + offset, X(in), X(yv), X(ymask), n,
                            E));
    unsigned char *a = malloc(n), *b = malloc(n);
    download(mask, a);
    download(ymask, b);
    if (memcmp(a, b, n) != 0)
        fail("dropout_forward_dev n=%zu %s: mask differs from dropout_forward at offset "
             "*offset_dev + offset", n, name);
    /* the advanced counter draws the next step's mask; advance 0 leaves it */
    ppoison(mask2);
    BOTH(W("dropout_forward_dev again n=%zu %s", n, name),
         V->dropout_forward_dev(S, Q, dt->act, 0.5f, 77, offset, X(counter), 0, X(in), X(y),
                                X(mask2), n, E));
    compare_exact(W("dropout_forward_dev again n=%zu %s (mask)", n, name), mask2, n);
    download(mask2, b);
    if (n >= 64 && memcmp(a, b, n) == 0)
        fail("dropout_forward_dev n=%zu %s: the advanced counter drew the same mask", n, name);
    for (int side = 0; side < 2; side++)
        if (counter_of(counter, side) != base + step)
            fail("dropout_forward_dev n=%zu %s: advance 0 moved the %s counter", n, name,
                 side ? "tested" : "cpu");
    free(a);
    free(b);
    release_all();
}

void test_dropout_dev(void)
{
    static const size_t sizes[] = { 1, 1000, 100003 };
    for (int x = 0; x < 3; x++)
        for (size_t si = 0; si < 3; si++)
            dropout_dev_case(&mixes[x], sizes[si], (uint64_t)(5 + si) << 32, si * 4099ull);
}

/* ---- softmax cross-entropy --------------------------------------------------------------------- */

static pair labels_for(int rows, int classes)
{
    pair l = pnew((size_t)rows * 4);
    int32_t *v = l.c;
    for (int i = 0; i < rows; i++)
        v[i] = (int32_t)rng_uniform(0, classes) % classes;
    /* every fifth row ignored from ABI 1.1 on */
    for (int i = 4; P.dut_minor >= 1 && i < rows; i += 5)
        v[i] = FG_IGNORED_LABEL;
    pmirror(l);
    return l;
}

void test_xent(void)
{
    static const int shapes[][2] = { { 1, 1 }, { 7, 10 }, { 128, 10 }, { 33, 1000 }, { 1024, 10 } };
    for (int x = 0; x < 3; x++) {
        const mix *dt = &mixes[x];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int rows = shapes[s][0], classes = shapes[s][1];
            size_t n = (size_t)rows * classes;
            pair logits = prandom(n, dt->act, -6, 6), labels = labels_for(rows, classes);
            pair probs = pnew(n * 4), sums = pnew(8);
            float start[2] = { 1.5f, 3.0f };
            pput(sums, start);
            ppoison(probs);
            const char *what = W("softmax_xent_forward %d x %d %s", rows, classes, mix_name(dt));
            BOTH(what, V->softmax_xent_forward(S, Q, dt->act, X(logits), X(labels), rows, classes,
                                               X(probs), X(sums), (float *)X(sums) + 1, E));
            compare(what, probs, n, FG_F32, 1e-5);
            compare(W("softmax_xent_forward %d x %d %s (loss, hits)", rows, classes,
                      mix_name(dt)), sums, 2, FG_F32, 1e-5);
            pmirror(probs);
            pair dl = pnew(n * dtype_size(dt->act));
            ppoison(dl);
            what = W("softmax_xent_backward %d x %d %s", rows, classes, mix_name(dt));
            BOTH(what, V->softmax_xent_backward(S, Q, dt->act, X(probs), X(labels), rows, classes,
                                                1.0f / (float)rows, X(dl), E));
            compare(what, dl, n, dt->act, tol_of(dt->act));
            release_all();
        }
    }
    /* fp32 entries; probs in place of the logits, no accumulators */
    pair logits = prandom(640, FG_F32, -3, 3), labels = labels_for(64, 10);
    pair probs = pnew(640 * 4);
    memcpy(probs.c, logits.c, 640 * 4);
    pmirror(probs);
    BOTH("softmax_xent_forward in place", V->softmax_xent_forward(S, Q, FG_F32, X(probs), X(labels),
                                                                  64, 10, X(probs), NULL, NULL, E));
    compare("softmax_xent_forward in place", probs, 640, FG_F32, 1e-5);
    /* a label outside [0, classes): reported by the op, or (a device backend) at the next
     * queue_sync */
    ((int32_t *)labels.c)[2] = 10;
    pmirror(labels);
    pair sums = pnew(8);
    fg_error e = {0};
    fg_status st = P.dut->softmax_xent_forward(P.ds, P.dq, FG_F32, logits.g, labels.g, 64, 10,
                                               probs.g, sums.g, NULL, &e);
    if (st == FG_OK)
        st = P.dut->queue_sync(P.ds, P.dq, &e);
    checks++;
    if (st != FG_INVALID_ARGUMENT || !strstr(e.message, "row 2 has label 10"))
        fail("a bad label: queue_sync answered %s: %s", fg_status_name(st), e.message);
    checks++;
    if ((st = P.dut->queue_sync(P.ds, P.dq, &e)) != FG_OK)
        fail("queue_sync after a reported bad label: %s", e.message);
    release_all();
}

/* Each side's a and b hold the same bytes (the fused classifier against the two-op path). */
static void same_bits_each_side(const char *what, pair a, pair b, size_t bytes)
{
    unsigned char *ga = malloc(bytes), *gb = malloc(bytes);
    download(a, ga);
    download(b, gb);
    checks++;
    if (memcmp(a.c, b.c, bytes) != 0)
        fail("%s: cpu: the fused and the two-op results differ", what);
    checks++;
    if (memcmp(ga, gb, bytes) != 0)
        fail("%s: %s: the fused and the two-op results differ", what, P.dut_name);
    free(ga);
    free(gb);
}

/* The fused classifier (ABI 1.4): loss, hits and dlogits against the CPU backend, with
 * padded rows (ld > classes: zeros there), in place, without a gradient, and bitwise the
 * bits softmax_xent_forward then softmax_xent_backward give on each backend. */
void test_classifier(void)
{
    static const int shapes[][3] = { { 1, 1, 1 },     { 7, 10, 10 },     { 33, 1000, 1000 },
                                     { 9, 10, 16 },   { 65, 1000, 1024 }, { 1024, 10, 10 } };
    for (int x = 0; x < 3; x++) {
        const mix *dt = &mixes[x];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int rows = shapes[s][0], classes = shapes[s][1], ld = shapes[s][2];
            size_t n = (size_t)rows * (size_t)ld, es = dtype_size(dt->act);
            float scale = 1.0f / (float)rows, start[2] = { 1.5f, 3.0f };
            pair logits = prandom(n, dt->act, -6, 6), labels = labels_for(rows, classes);
            pair sums = pnew(8), dl = pnew(n * es);
            pput(sums, start);
            ppoison(dl);
            const char *what = W("classifier %d x %d (ld %d) %s", rows, classes, ld,
                                 mix_name(dt));
            BOTH(what, V->classifier(S, Q, dt->act, X(logits), ld, X(labels), rows, classes,
                                     X(sums), (float *)X(sums) + 1, scale, X(dl), E));
            compare(what, dl, n, dt->act, tol_of(dt->act));
            compare(W("classifier %d x %d (ld %d) %s (loss, hits)", rows, classes, ld,
                      mix_name(dt)), sums, 2, FG_F32, 1e-5);
            pair eval = pnew(8);
            pput(eval, start);
            BOTH("classifier without a gradient",
                 V->classifier(S, Q, dt->act, X(logits), ld, X(labels), rows, classes, X(eval),
                               (float *)X(eval) + 1, scale, NULL, E));
            same_bits_each_side("classifier without a gradient (loss, hits)", eval, sums, 8);
            if (ld == classes) {
                pair probs = pnew(n * 4), two = pnew(8), dl2 = pnew(n * es);
                pput(two, start);
                BOTH("softmax_xent_forward (against the classifier)",
                     V->softmax_xent_forward(S, Q, dt->act, X(logits), X(labels), rows, classes,
                                             X(probs), X(two), (float *)X(two) + 1, E));
                BOTH("softmax_xent_backward (against the classifier)",
                     V->softmax_xent_backward(S, Q, dt->act, X(probs), X(labels), rows, classes,
                                              scale, X(dl2), E));
                same_bits_each_side(W("classifier %d x %d %s = xent forward + backward",
                                      rows, classes, mix_name(dt)), dl, dl2, n * es);
                same_bits_each_side("classifier = xent forward (loss, hits)", sums, two, 8);
            }
            release_all();
        }
    }
    /* in place: dlogits over the logits, bf16 and f32 */
    static const uint32_t inplace[] = { FG_F32, FG_BF16 };
    for (int k = 0; k < 2; k++) {
        size_t es = dtype_size(inplace[k]);
        pair logits = prandom(64 * 12, inplace[k], -3, 3), labels = labels_for(64, 10);
        pair copy = pnew(64 * 12 * es);
        memcpy(copy.c, logits.c, 64 * 12 * es);
        pmirror(copy);
        BOTH("classifier in place",
             V->classifier(S, Q, inplace[k], X(copy), 12, X(labels), 64, 10, NULL, NULL, 0.5f,
                           X(copy), E));
        compare("classifier in place", copy, 64 * 12, inplace[k], tol_of(inplace[k]));
        release_all();
    }
}

/* mse and bce_with_logits: loss and metric sums, then the gradient (also in place of x). */
void test_pointwise_loss(void)
{
    static const size_t sizes[] = { 1, 7, 1000, 70001 };
    static const int kinds[] = { FG_LOSS_MSE, FG_LOSS_BCE_LOGITS };
    for (int x = 0; x < 3; x++) {
        const mix *dt = &mixes[x];
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            for (int k = 0; k < 2; k++) {
                size_t n = sizes[s];
                const char *name = kinds[k] == FG_LOSS_MSE ? "mse" : "bce";
                pair xs = prandom(n, dt->act, -6, 6);
                pair t = kinds[k] == FG_LOSS_MSE ? prandom(n, FG_F32, -3, 3) : prandom(n, FG_F32, 0, 1);
                pair sums = pnew(8), dx = pnew(n * dtype_size(dt->act));
                float start[2] = { 1.5f, 3.0f };
                pput(sums, start);
                ppoison(dx);
                const char *what = W("pointwise_loss %s %zu %s (sums)", name, n, mix_name(dt));
                BOTH(what, V->pointwise_loss(S, Q, dt->act, kinds[k], X(xs), X(t), n, 0.5f, X(sums),
                                             (float *)X(sums) + 1, 0.0f, NULL, E));
                compare(what, sums, 2, FG_F32, 1e-5);
                what = W("pointwise_loss %s %zu %s (dx)", name, n, mix_name(dt));
                BOTH(what, V->pointwise_loss(S, Q, dt->act, kinds[k], X(xs), X(t), n, 1.0f, NULL, NULL,
                                             0.25f, X(dx), E));
                compare(what, dx, n, dt->act, tol_of(dt->act));
                what = W("pointwise_loss %s %zu %s (dx in place)", name, n, mix_name(dt));
                BOTH(what, V->pointwise_loss(S, Q, dt->act, kinds[k], X(xs), X(t), n, 1.0f, NULL, NULL,
                                             0.25f, X(xs), E));
                compare(what, xs, n, dt->act, tol_of(dt->act));
                release_all();
            }
        }
    }
}
