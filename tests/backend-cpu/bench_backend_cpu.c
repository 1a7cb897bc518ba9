/* Throughput of the CPU backend on two workloads, through the plugin's vtable as the
 * trainer calls it:
 *   mlp: 784-256-256-10, ReLU, softmax cross-entropy, SGD with momentum, batch 128:
 *        samples/s of forward + backward + SGD step, and the time of every op;
 *   cnn: the Fashion-MNIST convolutions at batch 128 (conv 1->32 3x3 on 28x28, conv
 *        32->64 3x3 on 13x13, stride 1, no padding): forward + backward time and GFLOP/s.
 * Usage: bench_backend_cpu [--threads N] [--steps N] [--smoke] [--mlp-only | --conv-only]
 *                          [--conv-algorithm auto|im2col|onednn] [--bf16]
 * --smoke runs a few steps and fails unless the loss on a fixed batch goes down.
 * --conv-algorithm sets [backend] conv_algorithm (default auto: what a fit runs);
 * --bf16 runs the convolutions with bf16 activations, weights and gradients. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum { B = 128, IN = 784, H = 256, OUT = 10 };

enum op_id { OP_GEMM_FWD, OP_BIAS_ADD, OP_RELU_FWD, OP_XENT_FWD, OP_XENT_BWD, OP_GEMM_DW,
             OP_GEMM_DX, OP_BIAS_GRAD, OP_RELU_BWD, OP_SGD, OP_COUNT };
static const char *op_names[OP_COUNT] = { "gemm forward (3)", "bias_add (3)", "relu forward (2)",
                                          "softmax_xent forward", "softmax_xent backward",
                                          "gemm dW (3)", "gemm dX (2)", "bias_grad (3)",
                                          "relu backward (2)", "sgd_update (269322)" };

typedef struct mlp {
    test_backend tb;
    float *params, *grads, *mom; /* flat: W1 b1 W2 b2 W3 b3 */
    float *w[3], *b[3], *dw[3], *db[3];
    float *x, *h[3], *a[2], *probs, *dh[3], *da[2];
    int32_t *labels;
    size_t nparams;
    double op_time[OP_COUNT];  /* summed over the timed steps */
    double op_step[OP_COUNT];  /* this step's time */
    double op_min[OP_COUNT];   /* the fastest step's time: robust on a busy machine */
    int timing;
} mlp;

static const int dims[4] = { IN, H, H, OUT };

#define TIMED(m, id, call)                                                                 \
    do {                                                                                   \
        double t0_ = (m)->timing ? now() : 0.0;                                            \
        CHECK_OK(call);                                                                    \
        if ((m)->timing)                                                                   \
            (m)->op_step[id] += now() - t0_;                                               \
    } while (0)

static void mlp_create(mlp *m, int threads)
{
    memset(m, 0, sizeof *m);
    test_backend_open(&m->tb, 1, threads, 0);
    m->nparams = 0;
    for (int l = 0; l < 3; l++)
        m->nparams += (size_t)dims[l + 1] * dims[l] + dims[l + 1];
    const fg_backend_vtable *vt = m->tb.vt;
    void *st = m->tb.state;
    float **bufs[] = { &m->params, &m->grads, &m->mom };
    for (int i = 0; i < 3; i++)
        CHECK_OK(vt->alloc(st, 0, m->nparams * 4, (void **)bufs[i], &test_err));
    size_t off = 0;
    test_seed(5);
    for (int l = 0; l < 3; l++) {
        size_t wn = (size_t)dims[l + 1] * dims[l];
        m->w[l] = m->params + off;
        m->dw[l] = m->grads + off;
        off += wn;
        m->b[l] = m->params + off;
        m->db[l] = m->grads + off;
        off += (size_t)dims[l + 1];
        double bound = 1.0 / sqrt((double)dims[l]);
        test_fill_uniform(m->w[l], wn, -bound, bound);
        test_fill_uniform(m->b[l], (size_t)dims[l + 1], -bound, bound);
    }
    CHECK_OK(vt->alloc(st, 0, (size_t)B * IN * 4, (void **)&m->x, &test_err));
    test_fill_uniform(m->x, (size_t)B * IN, 0, 1);
    for (int l = 0; l < 3; l++) {
        CHECK_OK(vt->alloc(st, 0, (size_t)B * dims[l + 1] * 4, (void **)&m->h[l], &test_err));
        CHECK_OK(vt->alloc(st, 0, (size_t)B * dims[l + 1] * 4, (void **)&m->dh[l], &test_err));
    }
    for (int l = 0; l < 2; l++) {
        CHECK_OK(vt->alloc(st, 0, (size_t)B * H * 4, (void **)&m->a[l], &test_err));
        CHECK_OK(vt->alloc(st, 0, (size_t)B * H * 4, (void **)&m->da[l], &test_err));
    }
    CHECK_OK(vt->alloc(st, 0, (size_t)B * OUT * 4, (void **)&m->probs, &test_err));
    m->labels = test_alloc(B * 4);
    for (int i = 0; i < B; i++)
        m->labels[i] = (int32_t)(test_uniform(0, OUT)) % OUT;
}

