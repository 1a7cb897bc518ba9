/* Parity group "nhwc": the channels-last (FG_LAYOUT_NHWC, ABI 1.9) conv2d, pooling and batch
 * norm of the backend under test against the CPU backend's NCHW ops on the same values:
 * the inputs transposed on the host for the tested side, the CPU's outputs transposed
 * before the comparison. Batch norm over NHWC is the existing op over (n*h*w, c, 1). The
 * parameters and their gradients keep their layout (KCRS). Also: the CPU backend refuses an
 * NHWC descriptor (FG_UNAVAILABLE), a layout outside the enum is refused by the checks, and
 * an NHWC backward gives the same bits twice. transpose_batched (ABI 1.10, the core's
 * NCHW <-> NHWC of activations) against the host's transpose, bitwise, and back; the CPU
 * backend refuses it (FG_UNAVAILABLE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

typedef struct mix {
    uint32_t act, param, grad;
} mix;

/* fp32; bf16-mixed; fp16-mixed; bf16 activations over f32 parameters */
static const mix mixes[] = {
    { FG_F32, FG_F32, FG_F32 },
    { FG_BF16, FG_BF16, FG_F32 },
    { FG_F16, FG_F16, FG_F32 },
    { FG_BF16, FG_F32, FG_F32 },
};

static double tol_mix(const mix *dt)
{
    double t = tol_of(dt->act);
    return tol_of(dt->param) > t ? tol_of(dt->param) : t;
}

static fg_conv2d_desc window(int n, int c, int h, int w, int k, int r, int s, int ph, int pw,
                             int sh, int sw)
{
    fg_conv2d_desc d = { sizeof d, n, c, h, w, k, r, s, ph, pw, sh, sw, 0, 0, FG_LAYOUT_NCHW };
    d.out_h = (h + 2 * ph - r) / sh + 1;
    d.out_w = (w + 2 * pw - s) / sw + 1;
    return d;
}

static fg_conv2d_desc as_nhwc(fg_conv2d_desc d)
{
    d.layout = FG_LAYOUT_NHWC;
    return d;
}

/* dst = src (outer, c, inner) as (outer, inner, c), es bytes an element. */
static void to_last(void *dst, const void *src, size_t outer, size_t c, size_t inner, size_t es)
{
    for (size_t b = 0; b < outer; b++)
        for (size_t ch = 0; ch < c; ch++)
            for (size_t i = 0; i < inner; i++)
                memcpy((char *)dst + ((b * inner + i) * c + ch) * es,
                       (const char *)src + ((b * c + ch) * inner + i) * es, es);
}

/* A pair whose tested side holds src's CPU values in NHWC order. */
static pair nhwc_input(pair src, size_t n, size_t c, size_t hw, size_t es)
{
    pair t = pnew(src.bytes);
    to_last(t.c, src.c, n, c, hw, es);
    pmirror(t);
    return t;
}

/* ---- conv2d --------------------------------------------------------------------------------- */

