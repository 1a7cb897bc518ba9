/* Kernel lab: SwiGLU's gating (kernels/cpu/swiglu.c), y = silu(gate) * up and its backward
 * dgate = dy up s (1 + g (1 - s)), dup = dy silu(g), s = sigmoid(g): the Llama MLP's
 * elementwise op between its three gemms, over (rows, mlp_hidden).
 *
 *   version 0  reference: one loop, libm's expf, one thread
 *   version 1  kernels/cpu/swiglu.c as of ef1b393: the same loop on the pool
 *   version 2  version 1 compiled for AVX-512 / AVX2 as well (FG_CPU_VECTOR_CLONES): expf
 *              stays a call, so the loop stays scalar
 *   version 3  version 2 with fast_exp.h's branch-free exp (the GELU's): the loop vectorises
 *
 * Versions 1 and 2 must equal the reference bit for bit; version 3 changes exp by up to 2
 * ulp and must stay within 1e-6 of the reference's scale.
 *
 *   swiglu_lab check            (ctest kernel_lab.swiglu)
 *   swiglu_lab time [n]         median us per forward + backward of each version */
#include "lab.h" /* first: it sets _POSIX_C_SOURCE */

#include <math.h>

#include "cpu_kernels.h"
#include "fast_exp.h"

typedef struct glu_job {
    const float *gate, *up, *dy;
    float *y, *dgate, *dup;
} glu_job;

static inline __attribute__((always_inline)) void fwd_libm(const glu_job *j, size_t b, size_t e)
{
    for (size_t i = b; i < e; i++) {
        float g = j->gate[i];
        j->y[i] = g / (1.0f + expf(-g)) * j->up[i];
    }
}

static inline __attribute__((always_inline)) void bwd_libm(const glu_job *j, size_t b, size_t e)
{
    for (size_t i = b; i < e; i++) {
        float g = j->gate[i], u = j->up[i], d = j->dy[i];
        float s = 1.0f / (1.0f + expf(-g)), silu = g * s;
        j->dup[i] = d * silu;
        j->dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
    }
}

static inline __attribute__((always_inline)) void fwd_fast(const glu_job *j, size_t b, size_t e)
{
    for (size_t i = b; i < e; i++) {
        float g = j->gate[i];
        j->y[i] = g / (1.0f + fg_cpu_exp(-g)) * j->up[i];
    }
}

static inline __attribute__((always_inline)) void bwd_fast(const glu_job *j, size_t b, size_t e)
{
    for (size_t i = b; i < e; i++) {
        float g = j->gate[i], u = j->up[i], d = j->dy[i];
        float s = 1.0f / (1.0f + fg_cpu_exp(-g)), silu = g * s;
        j->dup[i] = d * silu;
        j->dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
    }
}

static void v1_fwd(void *p, size_t b, size_t e) { fwd_libm(p, b, e); }
static void v1_bwd(void *p, size_t b, size_t e) { bwd_libm(p, b, e); }
LAB_CLONES static void v2_fwd(void *p, size_t b, size_t e) { fwd_libm(p, b, e); }
LAB_CLONES static void v2_bwd(void *p, size_t b, size_t e) { bwd_libm(p, b, e); }
LAB_CLONES static void v3_fwd(void *p, size_t b, size_t e) { fwd_fast(p, b, e); }
LAB_CLONES static void v3_bwd(void *p, size_t b, size_t e) { bwd_fast(p, b, e); }

static void run_pool(fg_cpu_pool *pool, glu_job *j, size_t n, fg_cpu_range_fn f,
                     fg_cpu_range_fn b)
{
    fg_cpu_parallel_for(pool, n, FG_CPU_GRAIN / 4, 1, f, j);
    fg_cpu_parallel_for(pool, n, FG_CPU_GRAIN / 4, 1, b, j);
}

static void run_v0(fg_cpu_pool *pool, glu_job *j, size_t n)
{
    (void)pool;
    fwd_libm(j, 0, n);
    bwd_libm(j, 0, n);
}

static void run_v1(fg_cpu_pool *pool, glu_job *j, size_t n) { run_pool(pool, j, n, v1_fwd, v1_bwd); }
static void run_v2(fg_cpu_pool *pool, glu_job *j, size_t n) { run_pool(pool, j, n, v2_fwd, v2_bwd); }
static void run_v3(fg_cpu_pool *pool, glu_job *j, size_t n) { run_pool(pool, j, n, v3_fwd, v3_bwd); }

static void run_product(fg_cpu_pool *pool, glu_job *j, size_t n)
{
    fg_cpu_swiglu_forward(pool, j->gate, j->up, j->y, n);
    fg_cpu_swiglu_backward(pool, j->gate, j->up, j->dy, j->dgate, j->dup, n);
}