static void mlp_destroy(mlp *m)
{
    const fg_backend_vtable *vt = m->tb.vt;
    void *st = m->tb.state;
    float *all[] = { m->params, m->grads, m->mom, m->x, m->h[0], m->h[1], m->h[2], m->dh[0],
                     m->dh[1], m->dh[2], m->a[0], m->a[1], m->da[0], m->da[1], m->probs };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vt->free(st, 0, all[i]);
    free(m->labels);
    test_backend_close(&m->tb);
}

/* One training step; returns the batch's mean loss. */
static float mlp_step(mlp *m, int first)
{
    const fg_backend_vtable *vt = m->tb.vt;
    void *st = m->tb.state, *q = m->tb.queue;
    const float *in = m->x;
    for (int l = 0; l < 3; l++) {
        int k = dims[l], n = dims[l + 1];
        TIMED(m, OP_GEMM_FWD,
              vt->gemm(st, q, FG_F32, FG_F32, FG_F32, 0, 1, B, n, k, 1.0f, in, k, m->w[l], k, 0.0f,
                       m->h[l], n, &test_err));
        TIMED(m, OP_BIAS_ADD,
              vt->bias_add(st, q, FG_F32, FG_F32, m->h[l], m->b[l], B, n, 1, &test_err));
        if (l < 2) {
            TIMED(m, OP_RELU_FWD,
                  vt->activation_forward(st, q, FG_F32, FG_ACT_RELU, m->h[l], m->a[l],
                                         (size_t)B * n, &test_err));
            in = m->a[l];
        }
    }
    float loss = 0.0f, correct = 0.0f;
    TIMED(m, OP_XENT_FWD,
          vt->softmax_xent_forward(st, q, FG_F32, m->h[2], m->labels, B, OUT, m->probs, &loss,
                                   &correct, &test_err));
    TIMED(m, OP_XENT_BWD,
          vt->softmax_xent_backward(st, q, FG_F32, m->probs, m->labels, B, OUT, 1.0f / B, m->dh[2],
                                    &test_err));
    for (int l = 2; l >= 0; l--) {
        int k = dims[l], n = dims[l + 1];
        const float *layer_in = l ? m->a[l - 1] : m->x;
        TIMED(m, OP_GEMM_DW,
              vt->gemm(st, q, FG_F32, FG_F32, FG_F32, 1, 0, n, k, B, 1.0f, m->dh[l], n, layer_in, k,
                       0.0f, m->dw[l], k, &test_err));
        TIMED(m, OP_BIAS_GRAD,
              vt->bias_grad(st, q, FG_F32, FG_F32, m->db[l], m->dh[l], B, n, 1, 0, &test_err));
        if (l == 0)
            break;
        TIMED(m, OP_GEMM_DX,
              vt->gemm(st, q, FG_F32, FG_F32, FG_F32, 0, 0, B, k, n, 1.0f, m->dh[l], n, m->w[l], k,
                       0.0f, m->da[l - 1], k, &test_err));
        TIMED(m, OP_RELU_BWD,
              vt->activation_backward(st, q, FG_F32, FG_ACT_RELU, m->h[l - 1], m->a[l - 1],
                                      m->da[l - 1], m->dh[l - 1], (size_t)B * k, &test_err));
    }
    fg_sgd_args a = { sizeof a, 0.05f, 0.9f, 0.0f, 0.0f, 0, first, NULL, NULL };
    TIMED(m, OP_SGD,
          vt->sgd_update(st, q, FG_F32, FG_F32, &a, m->params, m->grads, m->mom, m->nparams,
                         &test_err));
    return loss / B;
}

