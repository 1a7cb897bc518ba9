/* Kernel lab: the AdamW update (PyTorch semantics, torch.optim.AdamW with foreach=False)
 * over a flat parameter range (kernels/cpu/optim.c): the language models' optimizer, 10.9M
 * parameters for the mid GPT (bench_lm.sh), 0.8M for the small one.
 *
 *   version 0  reference: one scalar loop per element, straight from torch.optim.AdamW
 *   version 1  kernels/cpu/optim.c's loop on the calling thread, baseline ISA
 *   version 2  version 1 on the pool  (the product before the clones)
 *   version 3  version 2 compiled for AVX-512 / AVX2 as well (FG_CPU_VECTOR_CLONES)
 *              <- kernels/cpu/optim.c as of d8ca546: no candidate beat it, because none
 *              vectorised: sqrtf may set errno, so GCC kept the loop scalar (vsqrtss)
 *   version 4  version 3 in tiles of 4096 elements claimed in order (m, v, p and g of a tile
 *              stay in L1 between their read and write), to see whether the 7 streams
 *              (4 read, 3 written: 28 bytes a parameter) leave anything on the table
 *
 *   "kernels/cpu now" is version 3 compiled with -fno-math-errno, as the backend compiles
 *   optim.c (plugins/backend-cpu/CMakeLists.txt): vectorised, 8x version 3 on the small GPT's
 *   0.8M parameters (1460 -> 185 us, 2 threads, Zen 4).
 *
 * The update is elementwise and -std=c11 contracts no multiply-add into an FMA, so every
 * version must give the reference's parameters, m and v bit for bit.
 *
 *   adamw_lab check          every version against the reference (ctest kernel_lab.adamw)
 *   adamw_lab time [n]       median us per update of each version over n parameters */
#include "lab.h" /* first: it sets _POSIX_C_SOURCE */

#include <math.h>

#include "cpu_kernels.h"

typedef struct adamw_job {
    const fg_cpu_adamw *a;
    float *param, *m, *v;
    const float *grad;
    float bc1, bc2_sqrt;
} adamw_job;

static void job_init(adamw_job *j, const fg_cpu_adamw *a, float *p, const float *g, float *m,
                     float *v)
{
    double step = (double)(a->step < 1 ? 1 : a->step);
    *j = (adamw_job){a, p, m, v, g, (float)(1.0 - pow((double)a->beta1, step)),
                     (float)sqrt(1.0 - pow((double)a->beta2, step))};
}

/* version 0: torch/optim/adamw.py's _single_tensor_adamw, element by element */
static void adamw_v0(const fg_cpu_adamw *a, float *p, const float *g, float *m, float *v,
                     size_t n)
{
    adamw_job j;
    job_init(&j, a, p, g, m, v);
    for (size_t i = 0; i < n; i++) {
        p[i] = p[i] * (1.0f - a->lr * a->weight_decay);
        m[i] = a->beta1 * m[i] + (1.0f - a->beta1) * g[i];
        v[i] = a->beta2 * v[i] + (1.0f - a->beta2) * g[i] * g[i];
        float denom = sqrtf(v[i]) / j.bc2_sqrt + a->eps;
        p[i] = p[i] - (a->lr / j.bc1) * m[i] / denom;
    }
}

