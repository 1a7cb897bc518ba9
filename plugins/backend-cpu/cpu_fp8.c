/* gemm_fp8 (ABI 1.9) is not a CPU op: fp8 training exists for Hopper's tensor cores, and a
 * CPU has no fp8 arithmetic to gain from. supports() answers no (cpu_ops.c), so the trainer
 * refuses [precision] name = fp8-mixed on this backend at setup naming the key; the entry,
 * reached only by a caller that skips that check, fails with the same news. */
#include "cpu_backend.h"

fg_status fg_cpu_op_gemm_fp8(void *state, void *queue, uint32_t ab_dtype, uint32_t c_dtype,
                             int trans_a, int trans_b, int m, int n, int k, const void *a,
                             int lda, const void *b, int ldb, float beta, void *c, int ldc,
                             const fg_fp8_gemm_args *f8, fg_error *err)
{
    (void)state, (void)queue, (void)ab_dtype, (void)c_dtype, (void)trans_a, (void)trans_b;
    (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)beta, (void)c;
    (void)ldc, (void)f8;
    return fg_error_set(err, FG_UNAVAILABLE, "cpu backend: gemm_fp8: fp8 gemms run on the "
                        "CUDA backend only (fp8 tensor cores, compute capability 8.9+)");
}
