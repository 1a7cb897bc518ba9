/* Every op except gemm gives bitwise identical results with threads = 1 and threads = 2:
 * reductions use chunks fixed by the problem size, combined in a fixed order. conv2d's dx
 * and dw come out of OpenBLAS gemms and are only as deterministic as OpenBLAS; its dbias
 * is checked. conv2d runs im2col here (conv_algorithm = auto could time a different
 * algorithm in each instance); test_conv_algo.c checks oneDNN's across thread counts. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef struct outputs {
    float ss, loss, correct;
    float *bias_grad, *bn_y, *bn_mean, *bn_invstd, *bn_dx, *bn_dg, *bn_db;
    float *xent_probs, *conv_dx, *conv_db, *pool_dx, *drop_y, *act_y, *sgd_p;
} outputs;

enum { N_BIG = 1000003, BR = 512, BC = 300, BS = 37, XR = 4099, XC = 33 };

static void run_all(int threads, outputs *o)
{
    test_backend tb;
    test_backend_open_with(&tb, 1, threads, 0, "conv_algorithm = im2col");
    void *s = tb.state, *q = tb.queue;
    test_seed(77);
    float *x = test_alloc((size_t)N_BIG * 4), *dy = test_alloc((size_t)N_BIG * 4);
    test_fill_uniform(x, N_BIG, -2, 2);
    test_fill_uniform(dy, N_BIG, -1, 1);
    CHECK_OK(tb.vt->sum_squares(s, q, FG_F32, x, N_BIG, &o->ss, &test_err));

    o->bias_grad = test_alloc(BC * 4);
    CHECK_OK(tb.vt->bias_grad(s, q, FG_F32, FG_F32, o->bias_grad, x, BR, BC, 1, 0, &test_err));

    size_t bn = (size_t)64 * BC / 4 * BS; /* (64, 75, 37) */
    int bc = BC / 4;
    o->bn_y = test_alloc(bn * 4);
    o->bn_dx = test_alloc(bn * 4);
    o->bn_mean = test_alloc((size_t)bc * 4);
    o->bn_invstd = test_alloc((size_t)bc * 4);
    o->bn_dg = test_alloc((size_t)bc * 4);
    o->bn_db = test_alloc((size_t)bc * 4);
    CHECK_OK(tb.vt->batchnorm_forward(s, q, FG_F32, FG_F32, 1, 64, bc, BS, x, NULL, NULL, NULL,
                                      NULL, 0.1f, 1e-5f, o->bn_mean, o->bn_invstd, o->bn_y,
                                      &test_err));
    CHECK_OK(tb.vt->batchnorm_backward(s, q, FG_F32, FG_F32, FG_F32, 64, bc, BS, x, NULL,
                                       o->bn_mean, o->bn_invstd, dy, o->bn_dx, o->bn_dg, o->bn_db,
                                       0, &test_err));

    int32_t *labels = test_alloc(XR * 4);
    for (int i = 0; i < XR; i++)
        labels[i] = (i * 5) % XC;
    o->xent_probs = test_alloc((size_t)XR * XC * 4);
    o->loss = o->correct = 0.0f;
    CHECK_OK(tb.vt->softmax_xent_forward(s, q, FG_F32, x, labels, XR, XC, o->xent_probs, &o->loss,
                                         &o->correct, &test_err));

    fg_conv2d_desc d = { sizeof d, 16, 8, 13, 13, 16, 3, 3, 1, 1, 1, 1, 13, 13, FG_LAYOUT_NCHW };
    size_t xs = (size_t)16 * 8 * 13 * 13;
    o->conv_dx = test_alloc(xs * 4);
    o->conv_db = test_alloc(16 * 4);
    float *dw = test_alloc(16 * 8 * 9 * 4);
    void *work = test_alloc(tb.vt->conv2d_workspace(s, &d));
    CHECK_OK(tb.vt->conv2d_backward(s, q, FG_F32, FG_F32, FG_F32, &d, x, x, dy, o->conv_dx, dw,
                                    o->conv_db, 0, work, &test_err));

    fg_conv2d_desc pd = { sizeof pd, 32, 16, 26, 26, 0, 3, 3, 0, 0, 1, 1, 24, 24, FG_LAYOUT_NCHW };
    o->pool_dx = test_alloc((size_t)32 * 16 * 26 * 26 * 4);
    CHECK_OK(
        tb.vt->pool2d_backward(s, q, FG_F32, FG_POOL_AVG, &pd, dy, NULL, o->pool_dx, &test_err));

    uint8_t *mask = test_alloc(N_BIG);
    o->drop_y = test_alloc((size_t)N_BIG * 4);
    CHECK_OK(
        tb.vt->dropout_forward(s, q, FG_F32, 0.25f, 9, 3, x, o->drop_y, mask, N_BIG, &test_err));
    o->act_y = test_alloc((size_t)N_BIG * 4);
    CHECK_OK(tb.vt->activation_forward(s, q, FG_F32, FG_ACT_GELU, x, o->act_y, N_BIG, &test_err));
    o->sgd_p = test_alloc((size_t)N_BIG * 4);
    memcpy(o->sgd_p, x, (size_t)N_BIG * 4);
    float *buf = test_alloc((size_t)N_BIG * 4);
    fg_sgd_args a = { sizeof a, 0.1f, 0.9f, 0.0f, 1e-4f, 1, 1, NULL, NULL };
    CHECK_OK(tb.vt->sgd_update(s, q, FG_F32, FG_F32, &a, o->sgd_p, dy, buf, N_BIG, &test_err));
    free(buf); free(mask); free(work); free(dw); free(labels); free(x); free(dy);
    test_backend_close(&tb);
}

#define SAME(field, n)                                                                     \
    CHECK(memcmp(one.field, two.field, (size_t)(n) * sizeof(float)) == 0,                  \
          "%s differs between threads = 1 and threads = 2", #field)

void test_group_determinism(void)
{
    outputs one, two;
    run_all(1, &one);
    run_all(2, &two);
    CHECK(memcmp(&one.ss, &two.ss, 4) == 0, "sum_squares %.9g vs %.9g", (double)one.ss,
          (double)two.ss);
    CHECK(memcmp(&one.loss, &two.loss, 4) == 0, "xent loss %.9g vs %.9g", (double)one.loss,
          (double)two.loss);
    CHECK(one.correct == two.correct, "xent correct");
    int bc = BC / 4;
    SAME(bias_grad, BC);
    SAME(bn_y, (size_t)64 * bc * BS);
    SAME(bn_mean, bc);
    SAME(bn_invstd, bc);
    SAME(bn_dx, (size_t)64 * bc * BS);
    SAME(bn_dg, bc);
    SAME(bn_db, bc);
    SAME(xent_probs, (size_t)XR * XC);
    SAME(conv_db, 16);
    SAME(pool_dx, (size_t)32 * 16 * 26 * 26);
    SAME(drop_y, N_BIG);
    SAME(act_y, N_BIG);
    SAME(sgd_p, N_BIG);
    float **f1 = &one.bias_grad, **f2 = &two.bias_grad;
    for (size_t i = 0; i < (sizeof(outputs) - offsetof(outputs, bias_grad)) / sizeof(float *);
         i++) {
        free(f1[i]);
        free(f2[i]);
    }
}