/* versions 1-4: optim.c's loop (inlined, so each clone compiles it for its target) */
static inline __attribute__((always_inline)) void adamw_body(void *p, size_t b, size_t e)
{
    adamw_job *c = p;
    const fg_cpu_adamw *a = c->a;
    float *restrict param = c->param, *restrict m = c->m, *restrict v = c->v;
    const float *restrict grad = c->grad;
    float decay = 1.0f - a->lr * a->weight_decay, b1 = a->beta1, b2 = a->beta2;
    float step_size = a->lr / c->bc1, bc2_sqrt = c->bc2_sqrt, eps = a->eps;
    for (size_t i = b; i < e; i++) {
        float g = grad[i];
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] = param[i] * decay - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

static void adamw_v1_range(void *p, size_t b, size_t e) { adamw_body(p, b, e); }
LAB_CLONES static void adamw_v3_range(void *p, size_t b, size_t e) { adamw_body(p, b, e); }

LAB_CLONES static void adamw_v4_range(void *p, size_t b, size_t e)
{
    for (size_t t = b; t < e; t += 4096)
        adamw_body(p, t, t + 4096 < e ? t + 4096 : e);
}

typedef void (*lab_adamw_fn)(fg_cpu_pool *pool, const fg_cpu_adamw *a, float *p,
                             const float *g, float *m, float *v, size_t n);

static void run_v0(fg_cpu_pool *pool, const fg_cpu_adamw *a, float *p, const float *g,
                   float *m, float *v, size_t n)
{
    (void)pool;
    adamw_v0(a, p, g, m, v, n);
}

static void run_v1(fg_cpu_pool *pool, const fg_cpu_adamw *a, float *p, const float *g,
                   float *m, float *v, size_t n)
{
    (void)pool;
    adamw_job j;
    job_init(&j, a, p, g, m, v);
    adamw_v1_range(&j, 0, n);
}

static void run_pool(fg_cpu_pool *pool, const fg_cpu_adamw *a, float *p, const float *g,
                     float *m, float *v, size_t n, fg_cpu_range_fn fn, size_t align)
{
    adamw_job j;
    job_init(&j, a, p, g, m, v);
    fg_cpu_parallel_for(pool, n, FG_CPU_GRAIN / 4, align, fn, &j);
}

static void run_v2(fg_cpu_pool *pool, const fg_cpu_adamw *a, float *p, const float *g,
                   float *m, float *v, size_t n)
{
    run_pool(pool, a, p, g, m, v, n, adamw_v1_range, 16);
}

static void run_v3(fg_cpu_pool *pool, const fg_cpu_adamw *a, float *p, const float *g,
                   float *m, float *v, size_t n)
{
    run_pool(pool, a, p, g, m, v, n, adamw_v3_range, 16);
}

static void run_v4(fg_cpu_pool *pool, const fg_cpu_adamw *a, float *p, const float *g,
                   float *m, float *v, size_t n)
{
    run_pool(pool, a, p, g, m, v, n, adamw_v4_range, 4096);
}

static void run_product(fg_cpu_pool *pool, const fg_cpu_adamw *a, float *p, const float *g,
                        float *m, float *v, size_t n)
{
    fg_cpu_adamw_update(pool, a, p, g, m, v, n);
}

static const struct {
    const char *name;
    lab_adamw_fn fn;
} versions[] = {
    { "v0 reference", run_v0 },          { "v1 one sweep", run_v1 },
    { "v2 v1 on the pool", run_v2 },     { "v3 v2 + AVX-512 clones", run_v3 },
    { "v4 v3 in 4096-tiles", run_v4 },   { "kernels/cpu now", run_product },
};
#define NVERSIONS (sizeof versions / sizeof versions[0])

/* Three steps of each setting (bias corrections change with the step): every version's
 * params, m and v equal version 0's. */
static int check(fg_cpu_pool *pool)
{
    const fg_cpu_adamw cases[] = {
        { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, NULL },
        { 3e-4f, 0.8f, 0.95f, 1e-6f, 0.0f, 1, NULL },
        { 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1000, NULL },
    };
    size_t n = 100003; /* not a multiple of any vector width or chunk */
    float *p0 = lab_alloc(n), *m0 = lab_alloc(n), *v0 = lab_alloc(n);
    float *p = lab_alloc(n), *m = lab_alloc(n), *v = lab_alloc(n), *g = lab_alloc(n);
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t ver = 1; ver < NVERSIONS; ver++) {
            lab_fill(p0, n, 1);
            memcpy(p, p0, n * sizeof *p);
            memset(m0, 0, n * 4), memset(v0, 0, n * 4), memset(m, 0, n * 4), memset(v, 0, n * 4);
            for (int step = 0; step < 3; step++) {
                fg_cpu_adamw a = cases[c];
                a.step += step;
                lab_fill(g, n, 200 + (uint32_t)step);
                adamw_v0(&a, p0, g, m0, v0, n);
                versions[ver].fn(pool, &a, p, g, m, v, n);
            }
            size_t dp = lab_first_diff(p0, p, n), dm = lab_first_diff(m0, m, n);
            size_t dv = lab_first_diff(v0, v, n);
            if (dp < n || dm < n || dv < n) {
                size_t i = dp < n ? dp : dm < n ? dm : dv;
                printf("FAIL %s, case %zu: %s[%zu] = %.9g, reference %.9g\n", versions[ver].name,
                       c, dp < n ? "param" : dm < n ? "m" : "v", i,
                       (double)(dp < n ? p[i] : dm < n ? m[i] : v[i]),
                       (double)(dp < n ? p0[i] : dm < n ? m0[i] : v0[i]));
                bad = 1;
            }
        }
    free(p0), free(m0), free(v0), free(p), free(m), free(v), free(g);
    if (!bad)
        printf("adamw lab: %zu versions x %zu cases equal the reference bit for bit\n",
               NVERSIONS - 1, sizeof cases / sizeof cases[0]);
    return bad;
}

static void time_versions(fg_cpu_pool *pool, size_t n)
{
    enum { ROUNDS = 21 };
    float *p = lab_alloc(n), *m = lab_alloc(n), *v = lab_alloc(n), *g = lab_alloc(n);
    lab_fill(p, n, 1), lab_fill(g, n, 2), memset(m, 0, n * 4), memset(v, 0, n * 4);
    fg_cpu_adamw a = { 1e-6f, 0.9f, 0.999f, 1e-8f, 0.0f, 10, NULL };
    static double t[NVERSIONS][ROUNDS];
    int calls = (int)(2e7 / (double)n) + 1;
    for (int r = 0; r < ROUNDS; r++)
        for (size_t ver = 0; ver < NVERSIONS; ver++) {
            double t0 = lab_now();
            for (int k = 0; k < calls; k++)
                versions[ver].fn(pool, &a, p, g, m, v, n);
            t[ver][r] = (lab_now() - t0) / calls;
        }
    printf("adamw lab: %zu parameters, %d threads; median of %d rounds of %d updates, the "
           "versions taking turns\n", n, fg_cpu_pool_threads(pool), ROUNDS, calls);
    for (size_t ver = 0; ver < NVERSIONS; ver++) {
        double med = lab_median(t[ver], ROUNDS);
        printf("  %-24s %9.1f us  (fastest %9.1f us)  %6.1f GB/s\n", versions[ver].name,
               med * 1e6, t[ver][0] * 1e6, 7.0 * 4.0 * (double)n / t[ver][0] * 1e-9);
    }
    free(p), free(m), free(v), free(g);
}

static int time_main(fg_cpu_pool *pool, int argc, char **argv)
{
    time_versions(pool, argc >= 1 ? (size_t)strtoull(argv[0], NULL, 10) : 10942464);
    return 0;
}

int main(int argc, char **argv)
{
    return lab_main(argc, argv, "adamw", "[parameters]", check, time_main);
}
