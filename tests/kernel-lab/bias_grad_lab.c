/* Kernel lab: the bias gradient, dbias(cols) = the sum over rows (and spatial) of dy
 * (kernels/cpu/bias.c): after attention, the language models' largest op outside the gemms
 * (the mid GPT's 4 linear layers per block over 4096 rows: 3% of the step, perf).
 *
 *   version 0  reference: one column at a time, its rows in order, in double
 *   version 1  kernels/cpu/bias.c as of d8ca546: blocks of 256 columns, every row added to
 *              the block's double accumulators, columns on the pool; baseline ISA (SSE2: two
 *              doubles an instruction)
 *   version 2  version 1 compiled for AVX-512 / AVX2 as well (FG_CPU_VECTOR_CLONES)
 *              <- the winner, now kernels/cpu/bias.c: 4096 x 1536 8.5 -> 4.9 ms, 4096 x 384
 *              0.81 -> 0.16 ms (fastest rounds, 2 threads, load average 10)
 *   version 3  version 2 with blocks of 2048 columns (each row read once per chunk): no
 *              gain over version 2 under that load
 *   "kernels/cpu now": version 2 with each 16 columns' sums kept in registers through
 *              bands of 64 rows (the accumulators were read and written per row): the same
 *              in f32 here (768 x 512 and 4096 x 1536, Zen 4); 1.5x for bf16 dy read in
 *              place, which the lab does not time (perf on the small GPT, bench_lm_bf16.sh)
 *
 * Each column's sum keeps its row order in every version (the vectors run across columns),
 * so every version must equal the reference bit for bit.
 *
 *   bias_grad_lab check                  (ctest kernel_lab.bias_grad)
 *   bias_grad_lab time [rows cols]       median us per call of each version */
#include "lab.h" /* first: it sets _POSIX_C_SOURCE */

#include "cpu_kernels.h"

typedef struct bias_job {
    float *out;
    const float *in;
    int rows, cols;
} bias_job;

static void v0(float *db, const float *dy, int rows, int cols)
{
    for (int j = 0; j < cols; j++) {
        double acc = 0.0;
        for (int r = 0; r < rows; r++)
            acc += (double)dy[(size_t)r * cols + j];
        db[j] = (float)acc;
    }
}

/* version 1's loop (spatial 1), inlined so that each clone compiles it for its target */
static inline __attribute__((always_inline)) void cols_body(void *p, size_t b, size_t e,
                                                             size_t block)
{
    bias_job *c = p;
    size_t rows = (size_t)c->rows, cols = (size_t)c->cols;
    double acc[2048];
    for (size_t c0 = b; c0 < e; c0 += block) {
        size_t c1 = c0 + block < e ? c0 + block : e;
        for (size_t j = c0; j < c1; j++)
            acc[j - c0] = 0.0;
        for (size_t r = 0; r < rows; r++) {
            const float *dy = c->in + r * cols;
            for (size_t j = c0; j < c1; j++)
                acc[j - c0] += (double)dy[j];
        }
        for (size_t j = c0; j < c1; j++)
            c->out[j] = (float)acc[j - c0];
    }
}

static void v1_cols(void *p, size_t b, size_t e) { cols_body(p, b, e, 256); }
LAB_CLONES static void v2_cols(void *p, size_t b, size_t e) { cols_body(p, b, e, 256); }
LAB_CLONES static void v3_cols(void *p, size_t b, size_t e) { cols_body(p, b, e, 2048); }

typedef void (*lab_bias_fn)(fg_cpu_pool *pool, float *db, const float *dy, int rows, int cols);

static void run_v0(fg_cpu_pool *pool, float *db, const float *dy, int rows, int cols)
{
    (void)pool;
    v0(db, dy, rows, cols);
}

static void run_cols(fg_cpu_pool *pool, float *db, const float *dy, int rows, int cols,
                     fg_cpu_range_fn fn)
{
    bias_job j = {db, dy, rows, cols};
    size_t grain = FG_CPU_GRAIN / (size_t)rows;
    fg_cpu_parallel_for(pool, (size_t)cols, grain ? grain : 1, 16, fn, &j);
}

static void run_v1(fg_cpu_pool *pool, float *db, const float *dy, int rows, int cols)
{
    run_cols(pool, db, dy, rows, cols, v1_cols);
}

