/* The CPU backend's ops in every dtype: with half operands each equals the op in f32 run on
 * the half values, rounded once (to nearest even) into the output's storage; gemm also
 * against a double reference; the capability query says so for every op and mix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "precision_tests.h"

static test_backend tb;
#define Q tb.state, tb.queue

/* Host buffers: half storage of n values, and its f32 image. */
static uint16_t *to_half(const float *x, size_t n, uint32_t t)
{
    uint16_t *h = test_alloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++)
        h[i] = t == FG_F16 ? fg_f32_to_f16(x[i]) : fg_f32_to_bf16(x[i]);
    return h;
}

static float *from_half(const uint16_t *h, size_t n, uint32_t t)
{
    float *x = test_alloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++)
        x[i] = t == FG_F16 ? fg_f16_to_f32(h[i]) : fg_bf16_to_f32(h[i]);
    return x;
}

/* f32 values rounded into t and back: what the half op sees and what it must produce. */
static void round_to(float *x, size_t n, uint32_t t)
{
    for (size_t i = 0; i < n; i++)
        x[i] = t == FG_F16 ? fg_f16_to_f32(fg_f32_to_f16(x[i]))
                           : fg_bf16_to_f32(fg_f32_to_bf16(x[i]));
}

static float *random_f32(size_t n, double lo, double hi)
{
    float *x = test_alloc(n * 4 + 4);
    test_fill_uniform(x, n, lo, hi);
    return x;
}

static int same_bits(const char *what, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0) {
            CHECK(0, "%s: element %zu is %.9g, want %.9g", what, i, a[i], b[i]);
            return 0;
        }
    return 1;
}

/* The capability query: every op in f32, f16 and bf16, in any mix; nothing else. */
static void supports_every_float_mix(void)
{
    static const uint32_t floats[] = {FG_F32, FG_F16, FG_BF16};
    CHECK(tb.vt->supports != NULL, "the CPU backend answers the capability query");
    if (!tb.vt->supports)
        return;
    for (uint32_t op = 0; op < FG_OP_COUNT; op++) {
        const fg_backend_op_desc *d = fg_backend_op_info(op);
        if (op == FG_OP_GEMM_FP8) { /* ABI 1.9: fp8 is the CUDA backend's alone */
            CHECK(!tb.vt->supports(tb.state, op, (const uint32_t[]){FG_BF16, FG_BF16, FG_BF16}),
                  "gemm_fp8 is refused");
            continue;
        }
        if (op == FG_OP_TRANSPOSE_BATCHED) { /* ABI 1.10: the CPU runs no NHWC op */
            CHECK(!tb.vt->supports(tb.state, op, (const uint32_t[]){FG_F32, FG_F32, FG_F32}),
                  "transpose_batched is refused");
            continue;
        }
        CHECK(d && fg_backend_can(tb.vt, tb.state, op, (const uint32_t[]){FG_F32, FG_F32, FG_F32}),
              "op %u (%s) in f32", (unsigned)op, d ? d->name : "?");
        for (int mix = 0; mix < 27; mix++) {
            uint32_t dt[3] = {floats[mix % 3], floats[mix / 3 % 3], floats[mix / 9]};
            CHECK(tb.vt->supports(tb.state, op, dt), "%s(%s, %s, %s)", d->name,
                  fg_dtype_name((fg_dtype)dt[0]), fg_dtype_name((fg_dtype)dt[1]),
                  fg_dtype_name((fg_dtype)dt[2]));
        }
        uint32_t bad[3] = {FG_F32, FG_F32, FG_F32};
        bad[d->dtype_count - 1] = FG_F64;
        CHECK(!tb.vt->supports(tb.state, op, bad), "%s with an f64 operand", d->name);
    }
    CHECK(!tb.vt->supports(tb.state, FG_OP_COUNT, (const uint32_t[]){FG_F32, FG_F32, FG_F32}),
          "an unknown op id");
}

/* fill, scale, clamp, axpy and sum_squares over half storage: the f32 op on the half values,
 * rounded once; clamp keeps NaN. */
