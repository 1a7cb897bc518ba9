/* Kernel lab: rotary position embedding in place over a fused qkv (kernels/cpu/rope.c), the
 * Llama blocks' op on q and k: rows of (heads + 2 kv_heads) head_dim values, q's and k's
 * heads turned by p * theta^(-2i/head_dim) at position p = row % seq.
 *
 *   version 0  reference: every (row, head, pair) computes its angle, cos and sin in double
 *   version 1  kernels/cpu/rope.c as of ef1b393: the angle, cos and sin once per (row,
 *              pair) for all heads, rows on the pool; pow once per (row, pair)
 *   version 2  version 1 with the inverse frequencies computed once per call (the table
 *              rope_freq_forward takes: no pow in the rows, the same doubles) and a row's
 *              cos and sin first, then each head's pairs in order (contiguous, not strided)
 *              <- the winner, now kernels/cpu/rope.c (RESULTS: the lab's numbers)
 *   version 3  version 2 with cos and sin computed once per (position, pair) into a table
 *              on the stack (seq * half floats) and the rows reading it: the batch's B
 *              sequences share their positions' angles
 *   version 4  version 3 compiled for AVX-512 / AVX2 as well (FG_CPU_VECTOR_CLONES)
 *   Versions 3 and 4 were faster still (29 ms) but need a (seq, head_dim/2) table per call:
 *   an allocation in the step, or a cache per layer; not moved.
 *
 * Each rotated value is x1 c - x2 s with the same float c and s in every version, so every
 * version must equal the reference bit for bit.
 *
 *   rope_lab check                          (ctest kernel_lab.rope)
 *   rope_lab time [rows seq heads head_dim] median us per call of each version */
#include "lab.h" /* first: it sets _POSIX_C_SOURCE */

#include <math.h>

#include "cpu_kernels.h"

typedef struct shape {
    int rows, seq, heads, head_dim, ld;
} shape;

#define THETA 10000.0
#define MAX_HALF 256
#define MAX_TABLE (1 << 16) /* seq * half floats of version 3's table */

static void v0(float *x, const shape *s)
{
    int half = s->head_dim / 2;
    for (int r = 0; r < s->rows; r++)
        for (int h = 0; h < s->heads; h++)
            for (int i = 0; i < half; i++) {
                double a = (double)(r % s->seq) * pow(THETA, -2.0 * i / s->head_dim);
                float c = (float)cos(a), sn = (float)sin(a);
                float *p = x + (size_t)r * s->ld + (size_t)h * s->head_dim + i, *q = p + half;
                float x1 = *p, x2 = *q;
                *p = x1 * c - x2 * sn;
                *q = x2 * c + x1 * sn;
            }
}

typedef struct rope_job {
    float *x;
    const shape *s;
    const double *inv_freq;   /* versions 2-4 */
    const float *cs;          /* versions 3-4: (seq, half) cos then (seq, half) sin */
} rope_job;

/* one row's heads, given its pairs' cos and sin */
static inline __attribute__((always_inline)) void turn_row(float *row, int heads, int head_dim,
                                                           const float *c, const float *sn)
{
    int half = head_dim / 2;
    for (int h = 0; h < heads; h++) {
        float *a = row + (size_t)h * head_dim, *b = a + half;
        for (int i = 0; i < half; i++) {
            float x1 = a[i], x2 = b[i];
            a[i] = x1 * c[i] - x2 * sn[i];
            b[i] = x2 * c[i] + x1 * sn[i];
        }
    }
}

/* version 1: the angle's pow per (row, pair), then that pair in every head (strided) */
static void v1_rows(void *p, size_t r0, size_t r1)
{
    const rope_job *j = p;
    int half = j->s->head_dim / 2;
    for (size_t r = r0; r < r1; r++) {
        double pos = (double)(r % (size_t)j->s->seq);
        float *row = j->x + r * (size_t)j->s->ld;
        for (int i = 0; i < half; i++) {
            double a = pos * pow(THETA, -2.0 * i / j->s->head_dim);
            float c = (float)cos(a), sn = (float)sin(a);
            for (int h = 0; h < j->s->heads; h++) {
                float *x1p = row + (size_t)h * j->s->head_dim + i, *x2p = x1p + half;
                float x1 = *x1p, x2 = *x2p;
                *x1p = x1 * c - x2 * sn;
                *x2p = x2 * c + x1 * sn;
            }
        }
    }
}

