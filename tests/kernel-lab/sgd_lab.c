/* Kernel lab: the SGD-with-momentum update (PyTorch semantics), the MLP step's largest
 * time outside the gemms (269 322 parameters: 116 us of a 1 ms step on 2 threads).
 *
 *   version 0  reference: one scalar loop per element, straight from torch.optim.SGD
 *   version 1  kernels/cpu/optim.c as of ddf57ec: one sweep, on the calling thread
 *   version 2  version 1 cut into chunks on the 2-thread pool
 *   version 3  version 1 compiled for AVX-512 / AVX2 as well (target_clones, picked at load)
 *   version 4  version 3 on the pool  <- the winner, now kernels/cpu/optim.c
 *
 * Every version must give the reference's parameters and momentum bit for bit: the update
 * is elementwise and the project compiles with -std=c11 (no FMA contraction), so vector
 * width and partition cannot change a result.
 *
 *   sgd_lab check          every version against the reference (ctest kernel_lab.sgd)
 *   sgd_lab time [n]       median us per update of each version over n parameters */
#include "lab.h" /* first: it sets _POSIX_C_SOURCE */

#include "cpu_kernels.h"

typedef struct lab_sgd_job {
    const fg_cpu_sgd *a;
    float *param, *buf;
    const float *grad;
} lab_sgd_job;

/* version 0 */
static void sgd_v0(const fg_cpu_sgd *a, float *param, const float *grad, float *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] + a->weight_decay * param[i];
        float step = g;
        if (a->momentum != 0.0f) {
            float b = a->first_step ? g : a->momentum * buf[i] + (1.0f - a->dampening) * g;
            buf[i] = b;
            step = a->nesterov ? g + a->momentum * b : b;
        }
        param[i] -= a->lr * step;
    }
}

/* versions 1 and 2: the product kernel as it was (a copy, so the lab keeps measuring it).
 * Always inlined, so that version 3's clones compile the loops for their own targets (a call
 * to it would run the baseline code in every clone). */
static inline __attribute__((always_inline)) void sgd_v1_body(void *p, size_t b, size_t e)
{
    lab_sgd_job *j = p;
    const fg_cpu_sgd *a = j->a;
    float *restrict param = j->param, *restrict buf = j->buf;
    const float *restrict grad = j->grad;
    float lr = a->lr, wd = a->weight_decay, mom = a->momentum, damp = 1.0f - a->dampening;
    if (mom == 0.0f) {
        for (size_t i = b; i < e; i++)
            param[i] -= lr * (grad[i] + wd * param[i]);
        return;
    }
    if (a->first_step) {
        for (size_t i = b; i < e; i++) {
            float g = grad[i] + wd * param[i];
            buf[i] = g;
            param[i] -= lr * (a->nesterov ? g + mom * g : g);
        }
        return;
    }
    if (a->nesterov) {
        for (size_t i = b; i < e; i++) {
            float g = grad[i] + wd * param[i];
            float nb = mom * buf[i] + damp * g;
            buf[i] = nb;
            param[i] -= lr * (g + mom * nb);
        }
        return;
    }
    for (size_t i = b; i < e; i++) {
        float g = grad[i] + wd * param[i];
        float nb = mom * buf[i] + damp * g;
        buf[i] = nb;
        param[i] -= lr * nb;
    }
}

static void sgd_v1_range(void *p, size_t b, size_t e)
{
    sgd_v1_body(p, b, e);
}

/* versions 3 and 4: the same loops, also compiled for the wider vector units */
LAB_CLONES static void sgd_v3_range(void *p, size_t b, size_t e)
{
    sgd_v1_body(p, b, e);
}

typedef void (*lab_sgd_fn)(fg_cpu_pool *pool, const fg_cpu_sgd *a, float *param,
                           const float *grad, float *buf, size_t n);

static void run_v0(fg_cpu_pool *pool, const fg_cpu_sgd *a, float *p, const float *g,
                   float *b, size_t n)
{
    (void)pool;
    sgd_v0(a, p, g, b, n);
}

static void run_v1(fg_cpu_pool *pool, const fg_cpu_sgd *a, float *p, const float *g,
                   float *b, size_t n)
{
    (void)pool;
    lab_sgd_job j = { a, p, b, g };
    sgd_v1_range(&j, 0, n);
}

static void run_v2(fg_cpu_pool *pool, const fg_cpu_sgd *a, float *p, const float *g,
                   float *b, size_t n)
{
    lab_sgd_job j = { a, p, b, g };
    fg_cpu_parallel_for(pool, n, FG_CPU_STREAM_GRAIN, 16, sgd_v1_range, &j);
}

static void run_v3(fg_cpu_pool *pool, const fg_cpu_sgd *a, float *p, const float *g,
                   float *b, size_t n)
{
    (void)pool;
    lab_sgd_job j = { a, p, b, g };
    sgd_v3_range(&j, 0, n);
}