static int bench_mlp(int threads, int steps, int smoke)
{
    mlp m;
    mlp_create(&m, threads);
    float first_loss = mlp_step(&m, 1), loss = first_loss;
    for (int i = 0; i < (smoke ? 30 : 50); i++)
        loss = mlp_step(&m, 0);
    int ok = loss < 0.8f * first_loss;
    printf("mlp: loss on a fixed batch %.4f -> %.4f\n", (double)first_loss, (double)loss);
    if (smoke) {
        mlp_destroy(&m);
        return ok;
    }
    double best = 1e30, fastest = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (int i = 0; i < steps; i++) {
            double s0 = now();
            mlp_step(&m, 0);
            double s1 = now() - s0;
            fastest = s1 < fastest ? s1 : fastest;
        }
        double t = (now() - t0) / steps;
        best = t < best ? t : best;
    }
    printf("mlp 784-256-256-10, batch %d, %d threads: %.1f us/step, %.0f samples/s "
           "(best of 5 x %d steps); fastest single step %.1f us (%.0f samples/s)\n", B,
           threads, best * 1e6, B / best, steps, fastest * 1e6, B / fastest);
    m.timing = 1;
    for (int i = 0; i < OP_COUNT; i++)
        m.op_min[i] = 1e30;
    for (int s = 0; s < steps; s++) {
        memset(m.op_step, 0, sizeof m.op_step);
        mlp_step(&m, 0);
        for (int i = 0; i < OP_COUNT; i++) {
            m.op_time[i] += m.op_step[i];
            m.op_min[i] = m.op_step[i] < m.op_min[i] ? m.op_step[i] : m.op_min[i];
        }
    }
    double total = 0.0, total_min = 0.0;
    for (int i = 0; i < OP_COUNT; i++) {
        total += m.op_time[i];
        total_min += m.op_min[i];
    }
    printf("  per-op time per step, mean and fastest of %d steps (sums %.1f us, %.1f us):\n",
           steps, total / steps * 1e6, total_min * 1e6);
    for (int i = 0; i < OP_COUNT; i++)
        printf("    %-24s %8.1f us %8.1f us  %5.1f%%\n", op_names[i],
               m.op_time[i] / steps * 1e6, m.op_min[i] * 1e6, 100.0 * m.op_min[i] / total_min);
    mlp_destroy(&m);
    return ok;
}