static void run_v2(fg_cpu_pool *pool, float *db, const float *dy, int rows, int cols)
{
    run_cols(pool, db, dy, rows, cols, v2_cols);
}

static void run_v3(fg_cpu_pool *pool, float *db, const float *dy, int rows, int cols)
{
    run_cols(pool, db, dy, rows, cols, v3_cols);
}

static void run_product(fg_cpu_pool *pool, float *db, const float *dy, int rows, int cols)
{
    fg_cpu_bias_grad(pool, db, dy, rows, cols, 1, 0);
}

static const struct {
    const char *name;
    lab_bias_fn fn;
} versions[] = {
    { "v0 reference", run_v0 },
    { "v1 column blocks", run_v1 },
    { "v2 v1 + AVX-512 clones", run_v2 },
    { "v3 v2, 2048-column blocks", run_v3 },
    { "kernels/cpu now", run_product },
};
#define NVERSIONS (sizeof versions / sizeof versions[0])

static int check(fg_cpu_pool *pool)
{
    const int shapes[][2] = { {4096, 384}, {4096, 1536}, {768, 512}, {37, 1001}, {1, 3} };
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        float *dy = lab_alloc((size_t)rows * cols), *ref = lab_alloc((size_t)cols);
        float *db = lab_alloc((size_t)cols);
        lab_fill(dy, (size_t)rows * cols, 41 + (uint32_t)s);
        v0(ref, dy, rows, cols);
        for (size_t v = 1; v < NVERSIONS; v++) {
            memset(db, 0xff, (size_t)cols * sizeof *db);
            versions[v].fn(pool, db, dy, rows, cols);
            size_t d = lab_first_diff(db, ref, (size_t)cols);
            if (d < (size_t)cols) {
                printf("FAIL %s, %d x %d: dbias[%zu] = %.9g, reference %.9g\n",
                       versions[v].name, rows, cols, d, (double)db[d], (double)ref[d]);
                bad = 1;
            }
        }
        free(dy), free(ref), free(db);
    }
    if (!bad)
        printf("bias_grad lab: %zu versions x %zu shapes equal the reference bit for bit\n",
               NVERSIONS - 1, sizeof shapes / sizeof shapes[0]);
    return bad;
}

static void time_versions(fg_cpu_pool *pool, int rows, int cols)
{
    enum { ROUNDS = 21 };
    float *dy = lab_alloc((size_t)rows * cols), *db = lab_alloc((size_t)cols);
    lab_fill(dy, (size_t)rows * cols, 1);
    static double t[NVERSIONS][ROUNDS];
    int calls = (int)(2e7 / ((double)rows * cols)) + 1;
    for (int r = 0; r < ROUNDS; r++)
        for (size_t v = 1; v < NVERSIONS; v++) {
            double t0 = lab_now();
            for (int k = 0; k < calls; k++)
                versions[v].fn(pool, db, dy, rows, cols);
            t[v][r] = (lab_now() - t0) / calls;
        }
    printf("bias_grad lab: %d rows x %d, %d threads; median of %d rounds of %d calls, the "
           "versions taking turns\n", rows, cols, fg_cpu_pool_threads(pool), ROUNDS, calls);
    for (size_t v = 1; v < NVERSIONS; v++) {
        double med = lab_median(t[v], ROUNDS);
        printf("  %-24s %8.1f us  (fastest %8.1f us)  %6.1f GB/s\n", versions[v].name,
               med * 1e6, t[v][0] * 1e6, 4.0 * rows * (double)cols / t[v][0] * 1e-9);
    }
    free(dy), free(db);
}

static int time_main(fg_cpu_pool *pool, int argc, char **argv)
{
    int rows = argc >= 2 ? atoi(argv[0]) : 4096, cols = argc >= 2 ? atoi(argv[1]) : 1536;
    if (rows < 1 || cols < 1) {
        fprintf(stderr, "bias_grad lab: rows and cols must be >= 1\n");
        return 2;
    }
    time_versions(pool, rows, cols);
    return 0;
}

int main(int argc, char **argv)
{
    return lab_main(argc, argv, "bias_grad", "[rows cols]", check, time_main);
}