typedef void (*lab_glu_fn)(fg_cpu_pool *pool, glu_job *j, size_t n);
static const struct {
    const char *name;
    lab_glu_fn fn;
    int exact;
} versions[] = {
    { "v0 reference", run_v0, 1 },
    { "v1 on the pool (now)", run_v1, 1 },
    { "v2 v1 + AVX-512 clones", run_v2, 1 },
    { "v3 v2 + fast_exp", run_v3, 0 },
    { "kernels/cpu now", run_product, 1 },
};
#define NVERSIONS (sizeof versions / sizeof versions[0])

/* gate in [-8, 8): both tails of the sigmoid */
static void inputs(float *gate, float *up, float *dy, size_t n, uint32_t seed)
{
    lab_fill(gate, n, seed);
    lab_fill(up, n, seed + 1);
    lab_fill(dy, n, seed + 2);
    for (size_t i = 0; i < n; i++)
        gate[i] *= 16.0f;
}

static int check(fg_cpu_pool *pool)
{
    const size_t sizes[] = {1, 7, 4096 * 3 + 5, 64 * 1536};
    double worst = 0;
    int bad = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        float *g = lab_alloc(n), *u = lab_alloc(n), *dy = lab_alloc(n), *out = lab_alloc(6 * n);
        inputs(g, u, dy, n, 11 + (uint32_t)k);
        glu_job ref = {g, u, dy, out, out + n, out + 2 * n};
        run_v0(pool, &ref, n);
        for (size_t v = 1; v < NVERSIONS; v++) {
            glu_job j = {g, u, dy, out + 3 * n, out + 4 * n, out + 5 * n};
            memset(out + 3 * n, 0xff, 3 * n * sizeof *out);
            versions[v].fn(pool, &j, n);
            const char *what[] = {"y", "dgate", "dup"};
            for (int o = 0; o < 3; o++) {
                const float *a = out + (size_t)(3 + o) * n, *r = out + (size_t)o * n;
                size_t d = lab_first_diff(a, r, n);
                double rel = lab_max_rel(a, r, n);
                if (!versions[v].exact)
                    worst = rel > worst ? rel : worst;
                if (versions[v].exact ? d < n : !(rel <= 1e-6)) {
                    printf("FAIL %s, n %zu: %s[%zu] = %.9g, reference %.9g (%.3g of its scale)\n",
                           versions[v].name, n, what[o], d, (double)a[d < n ? d : 0],
                           (double)r[d < n ? d : 0], rel);
                    bad = 1;
                }
            }
        }
        free(g), free(u), free(dy), free(out);
    }
    if (!bad)
        printf("swiglu lab: v1, v2 and kernels/cpu equal the reference bit for bit; v3 (fast_exp) "
               "within %.3g of the reference over %zu sizes\n", worst,
               sizeof sizes / sizeof sizes[0]);
    return bad;
}

static int time_main(fg_cpu_pool *pool, int argc, char **argv)
{
    long n = argc >= 1 ? atol(argv[0]) : 4096L * 1536; /* 16 x 256 rows of SmolLM's 1536 */
    if (n < 1) {
        fprintf(stderr, "swiglu lab: n must be >= 1\n");
        return 2;
    }
    enum { ROUNDS = 15 };
    float *g = lab_alloc((size_t)n), *u = lab_alloc((size_t)n), *dy = lab_alloc((size_t)n);
    float *out = lab_alloc(3 * (size_t)n);
    inputs(g, u, dy, (size_t)n, 1);
    glu_job j = {g, u, dy, out, out + n, out + 2 * n};
    static double t[NVERSIONS][ROUNDS];
    int calls = (int)(2e7 / (double)n) + 1;
    for (int r = 0; r < ROUNDS; r++)
        for (size_t v = 1; v < NVERSIONS; v++) {
            double t0 = lab_now();
            for (int k = 0; k < calls; k++)
                versions[v].fn(pool, &j, (size_t)n);
            t[v][r] = (lab_now() - t0) / calls;
        }
    printf("swiglu lab: n %ld, forward + backward, %d threads; median of %d rounds of %d "
           "calls, the versions taking turns\n", n, fg_cpu_pool_threads(pool), ROUNDS, calls);
    for (size_t v = 1; v < NVERSIONS; v++) {
        double med = lab_median(t[v], ROUNDS); /* sorts: t[v][0] is then the fastest */
        printf("  %-24s %9.1f us  (fastest %9.1f us)\n", versions[v].name, med * 1e6,
               t[v][0] * 1e6);
    }
    free(g), free(u), free(dy), free(out);
    return 0;
}

int main(int argc, char **argv)
{
    return lab_main(argc, argv, "swiglu", "[n]", check, time_main);
}