static void flat_half(void)
{
    size_t n = 1000;
    float *x = random_f32(n, -3, 3), *y = random_f32(n, -3, 3), out1 = 0, out2 = 0;
    x[7] = NAN;
    round_to(x, n, FG_BF16), round_to(y, n, FG_F16);
    uint16_t *xh = to_half(x, n, FG_BF16), *yh = to_half(y, n, FG_F16);
    CHECK_OK(tb.vt->clamp(Q, FG_F32, x, -1.0f, 2.0f, n, &test_err));
    CHECK_OK(tb.vt->clamp(Q, FG_BF16, xh, -1.0f, 2.0f, n, &test_err));
    float *got = from_half(xh, n, FG_BF16);
    same_bits("clamp bf16", got, x, n);
    CHECK(isnan(got[7]), "clamp bf16 keeps NaN: %g", got[7]);
    free(got);
    x[7] = 0.5f;
    xh[7] = fg_f32_to_bf16(0.5f);
    CHECK_OK(tb.vt->axpy(Q, FG_F32, FG_F32, 0.75f, x, y, n, &test_err));
    CHECK_OK(tb.vt->axpy(Q, FG_BF16, FG_F16, 0.75f, xh, yh, n, &test_err));
    round_to(y, n, FG_F16);
    got = from_half(yh, n, FG_F16);
    same_bits("axpy bf16 into f16", got, y, n);
    free(got);
    CHECK_OK(tb.vt->scale(Q, FG_F32, y, -0.3f, n, &test_err));
    CHECK_OK(tb.vt->scale(Q, FG_F16, yh, -0.3f, n, &test_err));
    round_to(y, n, FG_F16);
    got = from_half(yh, n, FG_F16);
    same_bits("scale f16", got, y, n);
    free(got);
    CHECK_OK(tb.vt->sum_squares(Q, FG_F32, y, n, &out1, &test_err));
    CHECK_OK(tb.vt->sum_squares(Q, FG_F16, yh, n, &out2, &test_err));
    same_bits("sum_squares f16 (f32 result)", &out2, &out1, 1);
    CHECK_OK(tb.vt->fill(Q, FG_BF16, xh, 1.0f / 3.0f, n, &test_err));
    got = from_half(xh, n, FG_BF16);
    for (size_t i = 0; i < n; i++)
        CHECK(got[i] == fg_bf16_to_f32(fg_f32_to_bf16(1.0f / 3.0f)), "fill bf16 element %zu", i);
    free(got), free(x), free(y), free(xh), free(yh);
}

/* The fused updates with bf16 parameters and f16 gradients: each element updated in f32
 * from the widened parameter, rounded once; the f32 state as the f32 op leaves it. */
static void optim_half(void)
{
    size_t n = 500;
    float *p = random_f32(n, -1, 1), *g = random_f32(n, -1, 1), *m1 = random_f32(n, -1, 1);
    float *v1 = random_f32(n, 0, 1), *m2 = test_alloc(n * 4), *v2 = test_alloc(n * 4);
    round_to(p, n, FG_BF16), round_to(g, n, FG_F16);
    memcpy(m2, m1, n * 4), memcpy(v2, v1, n * 4);
    uint16_t *ph = to_half(p, n, FG_BF16), *gh = to_half(g, n, FG_F16);
    fg_adamw_args a = {sizeof a, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, NULL, NULL};
    CHECK_OK(tb.vt->adamw_update(Q, FG_F32, FG_F32, &a, p, g, m1, v1, n, &test_err));
    CHECK_OK(tb.vt->adamw_update(Q, FG_BF16, FG_F16, &a, ph, gh, m2, v2, n, &test_err));
    round_to(p, n, FG_BF16);
    float *got = from_half(ph, n, FG_BF16);
    same_bits("adamw bf16 params", got, p, n);
    same_bits("adamw m (f32)", m2, m1, n);
    same_bits("adamw v (f32)", v2, v1, n);
    free(got);
    fg_sgd_args s = {sizeof s, 0.1f, 0.9f, 0.0f, 1e-3f, 1, 0, NULL, NULL};
    CHECK_OK(tb.vt->sgd_update(Q, FG_F32, FG_F32, &s, p, g, m1, n, &test_err));
    CHECK_OK(tb.vt->sgd_update(Q, FG_BF16, FG_F16, &s, ph, gh, m2, n, &test_err));
    round_to(p, n, FG_BF16);
    got = from_half(ph, n, FG_BF16);
    same_bits("sgd bf16 params", got, p, n);
    same_bits("sgd momentum (f32)", m2, m1, n);
    free(got), free(p), free(g), free(m1), free(v1), free(m2), free(v2), free(ph), free(gh);
}

