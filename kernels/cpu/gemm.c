/* Matrix multiply through OpenBLAS. It runs on the calling thread and uses OpenBLAS's own
 * threads; the plugin's pool stays idle meanwhile, so the two never oversubscribe. */
#include <cblas.h>

#include "cpu_kernels.h"

/* Not declared by every cblas.h (netlib's has none); OpenBLAS always exports it. */
void openblas_set_num_threads(int num_threads);

void fg_cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m == 0 || n == 0)
        return;
    if (k == 0) { /* C = beta * C; BLAS would reject the leading dimensions */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                c[(size_t)i * (size_t)ldc + (size_t)j] =
                    beta == 0.0f ? 0.0f : beta * c[(size_t)i * (size_t)ldc + (size_t)j];
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
}

void fg_cpu_gemm_set_threads(int threads)
{
    openblas_set_num_threads(threads);
}
