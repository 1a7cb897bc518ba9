/* gemm through oneDNN's matmul (gemm_dnnl.c): bf16 A and B on CPUs with avx512_bf16, or
 * f32 A and B on any CPU; products accumulated in f32, scaled by alpha, the bias (optional)
 * and beta C added to the accumulator, and one rounding into C (bf16 or f32). Built only
 * with oneDNN (FG_CPU_WITH_DNNL). */
#ifndef FG_CPU_GEMM_DNNL_H
#define FG_CPU_GEMM_DNNL_H

#include "cpu_kernels.h"

/* A matmul's primitives, cached by shape: one per queue (a queue is driven by one host
 * thread at a time; its pool pieces look the cache up under its lock). */
typedef struct fg_cpu_dnnl_gemm fg_cpu_dnnl_gemm;

/* One product, C = alpha op(A) op(B) + bias + beta C. Types are FG_CPU_F32 / FG_CPU_BF16
 * (half.h); a and b have ab_type, bias has bias_type (NULL: none); beta 0: C is not read. */
typedef struct fg_cpu_mm {
    int trans_a, trans_b, m, n, k;
    const void *a, *b, *bias;
    void *c;
    int lda, ldb, ldc;
    int c_type, bias_type;
    float beta;
    int ab_type;
    float alpha;
} fg_cpu_mm;

/* NULL when oneDNN cannot make a CPU engine. */
fg_cpu_dnnl_gemm *fg_cpu_dnnl_gemm_create(void);
void fg_cpu_dnnl_gemm_destroy(fg_cpu_dnnl_gemm *g);

#define FG_CPU_DNNL_NONE (-1)   /* no primitive for this product; nothing was written */
#define FG_CPU_DNNL_FAILED (-2) /* oneDNN failed while running it; C is undefined */

/* Runs p, cut into blocks of C's rows (or columns, for a short C) across the pool, oneDNN
 * at one OpenMP thread inside each block: the pool owns the cores. A shape's primitives are
 * made on its first call and reused. Returns 0, FG_CPU_DNNL_NONE (the caller computes it
 * another way) or FG_CPU_DNNL_FAILED. */
int fg_cpu_dnnl_gemm_run(fg_cpu_dnnl_gemm *g, fg_cpu_pool *pool, const fg_cpu_mm *p);

#endif