static void conv_case(const mix *dt, const fg_conv2d_desc *d, int with_bias)
{
    fg_conv2d_desc dn = as_nhwc(*d);
    size_t ea = dtype_size(dt->act), hw = (size_t)d->h * d->w, ohw = (size_t)d->out_h * d->out_w;
    size_t xn = (size_t)d->n * d->c * hw, wn = (size_t)d->k * d->c * d->r * d->s;
    size_t yn = (size_t)d->n * d->k * ohw;
    size_t wc = P.ref->conv2d_workspace(P.rs, d), wg = P.dut->conv2d_workspace(P.ds, &dn);
    checks++;
    if (!wg)
        fail("conv2d_workspace of a valid NHWC window is 0");
    pair ws = pnew(wc > wg ? wc : wg);
    pair in = prandom(xn, dt->act, -1, 1), w = prandom(wn, dt->param, -0.5, 0.5);
    pair b = prandom((size_t)d->k, dt->param, -1, 1);
    pair in_t = nhwc_input(in, (size_t)d->n, (size_t)d->c, hw, ea);
    pair y_ref = pnew(yn * ea), y = pnew(yn * ea);
    ppoison(y);
    fg_error ec = { 0 }, eg = { 0 };
    const char *what = W("nhwc conv2d_forward %dx%dx%dx%d k%d %dx%d pad %d,%d stride %d,%d "
                         "bias=%d %s/%s", d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->pad_h,
                         d->pad_w, d->stride_h, d->stride_w, with_bias,
                         fg_dtype_name((fg_dtype)dt->act), fg_dtype_name((fg_dtype)dt->param));
    fg_status sc = P.ref->conv2d_forward(P.rs, P.rq, dt->act, dt->param, d, in.c, w.c,
                                         with_bias ? b.c : NULL, y_ref.c, ws.c, &ec);
    fg_status sg = P.dut->conv2d_forward(P.ds, P.dq, dt->act, dt->param, &dn, in_t.g, w.g,
                                         with_bias ? b.g : NULL, y.g, ws.g, &eg);
    if (both_ok(what, sc, &ec, sg, &eg)) {
        to_last(y.c, y_ref.c, (size_t)d->n, (size_t)d->k, ohw, ea);
        compare(what, y, yn, dt->act, tol_mix(dt));
    }
    for (int acc = 0; acc < 2; acc++) {
        pair dy = prandom(yn, dt->act, -1, 1);
        pair dy_t = nhwc_input(dy, (size_t)d->n, (size_t)d->k, ohw, ea);
        pair dx_ref = pnew(xn * ea), dx = pnew(xn * ea);
        pair dw = prandom(wn, dt->grad, -1, 1), db = prandom((size_t)d->k, dt->grad, -1, 1);
        ppoison(dx);
        if (!acc) {
            ppoison(dw);
            ppoison(db);
        }
        what = W("nhwc conv2d_backward %dx%dx%dx%d k%d %dx%d stride %d,%d acc=%d %s/%s/%s", d->n,
                 d->c, d->h, d->w, d->k, d->r, d->s, d->stride_h, d->stride_w, acc,
                 fg_dtype_name((fg_dtype)dt->act), fg_dtype_name((fg_dtype)dt->param),
                 fg_dtype_name((fg_dtype)dt->grad));
        sc = P.ref->conv2d_backward(P.rs, P.rq, dt->act, dt->param, dt->grad, d, in.c, w.c,
                                    dy.c, dx_ref.c, dw.c, db.c, acc, ws.c, &ec);
        sg = P.dut->conv2d_backward(P.ds, P.dq, dt->act, dt->param, dt->grad, &dn, in_t.g, w.g,
                                    dy_t.g, dx.g, dw.g, db.g, acc, ws.g, &eg);
        if (!both_ok(what, sc, &ec, sg, &eg))
            continue;
        char name[300];
        to_last(dx.c, dx_ref.c, (size_t)d->n, (size_t)d->c, hw, ea);
        snprintf(name, sizeof name, "%s (dx)", what);
        compare(name, dx, xn, dt->act, tol_mix(dt));
        snprintf(name, sizeof name, "%s (dw)", what);
        compare(name, dw, wn, dt->grad, tol_mix(dt));
        snprintf(name, sizeof name, "%s (dbias)", what);
        compare(name, db, (size_t)d->k, dt->grad, tol_mix(dt));
    }
    release_all();
}

/* The tested backend's NHWC bf16 dw twice from the same inputs: the same bits (the
 * algorithms it picks by default are deterministic). */