/* gemm: bf16 A, f16 B, f16 C with beta: the f32 gemm of the half values rounded into f16,
 * and within one f16 rounding of a double reference. */
static void gemm_half(void)
{
    int m = 19, n = 23, k = 37;
    float *a = random_f32((size_t)k * m, -1, 1), *b = random_f32((size_t)n * k, -1, 1);
    float *c = random_f32((size_t)m * n, -1, 1);
    round_to(a, (size_t)k * m, FG_BF16);
    round_to(b, (size_t)n * k, FG_F16);
    round_to(c, (size_t)m * n, FG_F16);
    uint16_t *ah = to_half(a, (size_t)k * m, FG_BF16), *bh = to_half(b, (size_t)n * k, FG_F16);
    uint16_t *ch = to_half(c, (size_t)m * n, FG_F16);
    double *want = test_alloc((size_t)m * n * 8);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < k; p++) /* A stored (k, m), B stored (n, k): both transposed */
                acc += (double)a[(size_t)p * m + i] * b[(size_t)j * k + p];
            want[(size_t)i * n + j] = 0.5 * acc + 0.25 * c[(size_t)i * n + j];
        }
    CHECK_OK(tb.vt->gemm(Q, FG_F32, FG_F32, FG_F32, 1, 1, m, n, k, 0.5f, a, m, b, k, 0.25f, c, n,
                         &test_err));
    round_to(c, (size_t)m * n, FG_F16);
    CHECK_OK(tb.vt->gemm(Q, FG_BF16, FG_F16, FG_F16, 1, 1, m, n, k, 0.5f, ah, m, bh, k, 0.25f, ch,
                         n, &test_err));
    float *got = from_half(ch, (size_t)m * n, FG_F16);
    same_bits("gemm bf16 x f16 -> f16", got, c, (size_t)m * n);
    for (size_t i = 0; i < (size_t)m * n; i++)
        CHECK(fabs(got[i] - want[i]) <= ldexp(fabs(want[i]), -10) + 1e-6,
              "gemm element %zu: %.9g vs double %.9g", i, got[i], want[i]);
    free(a), free(b), free(c), free(ah), free(bh), free(ch), free(want), free(got);
}

/* conv2d backward with bf16 activations and weights, f32 weight gradients accumulated:
 * the f32 op on the bf16 values; dx rounded to bf16. */
static void conv_backward_half(void)
{
    fg_conv2d_desc d = {sizeof d, 2, 3, 8, 8, 4, 3, 3, 0, 0, 1, 1, 6, 6, FG_LAYOUT_NCHW};
    size_t xn = 2 * 3 * 64, wn = 4 * 3 * 9, yn = 2 * 4 * 36;
    float *x = random_f32(xn, -1, 1), *w = random_f32(wn, -1, 1), *dy = random_f32(yn, -1, 1);
    round_to(x, xn, FG_BF16), round_to(w, wn, FG_BF16), round_to(dy, yn, FG_BF16);
    float *dw1 = random_f32(wn, -1, 1), *dw2 = test_alloc(wn * 4), *db1 = random_f32(4, -1, 1);
    float *db2 = test_alloc(16), *dx1 = test_alloc(xn * 4);
    memcpy(dw2, dw1, wn * 4), memcpy(db2, db1, 16);
    uint16_t *xh = to_half(x, xn, FG_BF16), *wh = to_half(w, wn, FG_BF16);
    uint16_t *dyh = to_half(dy, yn, FG_BF16), *dxh = test_alloc(xn * 2);
    void *ws = test_alloc(tb.vt->conv2d_workspace(tb.state, &d) + 64);
    CHECK_OK(tb.vt->conv2d_backward(Q, FG_F32, FG_F32, FG_F32, &d, x, w, dy, dx1, dw1, db1, 1, ws,
                                    &test_err));
    round_to(dx1, xn, FG_BF16);
    CHECK_OK(tb.vt->conv2d_backward(Q, FG_BF16, FG_BF16, FG_F32, &d, xh, wh, dyh, dxh, dw2, db2, 1,
                                    ws, &test_err));
    float *dx2 = from_half(dxh, xn, FG_BF16);
    same_bits("conv2d_backward dx", dx2, dx1, xn);
    same_bits("conv2d_backward dw (f32, accumulated)", dw2, dw1, wn);
    same_bits("conv2d_backward dbias", db2, db1, 4);
    free(x), free(w), free(dy), free(dw1), free(dw2), free(db1), free(db2), free(dx1);
    free(xh), free(wh), free(dyh), free(dxh), free(ws), free(dx2);
}

