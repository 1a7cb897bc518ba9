/* The transformer ops through the plugin: layer/RMS norm and attention against double
 * references, bf16 storage, embedding lookups with repeated ids, and the argument checks
 * (an id outside the table, a bad attention descriptor) answering with a message. The
 * kernels' gradients are checked by tests/kernels-cpu. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_backend tb;
#define Q tb.state, tb.queue

static void test_layernorm(int rms)
{
    int rows = 5, cols = 33;
    size_t n = (size_t)rows * cols;
    float *x = test_alloc(n * 4), *y = test_alloc(n * 4), *g = test_alloc((size_t)cols * 4);
    float *b = test_alloc((size_t)cols * 4), mean[5], rstd[5];
    double *want = test_alloc(n * 8);
    test_fill_uniform(x, n, -2, 4);
    test_fill_uniform(g, (size_t)cols, 0.5, 1.5);
    test_fill_uniform(b, (size_t)cols, -1, 1);
    CHECK_OK(tb.vt->layernorm_forward(Q, FG_F32, FG_F32, rms, rows, cols, x, g, b, 1e-5f, mean,
                                      rstd, y, &test_err));
    for (int r = 0; r < rows; r++) {
        double m = 0.0, v = 0.0;
        for (int i = 0; i < cols && !rms; i++)
            m += x[(size_t)r * cols + i] / (double)cols;
        for (int i = 0; i < cols; i++)
            v += pow(x[(size_t)r * cols + i] - m, 2) / cols;
        for (int i = 0; i < cols; i++)
            want[(size_t)r * cols + i] = (x[(size_t)r * cols + i] - m) / sqrt(v + 1e-5) * g[i] +
                                         (rms ? 0.0 : b[i]);
    }
    CHECK_EQ(test_compare(rms ? "rmsnorm" : "layernorm", y, want, n, 1e-5), 0);
    free(x); free(y); free(g); free(b); free(want);
}

/* bf16 storage: the op widens, computes in f32 and rounds once. */
static void test_layernorm_bf16(void)
{
    int rows = 3, cols = 16;
    uint16_t x16[48], y16[48];
    float x[48], y[48], mean[3], rstd[3];
    test_fill_uniform(x, 48, -2, 2);
    for (int i = 0; i < 48; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], 4);
        x16[i] = (uint16_t)(bits >> 16); /* truncation: exactly representable inputs */
        bits = (uint32_t)x16[i] << 16;
        memcpy(&x[i], &bits, 4);
    }
    CHECK_OK(tb.vt->layernorm_forward(Q, FG_F32, FG_F32, 0, rows, cols, x, NULL, NULL, 1e-5f,
                                      mean, rstd, y, &test_err));
    CHECK_OK(tb.vt->layernorm_forward(Q, FG_BF16, FG_F32, 0, rows, cols, x16, NULL, NULL, 1e-5f,
                                      mean, rstd, y16, &test_err));
    int misses = 0;
    for (int i = 0; i < 48; i++) {
        uint32_t bits = (uint32_t)y16[i] << 16;
        float v;
        memcpy(&v, &bits, 4);
        misses += fabsf(v - y[i]) > 1e-2f * fmaxf(1.0f, fabsf(y[i]));
    }
    CHECK_EQ(misses, 0);
}

static void test_embedding(void)
{
    int rows = 7, dim = 4;
    float table[28], out[12], dout[12], dtable[28];
    int32_t ids[3] = {2, 6, 2};
    test_fill_uniform(table, 28, -1, 1);
    test_fill_uniform(dout, 12, -1, 1);
    CHECK_OK(tb.vt->embedding_forward(Q, FG_F32, FG_F32, ids, 3, dim, rows, table, out, 0,
                                      &test_err));
    CHECK(memcmp(out + 4, table + 24, 16) == 0, "row 1 is not table row 6");
    CHECK_OK(tb.vt->embedding_backward(Q, FG_F32, FG_F32, ids, 3, dim, rows, dout, dtable, 0,
                                       &test_err));
    CHECK_NEAR(dtable[2 * 4 + 1], dout[1] + dout[9], 1e-6);
    CHECK_EQ(dtable[0], 0.0f);
    int32_t bad[3] = {1, 300, 2};
    fg_error err = {0};
    CHECK_EQ(tb.vt->embedding_forward(Q, FG_F32, FG_F32, bad, 3, dim, rows, table, out, 0, &err),
             FG_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "id 300 at position 1 is outside the table's 7 rows") != NULL,
          "%s", err.message);
}