static void conv_same_bits(const fg_conv2d_desc *d)
{
    fg_conv2d_desc dn = as_nhwc(*d);
    size_t xn = (size_t)d->n * d->c * d->h * d->w, wn = (size_t)d->k * d->c * d->r * d->s;
    size_t yn = (size_t)d->n * d->k * d->out_h * d->out_w;
    pair ws = pnew(P.dut->conv2d_workspace(P.ds, &dn));
    pair in = prandom(xn, FG_BF16, -1, 1), w = prandom(wn, FG_BF16, -1, 1);
    pair dy = prandom(yn, FG_BF16, -1, 1), dw1 = pnew(wn * 4), dw2 = pnew(wn * 4);
    fg_error e = { 0 };
    fg_status s1 = P.dut->conv2d_backward(P.ds, P.dq, FG_BF16, FG_BF16, FG_F32, &dn, in.g, w.g,
                                          dy.g, NULL, dw1.g, NULL, 0, ws.g, &e);
    fg_status s2 = P.dut->conv2d_backward(P.ds, P.dq, FG_BF16, FG_BF16, FG_F32, &dn, in.g, w.g,
                                          dy.g, NULL, dw2.g, NULL, 0, ws.g, &e);
    checks++;
    if (s1 != FG_OK || s2 != FG_OK) {
        fail("nhwc conv2d_backward twice: %s", e.message);
        release_all();
        return;
    }
    download(dw1, dw2.c); /* dw2's CPU side now holds the first run's bits */
    compare_exact("nhwc conv2d_backward bf16 twice gives the same bits", dw2, wn * 4);
    release_all();
}

/* ---- pooling -------------------------------------------------------------------------------- */

static void pool_case(const mix *dt, const fg_conv2d_desc *d, int mode)
{
    fg_conv2d_desc dn = as_nhwc(*d);
    size_t ea = dtype_size(dt->act), hw = (size_t)d->h * d->w, ohw = (size_t)d->out_h * d->out_w;
    size_t xn = (size_t)d->n * d->c * hw, yn = (size_t)d->n * d->c * ohw;
    int is_max = mode == FG_POOL_MAX;
    pair in = prandom(xn, dt->act, -1, 1);
    pair in_t = nhwc_input(in, (size_t)d->n, (size_t)d->c, hw, ea);
    pair y_ref = pnew(yn * ea), y = pnew(yn * ea), am_ref = pnew(yn * 4), am = pnew(yn * 4);
    ppoison(y);
    ppoison(am);
    fg_error ec = { 0 }, eg = { 0 };
    const char *what = W("nhwc pool2d_forward %dx%dx%dx%d %dx%d pad %d,%d stride %d,%d mode %d "
                         "%s", d->n, d->c, d->h, d->w, d->r, d->s, d->pad_h, d->pad_w,
                         d->stride_h, d->stride_w, mode, fg_dtype_name((fg_dtype)dt->act));
    fg_status sc = P.ref->pool2d_forward(P.rs, P.rq, dt->act, mode, d, in.c, y_ref.c,
                                         is_max ? (int32_t *)am_ref.c : NULL, &ec);
    fg_status sg = P.dut->pool2d_forward(P.ds, P.dq, dt->act, mode, &dn, in_t.g, y.g,
                                         is_max ? (int32_t *)am.g : NULL, &eg);
    if (!both_ok(what, sc, &ec, sg, &eg)) {
        release_all();
        return;
    }
    to_last(y.c, y_ref.c, (size_t)d->n, (size_t)d->c, ohw, ea);
    compare(what, y, yn, dt->act, 0);
    if (is_max) {
        to_last(am.c, am_ref.c, (size_t)d->n, (size_t)d->c, ohw, 4);
        char name[300];
        snprintf(name, sizeof name, "%s (argmax)", what);
        compare_exact(name, am, yn * 4);
    }
    pair dy = prandom(yn, dt->act, -1, 1);
    pair dy_t = nhwc_input(dy, (size_t)d->n, (size_t)d->c, ohw, ea);
    pair dx_ref = pnew(xn * ea), dx = pnew(xn * ea);
    ppoison(dx);
    what = W("nhwc pool2d_backward %dx%dx%dx%d %dx%d stride %d,%d mode %d %s", d->n, d->c, d->h,
             d->w, d->r, d->s, d->stride_h, d->stride_w, mode, fg_dtype_name((fg_dtype)dt->act));
    sc = P.ref->pool2d_backward(P.rs, P.rq, dt->act, mode, d, dy.c,
                                is_max ? (const int32_t *)am_ref.c : NULL, dx_ref.c, &ec);
    sg = P.dut->pool2d_backward(P.ds, P.dq, dt->act, mode, &dn, dy_t.g,
                                is_max ? (const int32_t *)am.g : NULL, dx.g, &eg);
    if (both_ok(what, sc, &ec, sg, &eg)) {
        to_last(dx.c, dx_ref.c, (size_t)d->n, (size_t)d->c, hw, ea);
        compare(what, dx, xn, dt->act, 0);
    }
    release_all();
}