/* The loss: f16 logits, f32 probs and sums; dlogits back in f16. */
static void xent_half(void)
{
    int rows = 7, classes = 10;
    size_t n = (size_t)rows * classes;
    float *logits = random_f32(n, -4, 4);
    round_to(logits, n, FG_F16);
    int32_t labels[7] = {0, 9, 3, 3, 5, 1, 8};
    float p1[70], p2[70], s1[2] = {0, 0}, s2[2] = {0, 0}, d1[70];
    uint16_t *lh = to_half(logits, n, FG_F16), dh[70];
    CHECK_OK(tb.vt->softmax_xent_forward(Q, FG_F32, logits, labels, rows, classes, p1, &s1[0],
                                         &s1[1], &test_err));
    CHECK_OK(tb.vt->softmax_xent_forward(Q, FG_F16, lh, labels, rows, classes, p2, &s2[0], &s2[1],
                                         &test_err));
    same_bits("xent probs (f32)", p2, p1, n);
    same_bits("xent loss and hits", s2, s1, 2);
    CHECK_OK(
        tb.vt->softmax_xent_backward(Q, FG_F32, p1, labels, rows, classes, 1024.0f, d1, &test_err));
    CHECK_OK(
        tb.vt->softmax_xent_backward(Q, FG_F16, p1, labels, rows, classes, 1024.0f, dh, &test_err));
    round_to(d1, n, FG_F16);
    float *d2 = from_half(dh, n, FG_F16);
    same_bits("xent dlogits in f16", d2, d1, n);
    free(logits), free(lh), free(d2);
}