static void run_v4(fg_cpu_pool *pool, const fg_cpu_sgd *a, float *p, const float *g,
                   float *b, size_t n)
{
    lab_sgd_job j = { a, p, b, g };
    fg_cpu_parallel_for(pool, n, FG_CPU_STREAM_GRAIN, 16, sgd_v3_range, &j);
}

/* the product, whatever kernels/cpu/optim.c holds now */
static void run_product(fg_cpu_pool *pool, const fg_cpu_sgd *a, float *p, const float *g,
                        float *b, size_t n)
{
    fg_cpu_sgd_update(pool, a, p, g, b, n);
}

static const struct {
    const char *name;
    lab_sgd_fn fn;
} versions[] = {
    { "v0 reference", run_v0 },       { "v1 one sweep", run_v1 },
    { "v2 v1 on the pool", run_v2 },  { "v3 v1 + AVX-512 clones", run_v3 },
    { "v4 v3 on the pool", run_v4 },  { "kernels/cpu now", run_product },
};
#define NVERSIONS (sizeof versions / sizeof versions[0])

/* Momentum, nesterov, weight decay and dampening settings, three steps each (the first
 * step initialises the buffer): every version's params and buffer equal version 0's. */
static int check(fg_cpu_pool *pool)
{
    const fg_cpu_sgd cases[] = {
        { 0.01f, 0.0f, 0.0f, 0.0f, 0, 0, NULL }, { 0.01f, 0.9f, 0.0f, 0.0f, 0, 0, NULL },
        { 0.05f, 0.9f, 0.1f, 1e-4f, 0, 0, NULL }, { 0.02f, 0.8f, 0.0f, 5e-4f, 1, 0, NULL },
    };
    size_t n = 100003; /* not a multiple of any vector width or chunk */
    float *p0 = lab_alloc(n), *b0 = lab_alloc(n), *p = lab_alloc(n), *b = lab_alloc(n);
    float *g = lab_alloc(n);
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (size_t v = 1; v < NVERSIONS; v++) {
            lab_fill(p0, n, 1);
            memcpy(p, p0, n * sizeof *p);
            memset(b0, 0, n * sizeof *b0);
            memset(b, 0, n * sizeof *b);
            for (int step = 0; step < 3; step++) {
                fg_cpu_sgd a = cases[c];
                a.first_step = step == 0;
                lab_fill(g, n, 100 + (uint32_t)step);
                sgd_v0(&a, p0, g, b0, n);
                versions[v].fn(pool, &a, p, g, b, n);
            }
            size_t dp = lab_first_diff(p0, p, n);
            size_t db = cases[c].momentum != 0.0f ? lab_first_diff(b0, b, n) : n;
            if (dp < n || db < n) {
                size_t i = dp < n ? dp : db;
                printf("FAIL %s, case %zu: %s[%zu] = %.9g, reference %.9g\n", versions[v].name,
                       c, dp < n ? "param" : "momentum", i, (double)(dp < n ? p[i] : b[i]),
                       (double)(dp < n ? p0[i] : b0[i]));
                bad = 1;
            }
        }
    }
    free(p0), free(b0), free(p), free(b), free(g);
    if (!bad)
        printf("sgd lab: %zu versions x %zu cases equal the reference bit for bit\n",
               NVERSIONS - 1, sizeof cases / sizeof cases[0]);
    return bad;
}

/* Blocks of 50 updates, the versions taking turns block by block, so that a machine whose
 * load drifts slows every version alike; the median block of each is printed. */
static void time_versions(fg_cpu_pool *pool, size_t n)
{
    enum { ROUNDS = 21, CALLS = 50 };
    float *p = lab_alloc(n), *b = lab_alloc(n), *g = lab_alloc(n);
    lab_fill(p, n, 1), lab_fill(g, n, 2), memset(b, 0, n * sizeof *b);
    fg_cpu_sgd a = { 1e-6f, 0.9f, 0.0f, 0.0f, 0, 0, NULL };
    static double t[NVERSIONS][ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        for (size_t v = 0; v < NVERSIONS; v++) {
            double t0 = lab_now();
            for (int k = 0; k < CALLS; k++)
                versions[v].fn(pool, &a, p, g, b, n);
            t[v][r] = (lab_now() - t0) / CALLS;
        }
    printf("sgd lab: %zu parameters, %d threads; median of %d blocks of %d updates, the "
           "versions taking turns\n", n, fg_cpu_pool_threads(pool), ROUNDS, CALLS);
    for (size_t v = 0; v < NVERSIONS; v++) {
        double med = lab_median(t[v], ROUNDS);
        printf("  %-24s %8.1f us  (fastest block %6.1f us)  %6.1f GB/s\n", versions[v].name,
               med * 1e6, t[v][0] * 1e6, 5.0 * 4.0 * (double)n / med * 1e-9);
    }
    free(p), free(b), free(g);
}

static int time_main(fg_cpu_pool *pool, int argc, char **argv)
{
    time_versions(pool, argc >= 1 ? (size_t)strtoull(argv[0], NULL, 10) : 269322);
    return 0;
}

int main(int argc, char **argv)
{
    return lab_main(argc, argv, "sgd", "[parameters]", check, time_main);
}
