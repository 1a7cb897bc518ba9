/* kernels/cpu/gelu_fused.c, the fc layer's bias and GELU in one pass each way, is
 * (1) bit for bit the separate ops it replaces in the CPU backend's gemm_epilogue: bias_add
 *     then activation_forward (aux and y); activation_backward then bias_grad (d and dbias,
 *     with accumulate 0 and 1);
 * (2) bit for bit the same on 1 and 2 threads;
 * (3) within 1e-5 of a float64 GELU (0.5 x (1 + tanh u)) and its derivative, relative to the
 *     largest value, and dbias within 1e-5 of the float64 column sums of the reference d;
 * on shapes with one row, one column, widths that are not a multiple of the vectors and
 * wider than the 256-column block, and enough rows and columns to split across threads.
 * Usage: test_gelu_fused forward | backward */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu_kernels.h"

enum { ACT_GELU = 2 }; /* fg_cpu_activation_forward's act */

static fg_cpu_pool *pools[2]; /* 1 and 2 threads */
static uint64_t rng_state = 4242;

static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static float *random_floats(size_t n, double lo, double hi)
{
    float *x = malloc(n * sizeof *x + 4);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * uniform());
    return x;
}

static float *copy_floats(const float *x, size_t n)
{
    float *y = malloc(n * sizeof *y + 4);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static void same_bits(const char *what, int rows, int cols, const float *a, const float *b,
                      size_t n)
{
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "%s differs at %d x %d", what, rows, cols);
}

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double gelu_grad_ref(double x)
{
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = tanh(u);
    double du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
}

/* max |a - ref| / max |ref| */
static double scaled_error(const float *a, const double *ref, size_t n)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]);
        worst = e > worst ? e : worst;
        scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    }
    return scale > 0.0 ? worst / scale : worst;
}

static const int shapes[][2] = {{1, 1}, {1, 1536}, {3, 17}, {64, 300}, {37, 513}, {512, 1536}};
#define SHAPES (sizeof shapes / sizeof *shapes)

static void forward_shape(int rows, int cols)
{
    size_t n = (size_t)rows * (size_t)cols;
    float *p = random_floats(n, -4.0, 4.0), *bias = random_floats((size_t)cols, -1.0, 1.0);
    float *aux_ref = copy_floats(p, n), *y_ref = malloc(n * sizeof *y_ref);
    fg_cpu_bias_add(pools[1], aux_ref, bias, rows, cols, 1);
    fg_cpu_activation_forward(pools[1], ACT_GELU, aux_ref, y_ref, n);
    for (int t = 0; t < 2; t++) {
        float *aux = copy_floats(p, n), *y = malloc(n * sizeof *y);
        fg_cpu_bias_gelu_forward(pools[t], rows, cols, bias, aux, y);
        same_bits(t ? "aux (2 threads)" : "aux (1 thread)", rows, cols, aux, aux_ref, n);
        same_bits(t ? "y (2 threads)" : "y (1 thread)", rows, cols, y, y_ref, n);
        free(aux), free(y);
    }
    double *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++)
        ref[i] = gelu_ref((double)p[i] + (double)bias[i % (size_t)cols]);
    double e = scaled_error(y_ref, ref, n);
    CHECK(e <= 1e-5, "gelu at %d x %d: %.3g from float64", rows, cols, e);
    free(p), free(bias), free(aux_ref), free(y_ref), free(ref);
}

static void backward_shape(int rows, int cols, int accumulate)
{
    size_t n = (size_t)rows * (size_t)cols;
    float *x = random_floats(n, -4.0, 4.0), *d0 = random_floats(n, -1.0, 1.0);
    float *db0 = random_floats((size_t)cols, -1.0, 1.0);
    float *d_ref = copy_floats(d0, n), *db_ref = copy_floats(db0, (size_t)cols);
    fg_cpu_activation_backward(pools[1], ACT_GELU, x, NULL, d_ref, d_ref, n);
    fg_cpu_bias_grad(pools[1], db_ref, d_ref, rows, cols, 1, accumulate);
    for (int t = 0; t < 2; t++) {
        float *d = copy_floats(d0, n), *db = copy_floats(db0, (size_t)cols);
        fg_cpu_dgelu_bias_grad(pools[t], rows, cols, x, d, db, accumulate);
        same_bits(t ? "d (2 threads)" : "d (1 thread)", rows, cols, d, d_ref, n);
        same_bits(t ? "dbias (2 threads)" : "dbias (1 thread)", rows, cols, db, db_ref,
                  (size_t)cols);
        free(d), free(db);
    }
    double *ref = malloc(n * sizeof *ref), *sums = calloc((size_t)cols, sizeof *sums);
    for (size_t i = 0; i < n; i++) {
        ref[i] = (double)d0[i] * gelu_grad_ref((double)x[i]);
        sums[i % (size_t)cols] += (double)d_ref[i];
    }
    for (int j = 0; j < cols; j++)
        sums[j] += accumulate ? (double)db0[j] : 0.0;
    double e = scaled_error(d_ref, ref, n), eb = scaled_error(db_ref, sums, (size_t)cols);
    CHECK(e <= 1e-5, "gelu' at %d x %d: %.3g from float64", rows, cols, e);
    CHECK(eb <= 1e-5, "dbias at %d x %d: %.3g from float64", rows, cols, eb);
    free(x), free(d0), free(db0), free(d_ref), free(db_ref), free(ref), free(sums);
}

static void case_forward(void)
{
    for (size_t s = 0; s < SHAPES; s++)
        forward_shape(shapes[s][0], shapes[s][1]);
}

static void case_backward(void)
{
    for (size_t s = 0; s < SHAPES; s++)
        for (int acc = 0; acc < 2; acc++)
            backward_shape(shapes[s][0], shapes[s][1], acc);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {{"forward", case_forward}, {"backward", case_backward}};
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof *cases; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            CHECK(fg_cpu_pool_create(1, &pools[0]) == 0 && fg_cpu_pool_create(2, &pools[1]) == 0,
                  "pools");
            fg_cpu_pool_set_stream_grain(pools[1], 1024); /* bias_add splits too */
            cases[i].run();
            fg_cpu_pool_destroy(pools[0]);
            fg_cpu_pool_destroy(pools[1]);
            return fg_test_report(argv[1]);
        }
    fprintf(stderr, "usage: %s forward|backward\n", argv[0]);
    return 2;
}