/* relu backward and max pooling in f16, batch norm forward in bf16 with f32 statistics. */
static void elementwise_half(void)
{
    size_t n = 4 * 6 * 6;
    float *x = random_f32(n, -2, 2), *dy = random_f32(n, -2, 2);
    round_to(x, n, FG_F16), round_to(dy, n, FG_F16);
    uint16_t *xh = to_half(x, n, FG_F16), *dyh = to_half(dy, n, FG_F16), dxh[144], yh[144];
    float dx[144], y[144];
    CHECK_OK(tb.vt->activation_backward(Q, FG_F32, FG_ACT_RELU, x, NULL, dy, dx, n, &test_err));
    CHECK_OK(tb.vt->activation_backward(Q, FG_F16, FG_ACT_RELU, xh, NULL, dyh, dxh, n, &test_err));
    float *got = from_half(dxh, n, FG_F16);
    same_bits("relu backward f16", got, dx, n);
    free(got);
    fg_conv2d_desc d = {sizeof d, 1, 4, 6, 6, 0, 2, 2, 0, 0, 2, 2, 3, 3, FG_LAYOUT_NCHW};
    int32_t a1[36], a2[36];
    CHECK_OK(tb.vt->pool2d_forward(Q, FG_F32, FG_POOL_MAX, &d, x, y, a1, &test_err));
    CHECK_OK(tb.vt->pool2d_forward(Q, FG_F16, FG_POOL_MAX, &d, xh, yh, a2, &test_err));
    got = from_half(yh, 36, FG_F16);
    same_bits("max pool f16", got, y, 36);
    CHECK(memcmp(a1, a2, sizeof a1) == 0, "max pool f16: same argmax");
    free(got);
    round_to(x, n, FG_BF16);
    uint16_t *xb = to_half(x, n, FG_BF16), gb[4], bb[4], yb[144];
    float gamma[4] = {1, 0.5f, 2, 1.5f}, beta[4] = {0, 0.25f, -1, 3}, rm1[4] = {0},
          rv1[4] = {1, 1, 1, 1};
    float rm2[4] = {0}, rv2[4] = {1, 1, 1, 1}, sm1[4], si1[4], sm2[4], si2[4];
    for (int i = 0; i < 4; i++)
        gb[i] = fg_f32_to_bf16(gamma[i]), bb[i] = fg_f32_to_bf16(beta[i]);
    CHECK_OK(tb.vt->batchnorm_forward(Q, FG_F32, FG_F32, 1, 1, 4, 36, x, gamma, beta, rm1, rv1,
                                      0.1f, 1e-5f, sm1, si1, y, &test_err));
    CHECK_OK(tb.vt->batchnorm_forward(Q, FG_BF16, FG_BF16, 1, 1, 4, 36, xb, gb, bb, rm2, rv2, 0.1f,
                                      1e-5f, sm2, si2, yb, &test_err));
    round_to(y, n, FG_BF16);
    got = from_half(yb, n, FG_BF16);
    same_bits("batchnorm bf16 output", got, y, n);
    same_bits("batchnorm running mean (f32)", rm2, rm1, 4);
    same_bits("batchnorm saved invstd (f32)", si2, si1, 4);
    free(got), free(x), free(dy), free(xh), free(dyh), free(xb);
}

/* relu forward and backward on half storage (run on the bits, no conversion) against the
 * f32 relu of the widened values rounded back, for every f16 and bf16 value of x; dy takes
 * every value too (reversed), and a NaN dx only needs to be a NaN. */
static void relu_all_values(void)
{
    uint16_t *x = test_alloc(65536 * 2), *dy = test_alloc(65536 * 2);
    uint16_t *y = test_alloc(65536 * 2), *dx = test_alloc(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++)
        x[i] = (uint16_t)i, dy[i] = (uint16_t)(65535 - i);
    for (int t = FG_F16; t <= FG_BF16; t++) {
        const char *name = t == FG_F16 ? "f16" : "bf16";
        CHECK_OK(tb.vt->activation_forward(Q, (uint32_t)t, FG_ACT_RELU, x, y, 65536, &test_err));
        CHECK_OK(tb.vt->activation_backward(Q, (uint32_t)t, FG_ACT_RELU, x, NULL, dy, dx, 65536,
                                            &test_err));
        size_t bad = 0;
        for (uint32_t i = 0; i < 65536; i++) {
            float xf = t == FG_F16 ? fg_f16_to_f32(x[i]) : fg_bf16_to_f32(x[i]);
            float gf = t == FG_F16 ? fg_f16_to_f32(dy[i]) : fg_bf16_to_f32(dy[i]);
            float yf = xf > 0.0f ? xf : 0.0f, df = xf > 0.0f ? gf : 0.0f;
            uint16_t yw = t == FG_F16 ? fg_f32_to_f16(yf) : fg_f32_to_bf16(yf);
            uint16_t dw = t == FG_F16 ? fg_f32_to_f16(df) : fg_f32_to_bf16(df);
            float dgot = t == FG_F16 ? fg_f16_to_f32(dx[i]) : fg_bf16_to_f32(dx[i]);
            int d_ok = isnan(df) ? isnan(dgot) : dx[i] == dw;
            if (y[i] != yw || !d_ok) {
                if (bad++ < 4)
                    CHECK(0, "relu %s x = %04x, dy = %04x: y %04x (want %04x), dx %04x (want "
                          "%04x)", name, x[i], dy[i], y[i], yw, dx[i], dw);
            }
        }
        CHECK(bad == 0, "relu %s: %zu of 65536 values differ", name, bad);
    }
    free(x), free(dy), free(y), free(dx);
}