static void test_attention(void)
{
    fg_attention_desc d = {sizeof d, 2, 10, 2, 3, 1, 0.0f, 0, 0, 0};
    int C = 6;
    size_t nq = (size_t)2 * 10 * 3 * C, ny = (size_t)2 * 10 * C;
    float *qkv = test_alloc(nq * 4), *y = test_alloc(ny * 4), lse[40];
    double *want = test_alloc(ny * 8);
    test_fill_uniform(qkv, nq, -1, 1);
    size_t ws_bytes = tb.vt->attention_workspace(tb.state, &d);
    CHECK(ws_bytes > 0);
    void *ws = NULL;
    CHECK_OK(tb.vt->alloc(tb.state, 0, ws_bytes, &ws, &test_err));
    CHECK_OK(tb.vt->attention_forward(Q, FG_F32, &d, qkv, y, lse, ws, &test_err));
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 10; i++) {
                double p[10], mx = -1e30, sum = 0.0;
                for (int j = 0; j <= i; j++) {
                    double s = 0.0;
                    for (int k = 0; k < 3; k++)
                        s += (double)qkv[((size_t)b * 10 + i) * 18 + h * 3 + k] *
                             qkv[((size_t)b * 10 + j) * 18 + 6 + h * 3 + k];
                    p[j] = s / sqrt(3.0);
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j <= i; j++)
                    sum += (p[j] = exp(p[j] - mx));
                for (int k = 0; k < 3; k++) {
                    double acc = 0.0;
                    for (int j = 0; j <= i; j++)
                        acc += p[j] / sum * qkv[((size_t)b * 10 + j) * 18 + 12 + h * 3 + k];
                    want[((size_t)b * 10 + i) * 6 + h * 3 + k] = acc;
                }
            }
    CHECK_EQ(test_compare("attention", y, want, ny, 1e-5), 0);
    fg_attention_desc bad = d;
    bad.dropout = 1.0f;
    CHECK_EQ(tb.vt->attention_workspace(tb.state, &bad), 0);
    fg_error err = {0};
    CHECK_EQ(tb.vt->attention_forward(Q, FG_F32, &bad, qkv, y, lse, ws, &err),
             FG_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "attention_forward: bad descriptor") != NULL, "%s", err.message);
    uint32_t bf16[1] = {FG_BF16};
    CHECK(tb.vt->supports(tb.state, FG_OP_ATTENTION_FORWARD, bf16));
    tb.vt->free(tb.state, 0, ws);
    free(qkv); free(y); free(want);
}

/* ---- bf16 attention: no staging, bf16 products ----------------------------------------- */

static float widen16(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, 4);
    return v;
}

/* sqrt(sum (x - ref)^2 / sum ref^2) of n bf16 values against f32 ones */
static double norm_rel16(const uint16_t *x, const float *ref, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += pow(widen16(x[i]) - (double)ref[i], 2);
        r += (double)ref[i] * ref[i];
    }
    return sqrt(d / r);
}

typedef struct attn_run {
    uint16_t *y, *dqkv;
    float *lse;
} attn_run;

/* forward and backward of d in bf16 on t */
static attn_run attention_bf16_on(test_backend *t, const fg_attention_desc *d,
                                  const uint16_t *qkv, const uint16_t *dy, size_t nq, size_t ny)
{
    attn_run r = {test_alloc(ny * 2), test_alloc(nq * 2),
                  test_alloc((size_t)d->batch * d->heads * d->seq * 4)};
    void *ws = NULL;
    CHECK_OK(t->vt->alloc(t->state, 0, t->vt->attention_workspace(t->state, d), &ws,
                          &test_err));
    CHECK_OK(t->vt->attention_forward(t->state, t->queue, FG_BF16, d, qkv, r.y, r.lse, ws,
                                      &test_err));
    CHECK_OK(t->vt->attention_backward(t->state, t->queue, FG_BF16, d, qkv, r.y, r.lse, dy,
                                       r.dqkv, ws, &test_err));
    t->vt->free(t->state, 0, ws);
    return r;
}