/* ---- batch norm over (n*h*w, c, 1) ------------------------------------------------------------ */

static void batchnorm_case(const mix *dt, int n, int c, int sp)
{
    size_t ea = dtype_size(dt->act), xn = (size_t)n * c * sp, cc = (size_t)c;
    pair in = prandom(xn, dt->act, -2, 3);
    pair in_t = nhwc_input(in, (size_t)n, cc, (size_t)sp, ea);
    pair gamma = prandom(cc, dt->param, 0.5, 1.5), beta = prandom(cc, dt->param, -0.5, 0.5);
    pair rm = prandom(cc, FG_F32, -0.5, 0.5), rv = prandom(cc, FG_F32, 0.5, 2);
    pair sm = pnew(cc * 4), si = pnew(cc * 4), y_ref = pnew(xn * ea), y = pnew(xn * ea);
    ppoison(y);
    ppoison(sm);
    ppoison(si);
    fg_error ec = { 0 }, eg = { 0 };
    const char *what = W("nhwc batchnorm_forward %d x %d x %d as (%d, %d, 1) %s", n, c, sp,
                         n * sp, c, fg_dtype_name((fg_dtype)dt->act));
    fg_status sc = P.ref->batchnorm_forward(P.rs, P.rq, dt->act, dt->param, 1, n, c, sp, in.c,
                                            gamma.c, beta.c, rm.c, rv.c, 0.1f, 1e-5f, sm.c,
                                            si.c, y_ref.c, &ec);
    fg_status sg = P.dut->batchnorm_forward(P.ds, P.dq, dt->act, dt->param, 1, n * sp, c, 1,
                                            in_t.g, gamma.g, beta.g, rm.g, rv.g, 0.1f, 1e-5f,
                                            sm.g, si.g, y.g, &eg);
    if (!both_ok(what, sc, &ec, sg, &eg)) {
        release_all();
        return;
    }
    char name[300];
    to_last(y.c, y_ref.c, (size_t)n, cc, (size_t)sp, ea);
    compare(what, y, xn, dt->act, tol_mix(dt));
    snprintf(name, sizeof name, "%s (saved mean)", what);
    compare(name, sm, cc, FG_F32, tol_mix(dt));
    snprintf(name, sizeof name, "%s (saved invstd)", what);
    compare(name, si, cc, FG_F32, tol_mix(dt));
    snprintf(name, sizeof name, "%s (running var)", what);
    compare(name, rv, cc, FG_F32, 1e-5);
    pmirror(sm);
    pmirror(si);
    pair dy = prandom(xn, dt->act, -1, 1);
    pair dy_t = nhwc_input(dy, (size_t)n, cc, (size_t)sp, ea);
    pair dx_ref = pnew(xn * ea), dx = pnew(xn * ea), dg = pnew(cc * dtype_size(dt->grad));
    pair db = pnew(cc * dtype_size(dt->grad));
    ppoison(dx);
    ppoison(dg);
    ppoison(db);
    what = W("nhwc batchnorm_backward %d x %d x %d %s", n, c, sp, fg_dtype_name((fg_dtype)dt->act));
    sc = P.ref->batchnorm_backward(P.rs, P.rq, dt->act, dt->param, dt->grad, n, c, sp, in.c,
                                   gamma.c, (const float *)sm.c, (const float *)si.c, dy.c,
                                   dx_ref.c, dg.c, db.c, 0, &ec);
    sg = P.dut->batchnorm_backward(P.ds, P.dq, dt->act, dt->param, dt->grad, n * sp, c, 1,
                                   in_t.g, gamma.g, (const float *)sm.g, (const float *)si.g,
                                   dy_t.g, dx.g, dg.g, db.g, 0, &eg);
    if (both_ok(what, sc, &ec, sg, &eg)) {
        to_last(dx.c, dx_ref.c, (size_t)n, cc, (size_t)sp, ea);
        compare(what, dx, xn, dt->act, tol_mix(dt));
        snprintf(name, sizeof name, "%s (dgamma)", what);
        compare(name, dg, cc, dt->grad, tol_mix(dt));
        snprintf(name, sizeof name, "%s (dbeta)", what);
        compare(name, db, cc, dt->grad, tol_mix(dt));
    }
    release_all();
}

