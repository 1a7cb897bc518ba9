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
 * k-panels once k exceeds its panel depth (k >= 384 here): other roundings, other weights.
 * Where k fits in one panel, though, OpenBLAS's kernel adds its whole f32 dot product to C in
 * one rounding, so C = bias, then C += P (beta 1) is fl(P + bias), gemm then bias_add's bits,
 * and it saves OpenBLAS's zeroing pass over C (sgemm_beta, beta 0) and the bias pass's read
 * and write of C. The panel depth is OpenBLAS's (GEMM_Q, per core type) and not exported:
 * fg_cpu_gemm_init finds it by running both forms (fg_cpu_gemm_probe_panel), and a k above
 * what it found keeps the two passes. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

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
    const float *bias; /* C = bias before the product (beta 1), or NULL */
} fg_cpu_gemm_args;

/* The largest k OpenBLAS runs as one k panel: 0 until fg_cpu_gemm_init has probed it. */
static int fg_cpu_gemm_panel_k;

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

/* C's rows [0, m), columns [0, n) = bias */
static void fg_cpu_gemm_fill_bias(float *c, int ldc, const float *bias, int m, int n)
{
    for (int i = 0; i < m; i++)
        memcpy(c + (size_t)i * (size_t)ldc, bias, (size_t)n * sizeof *c);
}

/* Rows [lo, hi) of C are rows of op(A); columns are columns of op(B). */
static void fg_cpu_gemm_block(void *p, size_t lo, size_t hi)
{
    const fg_cpu_gemm_args *g = p;
    if (g->bias && g->by_rows)
        fg_cpu_gemm_fill_bias(g->c + lo * (size_t)g->ldc, g->ldc, g->bias, (int)(hi - lo), g->n);
    else if (g->bias)
        fg_cpu_gemm_fill_bias(g->c + lo, g->ldc, g->bias + lo, g->m, (int)(hi - lo));
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

/* C = alpha op(A) op(B) + beta C, or with bias: C = bias, then C += op(A) op(B) (alpha 1,
 * beta 1) block by block. */
static void fg_cpu_gemm_run(fg_cpu_pool *pool, int trans_a, int trans_b, int m, int n, int k,
                            float alpha, const float *a, int lda, const float *b, int ldb,
                            float beta, float *c, int ldc, const float *bias)
{
    fg_cpu_gemm_args g = { trans_a, trans_b, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc,
                           m > n, bias };
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
    if (m == 0 || n == 0)
        return;
    if (k == 0) { /* C = beta * C; BLAS would reject the leading dimensions */
        fg_cpu_gemm_scale(m, n, beta, c, ldc);
        return;
    }
    fg_cpu_gemm_run(pool, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL);
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
    if (bias && m > 0 && n > 0 && k > 0 && k <= fg_cpu_gemm_panel_k) {
        fg_cpu_gemm_run(pool, trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, c, ldc,
                        bias);
        return;
    }
    fg_cpu_gemm(pool, trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    if (!bias || m == 0 || n == 0)
        return;
    fg_cpu_gemm_bias_pass g = { c, bias, n, ldc };
    size_t grain = fg_cpu_stream_grain(pool) / (size_t)n; /* as bias.c's pass */
    fg_cpu_parallel_for(pool, (size_t)m, grain ? grain : 1, 1, fg_cpu_gemm_add_bias, &g);
}

/* Whether C = bias, C += A B^T gives gemm then bias_add's bits at this k (128 x 128 x k: past
 * OpenBLAS's small-matrix kernels; a bias of 1000 makes a second k panel show in nearly every
 * element). a (128, k), b (128, k), c (2, 128, 128). */
static int fg_cpu_gemm_one_panel(int k, const float *a, const float *b, const float *bias,
                                 float *c)
{
    enum { S = 128 };
    float *two = c + S * S;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, k, 1.0f, a, k, b, k, 0.0f, two,
                S);
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++)
            two[i * S + j] += bias[j];
    fg_cpu_gemm_fill_bias(c, S, bias, S, S);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, k, 1.0f, a, k, b, k, 1.0f, c, S);
    return memcmp(c, two, S * S * sizeof *c) == 0;
}

/* The largest k up to max for which the one-panel form holds (OpenBLAS splits k above its
 * GEMM_Q, so the forms agree up to it and not after): a bisection, 0 if k = 1 fails or the
 * buffers cannot be had. */
int fg_cpu_gemm_probe_panel(int max)
{
    enum { S = 128 };
    float *buf = malloc(((size_t)2 * S * (size_t)max + 2 * S * S + S) * sizeof *buf);
    if (!buf)
        return 0;
    float *a = buf, *b = a + (size_t)S * max, *c = b + (size_t)S * max, *bias = c + 2 * S * S;
    uint32_t x = 12345;
    for (size_t i = 0; i < (size_t)2 * S * (size_t)max; i++) {
        x = x * 1664525u + 1013904223u;
        a[i] = (float)(x >> 8) * 0x1.0p-24f - 0.5f;
    }
    for (int j = 0; j < S; j++)
        bias[j] = 1000.0f + (float)j * 0.37f;
    int lo = 0, hi = max + 1; /* lo holds (or is 0), hi fails (or is past max) */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (fg_cpu_gemm_one_panel(mid, a, b, bias, c))
            lo = mid;
        else
            hi = mid;
    }
    free(buf);
    return lo;
}

void fg_cpu_gemm_init(void)
{
    openblas_set_num_threads(1);
    fg_cpu_gemm_panel_k = fg_cpu_gemm_probe_panel(FG_CPU_GEMM_PROBE_MAX_K);
}

int fg_cpu_gemm_bias_panel_k(void)
{
    return fg_cpu_gemm_panel_k;
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