static void v2_rows(void *p, size_t r0, size_t r1)
{
    const rope_job *j = p;
    int half = j->s->head_dim / 2;
    float c[MAX_HALF], sn[MAX_HALF];
    for (size_t r = r0; r < r1; r++) {
        double pos = (double)(r % (size_t)j->s->seq);
        for (int i = 0; i < half; i++) {
            double a = pos * j->inv_freq[i];
            c[i] = (float)cos(a);
            sn[i] = (float)sin(a);
        }
        turn_row(j->x + r * (size_t)j->s->ld, j->s->heads, j->s->head_dim, c, sn);
    }
}

static inline __attribute__((always_inline)) void table_rows(void *p, size_t r0, size_t r1)
{
    const rope_job *j = p;
    int half = j->s->head_dim / 2, seq = j->s->seq;
    for (size_t r = r0; r < r1; r++) {
        const float *c = j->cs + (r % (size_t)seq) * (size_t)half;
        turn_row(j->x + r * (size_t)j->s->ld, j->s->heads, j->s->head_dim, c,
                 c + (size_t)seq * half);
    }
}

static void v3_rows(void *p, size_t r0, size_t r1) { table_rows(p, r0, r1); }
LAB_CLONES static void v4_rows(void *p, size_t r0, size_t r1) { table_rows(p, r0, r1); }

static void inv_freq_of(const shape *s, double *inv_freq)
{
    for (int i = 0; i < s->head_dim / 2; i++)
        inv_freq[i] = pow(THETA, -2.0 * i / s->head_dim);
}


static void run_rows(fg_cpu_pool *pool, float *x, const shape *s, fg_cpu_range_fn fn,
                     const double *inv_freq, const float *cs)
{
    rope_job j = {x, s, inv_freq, cs};
    size_t per_row = (size_t)s->heads * (size_t)s->head_dim + 1;
    fg_cpu_parallel_for(pool, (size_t)s->rows, FG_CPU_GRAIN / 8 / per_row + 1, 1, fn, &j);
}

static void run_v0(fg_cpu_pool *pool, float *x, const shape *s)
{
    (void)pool;
    v0(x, s);
}

static void run_v1(fg_cpu_pool *pool, float *x, const shape *s)
{
    run_rows(pool, x, s, v1_rows, NULL, NULL);
}

static void run_now(fg_cpu_pool *pool, float *x, const shape *s)
{
    fg_cpu_rope(pool, 0, s->rows, s->seq, 0, s->heads, s->head_dim, s->ld, (float)THETA, x);
}

static void run_v2(fg_cpu_pool *pool, float *x, const shape *s)
{
    double inv_freq[MAX_HALF];
    inv_freq_of(s, inv_freq);
    run_rows(pool, x, s, v2_rows, inv_freq, NULL);
}

static void run_table(fg_cpu_pool *pool, float *x, const shape *s, fg_cpu_range_fn fn)
{
    static float cs[2 * MAX_TABLE];
    double inv_freq[MAX_HALF];
    int half = s->head_dim / 2;
    inv_freq_of(s, inv_freq);
    for (int p = 0; p < s->seq; p++)
        for (int i = 0; i < half; i++) {
            double a = (double)p * inv_freq[i];
            cs[(size_t)p * half + i] = (float)cos(a);
            cs[(size_t)(s->seq + p) * half + i] = (float)sin(a);
        }
    run_rows(pool, x, s, fn, inv_freq, cs);
}

static void run_v3(fg_cpu_pool *pool, float *x, const shape *s) { run_table(pool, x, s, v3_rows); }
static void run_v4(fg_cpu_pool *pool, float *x, const shape *s) { run_table(pool, x, s, v4_rows); }

/* what rope_forward calls for a rope_scaling table: the product's table path */
static void run_product(fg_cpu_pool *pool, float *x, const shape *s)
{
    double inv_freq[MAX_HALF];
    inv_freq_of(s, inv_freq);
    fg_cpu_rope_freq(pool, 0, s->rows, s->seq, 0, s->heads, s->head_dim, s->ld, inv_freq, x);
}

typedef void (*lab_rope_fn)(fg_cpu_pool *pool, float *x, const shape *s);
static const struct {
    const char *name;
    lab_rope_fn fn;
} versions[] = {
    { "v0 reference", run_v0 },
    { "v1 pow per row (ef1b393)", run_v1 },
    { "v2 v1 + frequency table", run_v2 },
    { "v3 v2 + cos/sin table", run_v3 },
    { "v4 v3 + AVX-512 clones", run_v4 },
    { "kernels/cpu rope now", run_now },
    { "kernels/cpu rope_freq", run_product },
};
#define NVERSIONS (sizeof versions / sizeof versions[0])