/* The backend's cast (vectorised loops) against the scalar conversions: every f16 and bf16
 * value to f32 and back, and f32 values around every rounding edge. */
static void cast_all_values(void)
{
    uint16_t *h = test_alloc(65536 * 2), *back = test_alloc(65536 * 2);
    float *f = test_alloc(65536 * 4), *mid = test_alloc(65536 * 4);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    for (int t = FG_F16; t <= FG_BF16; t++) {
        CHECK_OK(tb.vt->cast(Q, FG_F32, (uint32_t)t, f, h, 65536, &test_err));
        CHECK_OK(tb.vt->cast(Q, (uint32_t)t, FG_F32, back, f, 65536, &test_err));
        for (uint32_t i = 0; i < 65536; i++) {
            float want = t == FG_F16 ? fg_f16_to_f32(h[i]) : fg_bf16_to_f32(h[i]);
            uint16_t again = t == FG_F16 ? fg_f32_to_f16(want) : fg_f32_to_bf16(want);
            CHECK(memcmp(&f[i], &want, 4) == 0 && back[i] == again, "cast %s %04x",
                  t == FG_F16 ? "f16" : "bf16", i);
        }
        for (uint32_t i = 0; i < 65536; i++) /* f32 values between neighbours, rounded */
            mid[i] = nextafterf(f[i], (i & 1) ? INFINITY : -INFINITY);
        CHECK_OK(tb.vt->cast(Q, (uint32_t)t, FG_F32, back, mid, 65536, &test_err));
        for (uint32_t i = 0; i < 65536; i++) {
            uint16_t want = t == FG_F16 ? fg_f32_to_f16(mid[i]) : fg_f32_to_bf16(mid[i]);
            CHECK(back[i] == want, "cast %.9g to %s: %04x, want %04x", mid[i],
                  t == FG_F16 ? "f16" : "bf16", back[i], want);
        }
    }
    free(h), free(back), free(f), free(mid);
}

static void cast_and_refusals(void)
{
    float x[5] = {1.0f, -2.5f, 65520.0f, 1e-8f, NAN}, back[5];
    uint16_t h[5];
    CHECK_OK(tb.vt->cast(Q, FG_F16, FG_F32, h, x, 5, &test_err));
    for (int i = 0; i < 5; i++)
        CHECK(h[i] == fg_f32_to_f16(x[i]), "cast f32->f16 element %d: %04x", i, h[i]);
    CHECK_OK(tb.vt->cast(Q, FG_F32, FG_F16, back, h, 5, &test_err));
    CHECK(back[0] == 1.0f && back[1] == -2.5f && isinf(back[2]) && isnan(back[4]),
          "cast f16->f32: %g %g %g %g", back[0], back[1], back[2], back[4]);
    fg_status st = tb.vt->cast(Q, FG_F64, FG_F16, back, h, 5, &test_err);
    CHECK(st == FG_UNAVAILABLE && strstr(test_err.message, "f64"), "cast to f64: %s",
          test_err.message);
    st = tb.vt->activation_forward(Q, FG_I32, FG_ACT_RELU, x, back, 5, &test_err);
    CHECK(st == FG_UNAVAILABLE && strstr(test_err.message, "i32"), "i32 activations: %s",
          test_err.message);
    st = tb.vt->gemm(Q, FG_F16, FG_F16, FG_F16, 0, 0, 2, 2, 2, 1.0f, h, 1, h, 2, 0.0f, h, 2,
                     &test_err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "lda = 1"),
          "bad lda named by gemm: %s", test_err.message);
}

void test_group_ops(void)
{
    test_seed(5);
    /* the half ops against f32 bit for bit: the convolutions pinned to im2col, as the parity
     * harness pins them (under auto, a call may take oneDNN's kernels and another im2col,
     * whichever measured faster at setup) */
    test_backend_open_with(&tb, 1, 2, 0, "conv_algorithm = im2col");
    supports_every_float_mix();
    flat_half();
    optim_half();
    gemm_half();
    conv_backward_half();
    xent_half();
    elementwise_half();
    relu_all_values();
    cast_all_values();
    cast_and_refusals();
    test_backend_close(&tb);
}
