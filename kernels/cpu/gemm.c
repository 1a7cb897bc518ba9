/* Matrix multiply: OpenBLAS single-threaded, partitioned across the plugin's pool.
 *
 * Why the pool owns the cores and not OpenBLAS: OpenBLAS's idle threads spin in
 * sched_yield for a long while after every gemm, so on a small machine they took cores
 * from the pool's bias, activation and optimizer sweeps between gemms (about 40% of the
 * MLP step's samples were in sched_yield). With OpenBLAS at one thread there is a single
 * set of threads; and the pool's claimed chunks keep a gemm moving on a busy machine: a
 * worker that is not scheduled leaves its chunks to the caller instead of holding the
 * whole gemm back, as a static split would.
 *
 * C is cut along its larger dimension into column or row blocks whose boundaries depend
 * only on the shape and the pool size; k is never split, so every element of C is one
 * single-threaded dot product in OpenBLAS's order.
 *
 * The bias of fg_cpu_gemm_bias is added after the product, in a pass over C's rows on the
 * pool (as bias.c's bias_add): the f32 product, then + bias, as gemm then bias_add did, so
 * fp32 results are bitwise unchanged. Measured against two alternatives (bench_gemm_bias, tests/bench/RESULTS.md):
 * adding the bias inside each block right after its sgemm was as fast on one thread but
 * 30-50 us slower over the MLP's three forward products on two; pre-filling C with the bias
 * and running sgemm with beta = 1 costs nothing but adds the bias before OpenBLAS's later
 * k-panels once k exceeds its panel depth (k >= 384 here): other roundings, other weights. */
#include <cblas.h>

#include "cpu_kernels.h"

/* Not declared by every cblas.h (netlib's has none); OpenBLAS always exports them. */
void openblas_set_num_threads(int num_threads);
char *openblas_get_corename(void);
char *openblas_get_config(void);

/* One block per thread: every block packs the shared operand again, and with two per
 * thread the MLP's gemms were no faster on a loaded machine (bench_backend_cpu, op minima). */
#define FG_CPU_GEMM_BLOCKS_PER_THREAD 1

typedef struct fg_cpu_gemm_args {
    int trans_a, trans_b, m, n, k;
    float alpha, beta;
    const float *a, *b;
    float *c;
    int lda, ldb, ldc;
    int by_rows; /* blocks are rows of C (else columns) */
} fg_cpu_gemm_args;

static void fg_cpu_sgemm(const fg_cpu_gemm_args *g, int m, int n, const float *a,
                         const float *b, float *c)
{
    cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                g->trans_b ? CblasTrans : CblasNoTrans, m, n, g->k, g->alpha, a, g->lda, b,
                g->ldb, g->beta, c, g->ldc);
}

/* The bias pass: rows [lo, hi) of c += bias, rows ldc apart. */
typedef struct fg_cpu_gemm_bias_pass {
    float *c;
    const float *bias;
    int n, ldc;
} fg_cpu_gemm_bias_pass;

FG_CPU_VECTOR_CLONES static void fg_cpu_gemm_add_bias(void *p, size_t lo, size_t hi)
{
    const fg_cpu_gemm_bias_pass *g = p;
    for (size_t i = lo; i < hi; i++) {
        float *restrict row = g->c + i * (size_t)g->ldc;
        const float *restrict b = g->bias;
        for (int j = 0; j < g->n; j++)
            row[j] += b[j];
    }
}

/* Rows [lo, hi) of C are rows of op(A); columns are columns of op(B). */
static void fg_cpu_gemm_block(void *p, size_t lo, size_t hi)
{
    const fg_cpu_gemm_args *g = p;
    if (g->by_rows) {
        const float *a = g->trans_a ? g->a + lo : g->a + lo * (size_t)g->lda;
        fg_cpu_sgemm(g, (int)(hi - lo), g->n, a, g->b, g->c + lo * (size_t)g->ldc);
    } else {
        const float *b = g->trans_b ? g->b + lo * (size_t)g->ldb : g->b + lo;
        fg_cpu_sgemm(g, g->m, (int)(hi - lo), g->a, b, g->c + lo);
    }
}

static void fg_cpu_gemm_scale(int m, int n, float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            c[(size_t)i * (size_t)ldc + (size_t)j] =
                beta == 0.0f ? 0.0f : beta * c[(size_t)i * (size_t)ldc + (size_t)j];
}

void fg_cpu_gemm(fg_cpu_pool *pool, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc)
{
    if (m == 0 || n == 0)
        return;
    if (k == 0) { /* C = beta * C; BLAS would reject the leading dimensions */
        fg_cpu_gemm_scale(m, n, beta, c, ldc);
        return;
    }
    fg_cpu_gemm_args g = { trans_a, trans_b, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc,
                           m > n };
    size_t dim = g.by_rows ? (size_t)m : (size_t)n;
    double flops = 2.0 * (double)m * (double)n * (double)k;
    int threads = fg_cpu_pool_threads(pool);
    if (threads < 2 || flops < FG_CPU_GEMM_SPLIT_FLOPS || dim < 2 * FG_CPU_GEMM_ALIGN) {
        fg_cpu_gemm_block(&g, 0, dim);
        return;
    }
    size_t blocks = (size_t)threads * FG_CPU_GEMM_BLOCKS_PER_THREAD;
    size_t grain = (dim + blocks - 1) / blocks;
    fg_cpu_parallel_for(pool, dim, grain, FG_CPU_GEMM_ALIGN, fg_cpu_gemm_block, &g);
}

void fg_cpu_gemm_via(const fg_cpu_gemm_hook *hook, int slot, fg_cpu_pool *pool, int trans_a,
                     int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
    if (hook && hook->run)
        hook->run(hook->ctx, slot, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        fg_cpu_gemm(pool, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void fg_cpu_gemm_bias(fg_cpu_pool *pool, int trans_a, int trans_b, int m, int n, int k,
                      const float *a, int lda, const float *b, int ldb, const float *bias,
                      float *c, int ldc)
{
    fg_cpu_gemm(pool, trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    if (!bias || m == 0 || n == 0)
        return;
    fg_cpu_gemm_bias_pass g = { c, bias, n, ldc };
    size_t grain = fg_cpu_stream_grain(pool) / (size_t)n; /* as bias.c's pass */
    fg_cpu_parallel_for(pool, (size_t)m, grain ? grain : 1, 1, fg_cpu_gemm_add_bias, &g);
}

void fg_cpu_gemm_init(void)
{
    openblas_set_num_threads(1);
}

const char *fg_cpu_openblas_corename(void)
{
    const char *core = openblas_get_corename();
    return core ? core : "unknown";
}

const char *fg_cpu_openblas_config(void)
{
    const char *config = openblas_get_config();
    return config ? config : "unknown";
}
