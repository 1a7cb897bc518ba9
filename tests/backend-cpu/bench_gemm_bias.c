/* The linear layer's products at the MLP's shapes (784-256-256-10) through the CPU
 * backend's vtable, fastest of N repetitions each (robust on a busy machine):
 *   forward  y = x W^T + b: fp32 gemm then bias_add, fp32 gemm_bias, bf16 emulated
 *            (gemm then bias_add, and gemm_bias), bf16 gemm_bias native (oneDNN);
 *   backward dW = dy^T x (f32 out, as bf16-mixed's f32 gradients) and dx = dy W.
 * Usage: bench_gemm_bias [--batch N] [--threads N] [--reps N] [--smoke]
 * --smoke: a few repetitions, fails only when a call fails. */
#define _POSIX_C_SOURCE 200809L
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

typedef struct bufs {
    float *x, *w, *b, *y, *dy, *dw, *dx;      /* f32 */
    uint16_t *xh, *wh, *bh, *yh, *dyh, *dxh; /* bf16 */
} bufs;

enum { V_F32_SPLIT, V_F32_FUSED, V_BF16_EMU_SPLIT, V_BF16_EMU_FUSED, V_BF16_NATIVE_FUSED,
       V_F32_DW, V_BF16_EMU_DW, V_BF16_NATIVE_DW, V_F32_DX, V_BF16_EMU_DX, V_BF16_NATIVE_DX,
       V_COUNT };
static const char *names[V_COUNT] = {
    "fwd fp32 gemm + bias_add", "fwd fp32 gemm_bias", "fwd bf16 emulated gemm + bias_add",
    "fwd bf16 emulated gemm_bias", "fwd bf16 native gemm_bias", "dW fp32",
    "dW bf16 emulated (f32 out)", "dW bf16 native (f32 out)", "dx fp32", "dx bf16 emulated",
    "dx bf16 native"};

/* One variant of layer (rows, in -> out) on backend t; v picks the product. */
static void run(test_backend *t, int v, int rows, int in, int out, bufs *u)
{
    const fg_backend_vtable *vt = t->vt;
    void *s = t->state, *q = t->queue;
    switch (v) {
    case V_F32_SPLIT:
        CHECK_OK(vt->gemm(s, q, FG_F32, FG_F32, FG_F32, 0, 1, rows, out, in, 1.0f, u->x, in, u->w,
                          in, 0.0f, u->y, out, &test_err));
        CHECK_OK(vt->bias_add(s, q, FG_F32, FG_F32, u->y, u->b, rows, out, 1, &test_err));
        break;
    case V_F32_FUSED:
        CHECK_OK(vt->gemm_bias(s, q, FG_F32, FG_F32, FG_F32, 0, 1, rows, out, in, u->x, in, u->w,
                               in, u->b, u->y, out, &test_err));
        break;
    case V_BF16_EMU_SPLIT:
        CHECK_OK(vt->gemm(s, q, FG_BF16, FG_BF16, FG_BF16, 0, 1, rows, out, in, 1.0f, u->xh, in,
                          u->wh, in, 0.0f, u->yh, out, &test_err));
        CHECK_OK(vt->bias_add(s, q, FG_BF16, FG_BF16, u->yh, u->bh, rows, out, 1, &test_err));
        break;
    case V_BF16_EMU_FUSED:
    case V_BF16_NATIVE_FUSED:
        CHECK_OK(vt->gemm_bias(s, q, FG_BF16, FG_BF16, FG_BF16, 0, 1, rows, out, in, u->xh, in,
                               u->wh, in, u->bh, u->yh, out, &test_err));
        break;
    case V_F32_DW:
        CHECK_OK(vt->gemm(s, q, FG_F32, FG_F32, FG_F32, 1, 0, out, in, rows, 1.0f, u->dy, out,
                          u->x, in, 0.0f, u->dw, in, &test_err));
        break;
    case V_BF16_EMU_DW:
    case V_BF16_NATIVE_DW:
        CHECK_OK(vt->gemm(s, q, FG_BF16, FG_BF16, FG_F32, 1, 0, out, in, rows, 1.0f, u->dyh, out,
                          u->xh, in, 0.0f, u->dw, in, &test_err));
        break;
    case V_F32_DX:
        CHECK_OK(vt->gemm(s, q, FG_F32, FG_F32, FG_F32, 0, 0, rows, in, out, 1.0f, u->dy, out,
                          u->w, in, 0.0f, u->dx, in, &test_err));
        break;
    default:
        CHECK_OK(vt->gemm(s, q, FG_BF16, FG_BF16, FG_BF16, 0, 0, rows, in, out, 1.0f, u->dyh, out,
                          u->wh, in, 0.0f, u->dxh, in, &test_err));
        break;
    }
}

static int emulated_variant(int v)
{
    return v == V_BF16_EMU_SPLIT || v == V_BF16_EMU_FUSED || v == V_BF16_EMU_DW ||
           v == V_BF16_EMU_DX;
}

int main(int argc, char **argv)
{
    int batch = 256, threads = 2, reps = 200, smoke = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--smoke") == 0)
            smoke = 1;
        else {
            fprintf(stderr, "usage: %s [--batch N] [--threads N] [--reps N] [--smoke]\n",
                    argv[0]);
            return 2;
        }
    }
    if (smoke)
        reps = 3;
    test_backend native, emul;
    test_backend_open_with(&native, 1, threads, 0, NULL);
    test_backend_open_with(&emul, 1, threads, 0, "bf16 = emulated");
    static const int layers[3][2] = {{784, 256}, {256, 256}, {256, 10}};
    double total[V_COUNT] = {0};
    size_t big = (size_t)batch * 784 + 784 * 256;
    bufs u;
    float **f[] = {&u.x, &u.w, &u.b, &u.y, &u.dy, &u.dw, &u.dx};
    uint16_t **h[] = {&u.xh, &u.wh, &u.bh, &u.yh, &u.dyh, &u.dxh};
    test_seed(7);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        *f[i] = test_alloc(big * 4);
        test_fill_uniform(*f[i], big, -1, 1);
    }
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
        *h[i] = test_alloc(big * 2);
        CHECK_OK(native.vt->cast(native.state, native.queue, FG_BF16, FG_F32, *h[i], *f[i], big,
                                 &test_err));
    }
    printf("batch %d, %d threads, fastest of %d (us; GFLOP/s)\n", batch, threads, reps);
    for (int l = 0; l < 3; l++) {
        int in = layers[l][0], out = layers[l][1];
        double flop = 2.0 * batch * in * out;
        printf("layer %d -> %d:\n", in, out);
        for (int v = 0; v < V_COUNT; v++) {
            test_backend *t = emulated_variant(v) ? &emul : &native;
            double best = 1e30;
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                run(t, v, batch, in, out, &u);
                double d = now() - t0;
                best = d < best ? d : best;
            }
            total[v] += best;
            printf("  %-36s %9.1f %7.1f\n", names[v], best * 1e6, flop / best * 1e-9);
        }
    }
    printf("all three layers:\n");
    for (int v = 0; v < V_COUNT; v++)
        printf("  %-36s %9.1f us\n", names[v], total[v] * 1e6);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        free(*f[i]);
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        free(*h[i]);
    test_backend_close(&native);
    test_backend_close(&emul);
    return test_failures ? 1 : 0;
}
