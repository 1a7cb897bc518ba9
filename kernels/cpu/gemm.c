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
 * The bias epilogue (fg_cpu_gemm_bias) adds the bias to each block right after its sgemm,
 * while the block is in cache: no second pass over C and no second trip through the pool.
 * It rounds as gemm then bias_add did (the f32 product, then + bias), so fp32 results are
 * bitwise unchanged. Pre-filling C with the bias and running sgemm with beta = 1 was up to
 * 4% faster per block (128x256x256, one thread) but adds the bias before OpenBLAS's later
 * k-panels once k exceeds its panel depth (k >= 384 here): other roundings, other weights. */
#include <cblas.h>

#include "cpu_kernels.h"

/* Not declared by every cblas.h (netlib's has none); OpenBLAS always exports it. */
void openblas_set_num_threads(int num_threads);

/* Below this many FLOPs (2mnk) a gemm runs on the calling thread: waking a worker costs
 * more than it saves. */
#define FG_CPU_GEMM_SPLIT_FLOPS (1u << 21)
/* Block boundaries are multiples of this (OpenBLAS's AVX-512 sgemm register tile is 16
 * wide). One block per thread: every block packs the shared operand again, and with two per
 * thread the MLP's gemms were no faster on a loaded machine (bench_backend_cpu, op minima). */
#define FG_CPU_GEMM_ALIGN 16
#define FG_CPU_GEMM_BLOCKS_PER_THREAD 1

typedef struct fg_cpu_gemm_args {
    int trans_a, trans_b, m, n, k;
    float alpha, beta;
    const float *a, *b;
    float *c;
    int lda, ldb, ldc;
    const float *bias; /* (n), added after the product; NULL: none */
    int by_rows; /* blocks are rows of C (else columns) */
} fg_cpu_gemm_args;

static void fg_cpu_sgemm(const fg_cpu_gemm_args *g, int m, int n, const float *a,
                         const float *b, float *c)
{
    cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                g->trans_b ? CblasTrans : CblasNoTrans, m, n, g->k, g->alpha, a, g->lda, b,
                g->ldb, g->beta, c, g->ldc);
}

/* c(m, n) += bias(n) on every row */
FG_CPU_VECTOR_CLONES static void fg_cpu_gemm_add_bias(int m, int n, const float *bias, float *c,
                                                      int ldc)
{
    for (int i = 0; i < m; i++) {
        float *restrict row = c + (size_t)i * (size_t)ldc;
        const float *restrict b = bias;
        for (int j = 0; j < n; j++)
            row[j] += b[j];
    }
}

/* Rows [lo, hi) of C are rows of op(A); columns are columns of op(B). */
static void fg_cpu_gemm_block(void *p, size_t lo, size_t hi)
{
    const fg_cpu_gemm_args *g = p;
    if (g->by_rows) {
        const float *a = g->trans_a ? g->a + lo : g->a + lo * (size_t)g->lda;
        float *c = g->c + lo * (size_t)g->ldc;
        fg_cpu_sgemm(g, (int)(hi - lo), g->n, a, g->b, c);
        if (g->bias)
            fg_cpu_gemm_add_bias((int)(hi - lo), g->n, g->bias, c, g->ldc);
    } else {
        const float *b = g->trans_b ? g->b + lo * (size_t)g->ldb : g->b + lo;
        fg_cpu_sgemm(g, g->m, (int)(hi - lo), g->a, b, g->c + lo);
        if (g->bias)
            fg_cpu_gemm_add_bias(g->m, (int)(hi - lo), g->bias + lo, g->c + lo, g->ldc);
    }
}

static void fg_cpu_gemm_scale(int m, int n, float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            c[(size_t)i * (size_t)ldc + (size_t)j] =
                beta == 0.0f ? 0.0f : beta * c[(size_t)i * (size_t)ldc + (size_t)j];
}

static void fg_cpu_gemm_run(fg_cpu_pool *pool, int trans_a, int trans_b, int m, int n, int k,
                            float alpha, const float *a, int lda, const float *b, int ldb,
                            float beta, const float *bias, float *c, int ldc)
{
    if (m == 0 || n == 0)
        return;
    if (k == 0) { /* C = beta * C; BLAS would reject the leading dimensions */
        fg_cpu_gemm_scale(m, n, beta, c, ldc);
        if (bias)
            fg_cpu_gemm_add_bias(m, n, bias, c, ldc);
        return;
    }
    fg_cpu_gemm_args g = { trans_a, trans_b, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc,
                           bias, m > n };
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

void fg_cpu_gemm(fg_cpu_pool *pool, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc)
{
    fg_cpu_gemm_run(pool, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, NULL, c, ldc);
}

void fg_cpu_gemm_bias(fg_cpu_pool *pool, int trans_a, int trans_b, int m, int n, int k,
                      const float *a, int lda, const float *b, int ldb, const float *bias,
                      float *c, int ldc)
{
    fg_cpu_gemm_run(pool, trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, bias, c, ldc);
}

void fg_cpu_gemm_init(void)
{
    openblas_set_num_threads(1);
}