/* bf16 attention (grouped heads, two query blocks, dropout) on the backend as it comes
 * (oneDNN's bf16 products where the CPU has avx512_bf16) and with bf16 = emulated (the
 * products widened for f32 ones): each within bf16's roundings of the f32 op on the same
 * values, and the same bits run to run. */
static void test_attention_bf16(void)
{
    fg_attention_desc d = {sizeof d, 2, 70, 4, 16, 1, 0.1f, 9, 3, 2};
    size_t C = 4 * 16, nq = (size_t)2 * 70 * (4 + 2 * 2) * 16, ny = (size_t)2 * 70 * C;
    float *qkv = test_alloc(nq * 4), *dy = test_alloc(ny * 4), *y = test_alloc(ny * 4);
    float *dqkv = test_alloc(nq * 4), *lse = test_alloc((size_t)2 * 4 * 70 * 4);
    uint16_t *qkv16 = test_alloc(nq * 2), *dy16 = test_alloc(ny * 2);
    test_fill_uniform(qkv, nq, -1.5, 1.5);
    test_fill_uniform(dy, ny, -1, 1);
    for (size_t i = 0; i < nq + ny; i++) { /* truncated: the f32 op sees the bf16 values */
        float *f = i < nq ? &qkv[i] : &dy[i - nq];
        uint32_t bits;
        memcpy(&bits, f, 4);
        (i < nq ? qkv16 : dy16)[i < nq ? i : i - nq] = (uint16_t)(bits >> 16);
        *f = widen16((uint16_t)(bits >> 16));
    }
    test_backend emul;
    test_backend_open_with(&emul, 1, 2, 0, "bf16 = emulated");
    attn_run runs[3] = {attention_bf16_on(&tb, &d, qkv16, dy16, nq, ny),
                        attention_bf16_on(&tb, &d, qkv16, dy16, nq, ny),
                        attention_bf16_on(&emul, &d, qkv16, dy16, nq, ny)};
    test_backend_close(&emul);
    CHECK(memcmp(runs[0].y, runs[1].y, ny * 2) == 0 &&
              memcmp(runs[0].dqkv, runs[1].dqkv, nq * 2) == 0,
          "bf16 attention: two runs differ");
    void *ws = NULL;
    CHECK_OK(tb.vt->alloc(tb.state, 0, tb.vt->attention_workspace(tb.state, &d), &ws,
                          &test_err));
    CHECK_OK(tb.vt->attention_forward(Q, FG_F32, &d, qkv, y, lse, ws, &test_err));
    CHECK_OK(tb.vt->attention_backward(Q, FG_F32, &d, qkv, y, lse, dy, dqkv, ws, &test_err));
    tb.vt->free(tb.state, 0, ws);
    for (int r = 0; r < 3; r += 2) {
        double ye = norm_rel16(runs[r].y, y, ny), ge = norm_rel16(runs[r].dqkv, dqkv, nq);
        printf("  bf16 attention (%s) against f32: y %.2e, dqkv %.2e\n",
               r ? "bf16 = emulated" : "bf16 = auto", ye, ge);
        CHECK(ye < 5e-3 && ge < 1e-2, "bf16 attention (%s) off the f32 op's: y %.3g, dqkv %.3g",
              r ? "emulated" : "auto", ye, ge);
    }
    for (int r = 0; r < 3; r++)
        free(runs[r].y), free(runs[r].dqkv), free(runs[r].lse);
    free(qkv); free(dy); free(y); free(dqkv); free(lse); free(qkv16); free(dy16);
}

void test_group_transformer(void)
{
    test_backend_open(&tb, 1, 2, 0);
    test_seed(77);
    test_layernorm(0);
    test_layernorm(1);
    test_layernorm_bf16();
    test_embedding();
    test_attention();
    test_attention_bf16();
    test_backend_close(&tb);
}
