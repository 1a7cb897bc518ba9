/* gemm_fp8 (ABI 1.9) through cuBLASLt's fp8 matmul, Transformer Engine's delayed scaling:
 * each operand's scale from its amax history and its quantized copy in the queue's staging
 * buffer (kernels/cuda/fp8_quantize.cu), then one matmul with the operands' inverse scales
 * as CUBLASLT_MATMUL_DESC_A_SCALE_POINTER / B_SCALE_POINTER (device f32 scalars, the compute
 * type's) and C in bf16, f16 or f32.
 *
 * cuBLASLt's fp8 rules on Hopper (cublasLtMatmul, "FP8 kernels"): A transposed and B not
 * (TN), compute CUBLAS_COMPUTE_32F with an f32 scale type, not both operands E5M2, 16-byte
 * aligned pointers and leading dimensions. In cuda_gemm.c's mapping cuBLASLt's A is
 * fulgur's b and its B fulgur's a, so TN means a (m, k) and b (n, k) row-major: the
 * quantize pass writes each operand packed in that layout, transposing it when the call's
 * trans flag says otherwise, so every fp8 matmul is TN with lda = ldb = k. m, n and k must
 * be multiples of 16 (Transformer Engine's rule; the quantized copies then keep every row
 * 16-byte aligned); another shape is refused with FG_UNAVAILABLE, and the linear layer
 * runs that call in its activations' dtype instead. */
#include <string.h>

#include "cuda_backend.h"
#include "cuda_ops.h"

static size_t fg_cuda_round256(size_t n)
{
    return (n + 255) / 256 * 256;
}

static int fg_cuda_fp8_storable(uint32_t t)
{
    return t == FG_F32 || t == FG_F16 || t == FG_BF16;
}

static fg_status fg_cuda_fp8_shape(int m, int n, int k, fg_error *err)
{
    if (m % 16 == 0 && n % 16 == 0 && k % 16 == 0)
        return FG_OK;
    return fg_error_set(err, FG_UNAVAILABLE, "backend.cuda: gemm_fp8: m = %d, n = %d, k = %d: "
                        "cuBLASLt's fp8 gemm here needs each a multiple of 16", m, n, k);
}

/* One operand: its scale updated from the history (when asked), then quantized into dst as
 * (rows, k) packed; src is (rows, k) or, transposed, (k, rows), of ld. */
static cudaError_t fg_cuda_fp8_operand(cudaStream_t s, uint32_t type, const void *src, int rows,
                                       int k, int ld, int transposed, uint32_t format,
                                       float *scale, float *history, int update,
                                       const fg_fp8_gemm_args *f8, void *dst)
{
    cudaError_t e = cudaSuccess;
    if (update)
        e = fg_cu_fp8_scale_update(s, scale, history, f8->history_len, f8->amax_algo,
                                   f8->margin, (int)format);
    if (e == cudaSuccess)
        e = fg_cu_fp8_quantize(s, (int)type, src, transposed ? k : rows, transposed ? rows : k,
                               ld, transposed, scale, (int)format, dst,
                               update ? history : NULL);
    return e;
}

