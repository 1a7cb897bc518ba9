/* kernels/cpu/gelu_fused.c, the fc layer's bias and GELU in one pass, is
 * (1) bit for bit the separate ops it replaces in the CPU backend's gemm_epilogue: bias_add
 *     then activation_forward (aux and y);
 * (2) bit for bit the same on 1 and 2 threads;
 * (3) within 1e-5 of a float64 GELU (0.5 x (1 + tanh u)), relative to the largest value;
 * on shapes with one row, one column, widths that are not a multiple of the vectors, and
 * enough rows to split across threads.
 * Usage: test_gelu_fused forward */
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

static void case_forward(void)
{
    for (size_t s = 0; s < SHAPES; s++)
        forward_shape(shapes[s][0], shapes[s][1]);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {{"forward", case_forward}};
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
    fprintf(stderr, "usage: %s forward\n", argv[0]);
    return 2;
}