/* Fills n elements of dtype t with uniform values in [lo, hi]. */
static void *conv_tensor(size_t n, uint32_t t, double lo, double hi)
{
    float *f = test_alloc(n * 4);
    test_fill_uniform(f, n, lo, hi);
    if (t == FG_F32)
        return f;
    uint16_t *h = test_alloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        h[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    free(f);
    return h;
}

static void bench_conv(test_backend *tb, fg_conv2d_desc d, int with_dx, int reps, uint32_t t)
{
    const fg_backend_vtable *vt = tb->vt;
    size_t xs = (size_t)d.n * d.c * d.h * d.w, ws = (size_t)d.k * d.c * d.r * d.s;
    size_t ys = (size_t)d.n * d.k * d.out_h * d.out_w;
    void *x = conv_tensor(xs, t, -1, 1), *w = conv_tensor(ws, t, -0.1, 0.1);
    void *b = conv_tensor((size_t)d.k, t, -0.1, 0.1), *y = conv_tensor(ys, t, 0, 0);
    void *dx = conv_tensor(xs, t, 0, 0), *dw = conv_tensor(ws, t, 0, 0);
    void *db = conv_tensor((size_t)d.k, t, 0, 0);
    void *work = test_alloc(vt->conv2d_workspace(tb->state, &d));
    double tf = 1e30, tbk = 1e30;
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        CHECK_OK(vt->conv2d_forward(tb->state, tb->queue, t, t, &d, x, w, b, y, work,
                                    &test_err));
        double t1 = now();
        CHECK_OK(vt->conv2d_backward(tb->state, tb->queue, t, t, t, &d, x, w, y,
                                     with_dx ? dx : NULL, dw, db, 0, work, &test_err));
        double t2 = now();
        tf = t1 - t0 < tf ? t1 - t0 : tf;
        tbk = t2 - t1 < tbk ? t2 - t1 : tbk;
    }
    double flop = 2.0 * ys * (double)(d.c * d.r * d.s);
    double total_flop = flop * (with_dx ? 3 : 2);
    printf("conv %d->%d %dx%d on %dx%d, batch %d, pad %d: forward %.2f ms (%.1f GFLOP/s), "
           "backward%s %.2f ms (%.1f GFLOP/s), total %.2f ms, %.1f GFLOP/s\n",
           d.c, d.k, d.r, d.s, d.h, d.w, d.n, d.pad_h, tf * 1e3, flop / tf * 1e-9,
           with_dx ? " (dx, dw, db)" : " (dw, db)", tbk * 1e3,
           flop * (with_dx ? 2 : 1) / tbk * 1e-9, (tf + tbk) * 1e3,
           total_flop / (tf + tbk) * 1e-9);
    free(x); free(w); free(b); free(y); free(dx); free(dw); free(db); free(work);
}

int main(int argc, char **argv)
{
    int threads = 2, steps = 200, smoke = 0, with_mlp = 1, with_conv = 1;
    const char *conv_algorithm = "auto";
    uint32_t conv_type = FG_F32;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--smoke") == 0)
            smoke = 1;
        else if (strcmp(argv[i], "--mlp-only") == 0)
            with_conv = 0;
        else if (strcmp(argv[i], "--conv-only") == 0)
            with_mlp = 0;
        else if (strcmp(argv[i], "--conv-algorithm") == 0 && i + 1 < argc)
            conv_algorithm = argv[++i];
        else if (strcmp(argv[i], "--bf16") == 0)
            conv_type = FG_BF16;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--steps N] [--smoke] "
                    "[--mlp-only | --conv-only] [--conv-algorithm auto|im2col|onednn] "
                    "[--bf16]\n", argv[0]);
            return 2;
        }
    }
    int ok = with_mlp ? bench_mlp(threads, steps, smoke) : 1;
    if (with_conv) {
        test_backend tb;
        char options[96];
        snprintf(options, sizeof options, "conv_algorithm = %s", conv_algorithm);
        test_backend_open_with(&tb, 1, threads, 0, options);
        fg_fake_host_echo(&tb.host, stdout, FG_LOG_INFO); /* the choices, with their times */
        fg_conv2d_desc c1 = { sizeof c1, B, 1, 28, 28, 32, 3, 3, 0, 0, 1, 1, 26, 26, FG_LAYOUT_NCHW };
        fg_conv2d_desc c2 = { sizeof c2, B, 32, 13, 13, 64, 3, 3, 0, 0, 1, 1, 11, 11, FG_LAYOUT_NCHW };
        bench_conv(&tb, c1, 0, smoke ? 1 : 20, conv_type);
        bench_conv(&tb, c2, 1, smoke ? 1 : 20, conv_type);
        test_backend_close(&tb);
    }
    if (!ok || test_failures) {
        fprintf(stderr, "bench: %s\n", ok ? "a call failed" : "the loss did not go down");
        return 1;
    }
    return 0;
}