static fg_status fg_cuda_fp8_matmul(const fg_cuda_backend *be, fg_cuda_queue *q, int m, int n,
                                    int k, const void *a8, const void *b8, float beta, void *c,
                                    uint32_t ct, int ldc, const fg_fp8_gemm_args *f8,
                                    fg_error *err)
{
    fg_cuda_gemm_key key;
    memset(&key, 0, sizeof key);
    key.trans_a = 0; /* TN: see the top of this file */
    key.trans_b = 1;
    key.m = m;
    key.n = n;
    key.k = k;
    key.lda = k;
    key.ldb = k;
    key.ldc = ldc;
    key.a_type = f8->a_format;
    key.b_type = f8->b_format;
    key.c_type = ct;
    uintptr_t bits = (uintptr_t)c | (uintptr_t)a8 | (uintptr_t)b8;
    key.align = 16;
    while (key.align < 256 && !(bits & (key.align * 2 - 1)))
        key.align *= 2;
    if (bits & 15)
        return fg_error_set(err, FG_UNAVAILABLE, "backend.cuda: gemm_fp8: C at %p is not "
                            "16-byte aligned (cuBLASLt's fp8 gemm needs it)", c);
    fg_cuda_gemm_plan *p;
    fg_status st = fg_cuda_plan_find(be, q, &key, &p, err);
    if (st != FG_OK)
        return st;
    /* cuBLASLt's A is our b: its scale is b's 1/scale, and its B's a's */
    const float *sa = f8->b_scale + 1, *sb = f8->a_scale + 1;
    cublasStatus_t s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                      &sa, sizeof sa);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb,
                                           sizeof sb);
    float alpha = 1.0f;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmul(q->lt, p->op, &alpha, b8, p->a, a8, p->b, &beta, c, p->c, c, p->c,
                           &p->algo, q->lt_workspace, FG_CUDA_LT_WORKSPACE, q->stream);
    return s == CUBLAS_STATUS_SUCCESS ? FG_OK : fg_cuda_lt_fail(err, s, "gemm_fp8");
}

fg_status fg_cuda_op_gemm_fp8(void *state, void *queue, uint32_t ab_dtype, uint32_t c_dtype,
                              int trans_a, int trans_b, int m, int n, int k, const void *a,
                              int lda, const void *b, int ldb, float beta, void *c, int ldc,
                              const fg_fp8_gemm_args *f8, fg_error *err)
{
    const fg_cuda_backend *be = state;
    fg_status st = fg_cuda_enter(queue, "gemm_fp8", err);
    if (st != FG_OK)
        return st;
    if (!fg_cuda_fp8_storable(ab_dtype) || !fg_cuda_fp8_storable(c_dtype))
        return fg_error_set(err, FG_UNAVAILABLE, "backend.cuda: gemm_fp8: %s operands -> %s: "
                            "this backend stores f32, f16 and bf16",
                            fg_dtype_name((fg_dtype)ab_dtype), fg_dtype_name((fg_dtype)c_dtype));
    if (!fg_cuda_has_fp8(be))
        return fg_error_set(err, FG_UNAVAILABLE, "backend.cuda: gemm_fp8: fp8 tensor cores "
                            "need compute capability 8.9 or later");
    if ((st = fg_cuda_fp8_shape(m, n, k, err)) != FG_OK)
        return st;
    fg_cuda_queue *q = queue;
    size_t a_bytes = fg_cuda_round256((size_t)m * (size_t)k);
    if ((st = fg_cuda_stage(q, a_bytes + (size_t)n * (size_t)k, "gemm_fp8", err)) != FG_OK)
        return st;
    char *a8 = q->stage, *b8 = (char *)q->stage + a_bytes;
    cudaError_t e = fg_cuda_fp8_operand(q->stream, ab_dtype, a, m, k, lda, trans_a,
                                        f8->a_format, f8->a_scale, f8->a_history, f8->update_a,
                                        f8, a8);
    if (e == cudaSuccess)
        e = fg_cuda_fp8_operand(q->stream, ab_dtype, b, n, k, ldb, !trans_b, f8->b_format,
                                f8->b_scale, f8->b_history, f8->update_b, f8, b8);
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "gemm_fp8 (quantizing the operands)");
    return fg_cuda_fp8_matmul(be, q, m, n, k, a8, b8, beta, c, c_dtype, ldc, f8, err);
}

int fg_cuda_has_fp8(const fg_cuda_backend *be)
{
    for (int d = 0; d < be->device_count; d++)
        if (be->dev[d].usable && be->dev[d].cc_major * 10 + be->dev[d].cc_minor < 89)
            return 0;
    return be->device_count > 0;
}