static int fits(const shape *s)
{
    return s->head_dim / 2 <= MAX_HALF && (size_t)s->seq * (size_t)(s->head_dim / 2) <= MAX_TABLE;
}

static int check(fg_cpu_pool *pool)
{
    /* rows, seq, heads rotated, head_dim, ld: the tiny Llama's qkv (4 + 2 of 8, v after),
     * SmolLM-135M's (9 + 3 of 64), odd halves, one row */
    const shape shapes[] = { {64, 16, 6, 8, 64}, {512, 256, 12, 64, 960}, {45, 9, 3, 10, 40},
                             {7, 7, 1, 2, 3}, {2, 2, 5, 128, 640} };
    int bad = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const shape *s = &shapes[k];
        size_t n = (size_t)s->rows * s->ld;
        float *in = lab_alloc(n), *ref = lab_alloc(n), *x = lab_alloc(n);
        lab_fill(in, n, 7 + (uint32_t)k);
        memcpy(ref, in, n * sizeof *ref);
        v0(ref, s);
        for (size_t v = 1; v < NVERSIONS; v++) {
            memcpy(x, in, n * sizeof *x);
            versions[v].fn(pool, x, s);
            size_t d = lab_first_diff(x, ref, n);
            if (d < n) {
                printf("FAIL %s, rows %d seq %d heads %d D %d: x[%zu] = %.9g, reference %.9g\n",
                       versions[v].name, s->rows, s->seq, s->heads, s->head_dim, d,
                       (double)x[d], (double)ref[d]);
                bad = 1;
            }
        }
        if (memcmp(in, ref, n * sizeof *in) == 0) { /* a reference that turns nothing */
            printf("FAIL: the reference left shape %zu as it was\n", k);
            bad = 1;
        }
        free(in), free(ref), free(x);
    }
    if (!bad)
        printf("rope lab: %zu versions x %zu shapes equal the reference bit for bit\n",
               NVERSIONS - 1, sizeof shapes / sizeof shapes[0]);
    return bad;
}

static int time_main(fg_cpu_pool *pool, int argc, char **argv)
{
    shape s = {4096, 256, 12, 64, 960}; /* SmolLM-135M's q and k, batch 16 of 256 */
    if (argc >= 4) {
        s.rows = atoi(argv[0]), s.seq = atoi(argv[1]), s.heads = atoi(argv[2]);
        s.head_dim = atoi(argv[3]);
        s.ld = s.heads * s.head_dim + s.heads / 4 * s.head_dim; /* v after q, k: 3 of 12 */
    }
    if (s.rows < 1 || s.seq < 1 || s.heads < 1 || s.head_dim < 2 || s.head_dim % 2 || !fits(&s)) {
        fprintf(stderr, "rope lab: rows, seq, heads >= 1, an even head_dim <= 512, seq * "
                        "head_dim / 2 <= %d\n", MAX_TABLE);
        return 2;
    }
    enum { ROUNDS = 15 };
    size_t n = (size_t)s.rows * s.ld;
    float *x = lab_alloc(n);
    lab_fill(x, n, 1);
    static double t[NVERSIONS][ROUNDS];
    int calls = (int)(2e7 / ((double)s.rows * s.heads * s.head_dim)) + 1;
    for (int r = 0; r < ROUNDS; r++)
        for (size_t v = 1; v < NVERSIONS; v++) {
            double t0 = lab_now();
            for (int k = 0; k < calls; k++)
                versions[v].fn(pool, x, &s);
            t[v][r] = (lab_now() - t0) / calls;
        }
    printf("rope lab: %d rows (seq %d) x %d heads of %d, %d threads; median of %d rounds of "
           "%d calls, the versions taking turns\n", s.rows, s.seq, s.heads, s.head_dim,
           fg_cpu_pool_threads(pool), ROUNDS, calls);
    for (size_t v = 1; v < NVERSIONS; v++) {
        double med = lab_median(t[v], ROUNDS);
        printf("  %-26s %9.1f us  (fastest %9.1f us)\n", versions[v].name, med * 1e6,
               t[v][0] * 1e6);
    }
    free(x);
    return 0;
}

int main(int argc, char **argv)
{
    return lab_main(argc, argv, "rope", "[rows seq heads head_dim]", check, time_main);
}