/* ---- transpose_batched ------------------------------------------------------------------- */

/* x (batch, rows, cols) -> y (batch, cols, rows), then back into z: y against the host's
 * transpose and z against x, bit for bit (the op moves bits, it computes nothing). */
static void transpose_case(uint32_t dt, int batch, int rows, int cols)
{
    size_t n = (size_t)batch * rows * cols, es = dtype_size(dt);
    pair x = prandom(n, dt, -3, 3), y = pnew(n * es), z = pnew(n * es);
    to_last(y.c, x.c, (size_t)batch, (size_t)rows, (size_t)cols, es);
    memcpy(z.c, x.c, n * es);
    ppoison(y);
    ppoison(z);
    fg_error e = { 0 };
    char what[96];
    snprintf(what, sizeof what, "transpose_batched %s (%d, %d, %d)", fg_dtype_name((fg_dtype)dt),
             batch, rows, cols);
    fg_status st = P.dut->transpose_batched(P.ds, P.dq, dt, batch, rows, cols, x.g, y.g, &e);
    if (st == FG_OK)
        st = P.dut->transpose_batched(P.ds, P.dq, dt, batch, cols, rows, y.g, z.g, &e);
    if (st == FG_OK)
        st = P.dut->queue_sync(P.ds, P.dq, &e);
    checks++;
    if (st != FG_OK) {
        fail("%s: %s", what, e.message);
    } else {
        compare_exact(what, y, n * es);
        snprintf(what + strlen(what), sizeof what - strlen(what), " and back");
        compare_exact(what, z, n * es);
    }
    release_all();
}

static void transposes(void)
{
    static const uint32_t dts[] = { FG_F32, FG_BF16, FG_F16 };
    static const int shapes[][3] = { { 2, 3, 35 }, { 3, 35, 3 }, { 1, 1, 7 }, { 4, 64, 25 },
                                     { 5, 13, 1 } };
    for (size_t d = 0; d < 3; d++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            transpose_case(dts[d], shapes[i][0], shapes[i][1], shapes[i][2]);
}

/* ---- refusals ------------------------------------------------------------------------------ */

static void expect_refusal(const char *what, fg_status st, const fg_error *e, fg_status want,
                           const char *needle)
{
    checks++;
    if (st != want || !strstr(e->message, needle))
        fail("%s: status %d (want %d), message '%s' (want it to name '%s')", what, (int)st,
             (int)want, e->message, needle);
}

static void refusals(void)
{
    fg_conv2d_desc d = window(2, 3, 7, 9, 4, 3, 3, 1, 1, 1, 1), dn = as_nhwc(d);
    size_t xn = 2 * 3 * 7 * 9, wn = 4 * 3 * 3 * 3, yn = 2 * 4 * 7 * 9;
    pair ws = pnew(P.ref->conv2d_workspace(P.rs, &d) + P.dut->conv2d_workspace(P.ds, &d));
    pair in = prandom(xn, FG_F32, -1, 1), w = prandom(wn, FG_F32, -1, 1), y = pnew(yn * 4);
    fg_error e = { 0 };
    fg_status st = P.ref->conv2d_forward(P.rs, P.rq, FG_F32, FG_F32, &dn, in.c, w.c, NULL, y.c,
                                         ws.c, &e);
    expect_refusal("the CPU backend's conv2d_forward on an NHWC descriptor", st, &e,
                   FG_UNAVAILABLE, "NHWC");
    memset(&e, 0, sizeof e);
    fg_conv2d_desc pd = window(2, 3, 7, 9, 0, 2, 2, 0, 0, 2, 2), pdn = as_nhwc(pd);
    st = P.ref->pool2d_forward(P.rs, P.rq, FG_F32, FG_POOL_AVG, &pdn, in.c, y.c, NULL, &e);
    expect_refusal("the CPU backend's pool2d_forward on an NHWC descriptor", st, &e,
                   FG_UNAVAILABLE, "NHWC");
    fg_conv2d_desc bad = d;
    bad.layout = 7;
    memset(&e, 0, sizeof e);
    st = P.dut->conv2d_forward(P.ds, P.dq, FG_F32, FG_F32, &bad, in.g, w.g, NULL, y.g, ws.g, &e);
    expect_refusal("conv2d_forward with layout 7", st, &e, FG_INVALID_ARGUMENT, "layout = 7");
    memset(&e, 0, sizeof e);
    st = P.ref->transpose_batched(P.rs, P.rq, FG_F32, 2, 3, 63, in.c, y.c, &e);
    expect_refusal("the CPU backend's transpose_batched", st, &e, FG_UNAVAILABLE,
                   "memory_format = channels_last");
    checks++;
    if (P.ref->supports(P.rs, FG_OP_TRANSPOSE_BATCHED, (const uint32_t[]){ FG_F32 }))
        fail("the CPU backend's supports() says yes to transpose_batched");
    release_all();
}

void test_nhwc(void)
{
    refusals();
    if (strcmp(P.dut_name, "cpu") == 0)
        return; /* the CPU backend has no NHWC kernels: its refusal is the test */
    transposes();
    const fg_conv2d_desc convs[] = {
        window(2, 3, 7, 9, 4, 3, 3, 1, 1, 1, 1),   /* c = 3, k = 4: not multiples of 8 */
        window(3, 5, 11, 13, 6, 5, 3, 2, 1, 2, 1), /* odd sizes, stride 2 by 1 */
        window(2, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1),  /* multiples of 8: tensor-core shapes */
        window(2, 16, 7, 5, 24, 1, 1, 0, 0, 2, 2), /* 1x1, stride 2 */
        window(1, 12, 6, 6, 8, 4, 4, 0, 0, 1, 1),  /* c = 12 */
    };
    for (size_t x = 0; x < sizeof mixes / sizeof mixes[0]; x++)
        for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
            conv_case(&mixes[x], &convs[i], i % 2 == 0);
    conv_same_bits(&convs[2]);
    const fg_conv2d_desc pools[] = {
        window(2, 3, 8, 8, 0, 2, 2, 0, 0, 2, 2),
        window(2, 5, 7, 9, 0, 3, 3, 1, 1, 2, 2),
        window(3, 8, 13, 11, 0, 3, 2, 0, 1, 3, 2),
    };
    for (size_t x = 0; x < 3; x++)
        for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
            for (int mode = FG_POOL_MAX; mode <= FG_POOL_AVG; mode++)
                pool_case(&mixes[x], &pools[i], mode);
    static const int bn[][3] = { { 2, 3, 5 }, { 4, 16, 9 }, { 3, 7, 13 } };
    for (size_t x = 0; x < 3; x++)
        for (size_t i = 0; i < sizeof bn / sizeof bn[0]; i++)
            batchnorm_case(&mixes[x], bn[i][0], bn[i][1], bn[i][2]);
}
