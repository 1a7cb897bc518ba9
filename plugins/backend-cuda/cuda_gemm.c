/* gemm through cuBLASLt. The ABI's row-major C(m,n) = alpha op(A) op(B) + beta C is the
 * column-major C^T(n,m) = alpha op(B)^T op(A)^T + beta C^T, so cuBLASLt's A is our b and
 * its B our a, with the same transposes. fp32 runs with CUBLAS_COMPUTE_32F (no TF32
 * unless allow_tf32); f16/bf16 operands accumulate in f32 with C in their type or f32.
 * Descriptors and the algorithm are made once per shape and queue (a small plan cache),
 * so a step allocates nothing and asks no heuristic. Other mixes of element types go
 * through f32 copies in the queue's staging buffer.
 *
 * gemm_bias (ABI 1.2) is the same matmul with cuBLASLt's BIAS epilogue: the bias vector
 * (its n values are the rows of the column-major D) is added to the f32 accumulator before
 * D is rounded once. The epilogue and the bias type are part of the plan; the bias pointer
 * is set on the descriptor at each call. A bias whose type is not D's goes through f32
 * copies, as other type mixes do.
 *
 * gemm_epilogue (ABI 1.5) maps fulgur's epilogues onto cuBLASLt's through the same
 * transposition: D (n x m, column-major) is C^T, so a vector along fulgur's n columns lies
 * along D's rows and one along fulgur's m rows along D's columns.
 *   FG_EPI_BIAS -> CUBLASLT_EPILOGUE_BIAS (bias of D's n rows).
 *   FG_EPI_GELU_AUX_BIAS -> GELU_AUX_BIAS: aux is a second D (n x m, ld ldaux) holding the
 *     GELU's input; cuBLASLt's GELU is the tanh approximation (FG_ACT_GELU).
 *   FG_EPI_DGELU_BGRAD -> DGELU_BGRAD: D = product * gelu'(aux); the bias gradient sums D
 *     over its columns, i.e. over fulgur's m rows: n values.
 *   FG_EPI_BGRADB -> BGRADB: sums cuBLASLt's B, fulgur's a, over k: m values (D's columns).
 * cublasLt.h: the aux ld must be a multiple of 8, aux has D's type, and a bias gradient has
 * the output's type. Where one of these does not hold (an f32 bias gradient of a bf16 D, an
 * odd ldaux, a type mix, k = 0), the tail runs as fulgur's own kernels after a plain (or
 * narrower epilogue) matmul: the same maths, the separate ops' roundings. cuBLASLt
 * overwrites a bias gradient, so accumulate writes it into the staging buffer and adds it. */
#include <string.h>

#include "cuda_backend.h"

static cudaDataType_t fg_cuda_data_type(uint32_t t)
{
    switch (t) {
    case FG_F16: return CUDA_R_16F;
    case FG_BF16: return CUDA_R_16BF;
    case FG_F8E4M3: return CUDA_R_8F_E4M3; /* gemm_fp8's operands (cuda_gemm_fp8.c) */
    case FG_F8E5M2: return CUDA_R_8F_E5M2;
    default: return CUDA_R_32F;
    }
}

/* Largest power of two up to 256 (cuBLASLt's default preference) dividing every operand's
 * address: the preference then excludes no algorithm these pointers could run. */
static uint32_t fg_cuda_alignment(const void *a, const void *b, const void *c)
{
    uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    uint32_t align = 256;
    while (align > 1 && (bits & (align - 1)))
        align >>= 1;
    return align;
}

/* A matmul's epilogue: cuBLASLt's value, its vector (the bias, or the bias gradient it
 * writes) and the GELU epilogues' aux matrix. */
typedef struct fg_cuda_epi {
    uint32_t epilogue; /* cublasLtEpilogue_t */
    const void *bias;
    uint32_t bias_type; /* fulgur dtype; 0: no vector */
    const void *aux;
    int ldaux;
} fg_cuda_epi;

static int fg_cuda_epi_has_aux(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU_BGRAD ||
           e == CUBLASLT_EPILOGUE_DGELU;
}

static void fg_cuda_plan_release(fg_cuda_gemm_plan *p)
{
    if (!p->valid)
        return;
    cublasLtMatrixLayoutDestroy(p->a);
    cublasLtMatrixLayoutDestroy(p->b);
    cublasLtMatrixLayoutDestroy(p->c);
    cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

void fg_cuda_gemm_plans_destroy(fg_cuda_queue *q)
{
    for (int i = 0; i < FG_CUDA_GEMM_PLANS; i++)
        fg_cuda_plan_release(&q->gemm[i]);
}

static cublasStatus_t fg_cuda_layout_batches(cublasLtMatrixLayout_t l, int32_t batch,
                                             int32_t stride)
{
    int64_t offset = stride;
    cublasStatus_t s = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                        &batch, sizeof batch);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &offset, sizeof offset);
    return s;
}

static cublasStatus_t fg_cuda_plan_layouts(fg_cuda_gemm_plan *p)
{
    const fg_cuda_gemm_key *k = &p->key;
    /* cuBLASLt's A = our b: stored (k x n) row-major, i.e. (n x k) column-major, or
     * transposed; its B = our a likewise; C is (n x m) column-major with ld ldc. */
    uint64_t a_rows = k->trans_b ? (uint64_t)k->k : (uint64_t)k->n;
    uint64_t a_cols = k->trans_b ? (uint64_t)k->n : (uint64_t)k->k;
    uint64_t b_rows = k->trans_a ? (uint64_t)k->m : (uint64_t)k->k;
    uint64_t b_cols = k->trans_a ? (uint64_t)k->k : (uint64_t)k->m;
    cublasStatus_t s = cublasLtMatrixLayoutCreate(&p->a, fg_cuda_data_type(k->b_type), a_rows,
                                                  a_cols, k->ldb);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&p->b, fg_cuda_data_type(k->a_type), b_rows, b_cols,
                                       k->lda);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&p->c, fg_cuda_data_type(k->c_type), (uint64_t)k->n,
                                       (uint64_t)k->m, k->ldc);
    if (s == CUBLAS_STATUS_SUCCESS && k->batch > 1)
        s = fg_cuda_layout_batches(p->a, k->batch, k->stride_b);
    if (s == CUBLAS_STATUS_SUCCESS && k->batch > 1)
        s = fg_cuda_layout_batches(p->b, k->batch, k->stride_a);
    if (s == CUBLAS_STATUS_SUCCESS && k->batch > 1)
        s = fg_cuda_layout_batches(p->c, k->batch, k->stride_c);
    return s;
}

/* The epilogue's pointers on the descriptor: set before the heuristic too, which reads
 * their alignment from them (cublasLt.h). */
static cublasStatus_t fg_cuda_epi_pointers(fg_cuda_gemm_plan *p, const fg_cuda_epi *epi)
{
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (epi && epi->bias_type)
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &epi->bias,
                                           sizeof epi->bias);
    if (s == CUBLAS_STATUS_SUCCESS && epi && epi->aux)
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                           &epi->aux, sizeof epi->aux);
    return s;
}

static fg_status fg_cuda_plan_make(const fg_cuda_backend *be, fg_cuda_queue *q,
                                   fg_cuda_gemm_plan *p, const fg_cuda_epi *epi, fg_error *err)
{
    const fg_cuda_gemm_key *k = &p->key;
    int all_f32 = k->a_type == FG_F32 && k->b_type == FG_F32 && k->c_type == FG_F32;
    cublasComputeType_t compute =
        all_f32 && be->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasStatus_t s = cublasLtMatmulDescCreate(&p->op, compute, CUDA_R_32F);
    p->valid = s == CUBLAS_STATUS_SUCCESS; /* from here release() frees what exists */
    cublasOperation_t ta = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS && k->epilogue) {
        cublasLtEpilogue_t lt_epi = (cublasLtEpilogue_t)k->epilogue;
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epi,
                                           sizeof lt_epi);
    }
    if (s == CUBLAS_STATUS_SUCCESS && k->bias_type) {
        int32_t bias_type = (int32_t)fg_cuda_data_type(k->bias_type);
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                           &bias_type, sizeof bias_type);
    }
    if (s == CUBLAS_STATUS_SUCCESS && fg_cuda_epi_has_aux(k->epilogue)) {
        int64_t ld = k->ldaux;
        int32_t aux_type = (int32_t)fg_cuda_data_type(k->c_type); /* D's, as documented */
        s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                           sizeof ld);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                               &aux_type, sizeof aux_type);
    }
    if (s == CUBLAS_STATUS_SUCCESS)
        s = fg_cuda_epi_pointers(p, epi);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = fg_cuda_plan_layouts(p);
    if (s != CUBLAS_STATUS_SUCCESS) {
        fg_cuda_plan_release(p);
        return fg_cuda_lt_fail(err, s, "gemm: creating descriptors");
    }
    cublasLtMatmulPreference_t pref = q->lt_pref;
    uint32_t align = k->align;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                         &align, sizeof align);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                         &align, sizeof align);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                         &align, sizeof align);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                         &align, sizeof align);
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    memset(&result, 0, sizeof result);
    s = cublasLtMatmulAlgoGetHeuristic(q->lt, p->op, p->a, p->b, p->c, p->c, pref, 1, &result,
                                       &found);
    if (s != CUBLAS_STATUS_SUCCESS || found < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
        fg_cuda_plan_release(p);
        if (s != CUBLAS_STATUS_SUCCESS)
            return fg_cuda_lt_fail(err, s, "gemm: choosing an algorithm");
        return fg_error_set(err, FG_BACKEND_ERROR,
                            "backend.cuda: gemm: cuBLASLt has no algorithm for m = %d, n = %d, "
                            "k = %d (trans %d/%d, ld %d/%d/%d, %s x %s -> %s, %u-byte "
                            "alignment)", k->m, k->n, k->k, k->trans_a, k->trans_b, k->lda,
                            k->ldb, k->ldc, fg_dtype_name((fg_dtype)k->a_type),
                            fg_dtype_name((fg_dtype)k->b_type),
                            fg_dtype_name((fg_dtype)k->c_type), k->align);
    }
    p->algo = result.algo;
    return FG_OK;
}

/* The queue's plan for this shape, made on first use (the oldest is replaced when full). */
static fg_status fg_cuda_plan_find_epi(const fg_cuda_backend *be, fg_cuda_queue *q,
                                       const fg_cuda_gemm_key *key, const fg_cuda_epi *epi,
                                       fg_cuda_gemm_plan **out, fg_error *err)
{
    for (int i = 0; i < FG_CUDA_GEMM_PLANS; i++)
        if (q->gemm[i].valid && memcmp(&q->gemm[i].key, key, sizeof *key) == 0) {
            *out = &q->gemm[i];
            return FG_OK;
        }
    fg_cuda_gemm_plan *p = &q->gemm[q->gemm_next];
    q->gemm_next = (q->gemm_next + 1) % FG_CUDA_GEMM_PLANS;
    fg_cuda_plan_release(p);
    p->key = *key;
    fg_status st = fg_cuda_plan_make(be, q, p, epi, err);
    *out = st == FG_OK ? p : NULL;
    return st;
}

fg_status fg_cuda_plan_find(const fg_cuda_backend *be, fg_cuda_queue *q,
                            const fg_cuda_gemm_key *key, fg_cuda_gemm_plan **out, fg_error *err)
{
    return fg_cuda_plan_find_epi(be, q, key, NULL, out, err);
}

/* cuBLASLt takes A and B of one type, and C in that type or f32. */
static int fg_cuda_native(uint32_t at, uint32_t bt, uint32_t ct)
{
    return at == bt && (ct == at || ct == FG_F32);
}

/* epi (NULL: none): the epilogue, its vector and aux, set on the plan's descriptor */
static fg_status fg_cuda_matmul(const fg_cuda_backend *be, fg_cuda_queue *q, int trans_a,
                                int trans_b, int m, int n, int k, float alpha, const void *a,
                                uint32_t at, int lda, const void *b, uint32_t bt, int ldb,
                                float beta, void *c, uint32_t ct, int ldc,
                                const fg_cuda_epi *epi, fg_error *err)
{
    const void *aux = epi ? epi->aux : NULL, *vec = epi && epi->bias_type ? epi->bias : NULL;
    uint32_t align = fg_cuda_alignment(a, b, c);
    uint32_t epi_align = fg_cuda_alignment(aux ? aux : c, vec ? vec : c, c);
    fg_cuda_gemm_key key = (fg_cuda_gemm_key){ trans_a ? 1 : 0, trans_b ? 1 : 0, m, n, k, lda, ldb, ldc,
                              at, bt, ct, align < epi_align ? align : epi_align,
                              epi ? epi->bias_type : 0, epi ? epi->epilogue : 0,
                              aux ? epi->ldaux : 0, 0, 0, 0, 0 };
    fg_cuda_gemm_plan *p;
    fg_status st = fg_cuda_plan_find_epi(be, q, &key, epi, &p, err);
    if (st != FG_OK)
        return st;
    const char *what = !epi ? "gemm"
                       : epi->epilogue == CUBLASLT_EPILOGUE_BIAS ? "gemm_bias" : "gemm_epilogue";
    cublasStatus_t ps = fg_cuda_epi_pointers(p, epi);
    if (ps != CUBLAS_STATUS_SUCCESS)
        return fg_cuda_lt_fail(err, ps, "gemm: setting the epilogue's pointers");
    cublasStatus_t s = cublasLtMatmul(q->lt, p->op, &alpha, b, p->a, a, p->b, &beta, c, p->c, c,
                                      p->c, &p->algo, q->lt_workspace, FG_CUDA_LT_WORKSPACE,
                                      q->stream);
    return s == CUBLAS_STATUS_SUCCESS ? FG_OK : fg_cuda_lt_fail(err, s, what);
}

static size_t fg_cuda_span(int rows, int cols, int ld)
{
    return rows > 0 && cols > 0 ? (size_t)(rows - 1) * (size_t)ld + (size_t)cols : 0;
}

/* Operands converted to f32 in the staging buffer, an f32 gemm, C converted back. */
static fg_status fg_cuda_gemm_staged(const fg_cuda_backend *be, fg_cuda_queue *q, int trans_a,
                                     int trans_b, int m, int n, int k, float alpha,
                                     const void *a, uint32_t at, int lda, const void *b,
                                     uint32_t bt, int ldb, float beta, void *c, uint32_t ct,
                                     int ldc, const void *bias, uint32_t bias_t, fg_error *err)
{
    size_t an = fg_cuda_span(trans_a ? k : m, trans_a ? m : k, lda);
    size_t bn = fg_cuda_span(trans_b ? n : k, trans_b ? k : n, ldb);
    size_t cn = fg_cuda_span(m, n, ldc);
    size_t round = 64;
    size_t a_off = 0, b_off = (an * 4 + round - 1) / round * round;
    size_t c_off = b_off + (bn * 4 + round - 1) / round * round;
    size_t bias_off = c_off + (cn * 4 + round - 1) / round * round;
    fg_status st = fg_cuda_stage(q, bias_off + (bias ? (size_t)n * 4 : 0) + 4, "gemm", err);
    if (st != FG_OK)
        return st;
    float *fa = (float *)((char *)q->stage + a_off), *fb = (float *)((char *)q->stage + b_off);
    float *fc = ct == FG_F32 ? c : (float *)((char *)q->stage + c_off);
    float *fbias = bias ? (float *)((char *)q->stage + bias_off) : NULL;
    cudaError_t e = fg_cu_convert(q->stream, fa, FG_F32, a, (int)at, an);
    if (e == cudaSuccess)
        e = fg_cu_convert(q->stream, fb, FG_F32, b, (int)bt, bn);
    if (e == cudaSuccess && ct != FG_F32 && beta != 0.0f)
        e = fg_cu_convert(q->stream, fc, FG_F32, c, (int)ct, cn);
    if (e == cudaSuccess && bias)
        e = fg_cu_convert(q->stream, fbias, FG_F32, bias, (int)bias_t, (size_t)n);
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "gemm: converting operands to f32");
    fg_cuda_epi bias_epi = { CUBLASLT_EPILOGUE_BIAS, fbias, FG_F32, NULL, 0 };
    st = fg_cuda_matmul(be, q, trans_a, trans_b, m, n, k, alpha, fa, FG_F32, lda, fb, FG_F32,
                        ldb, beta, fc, FG_F32, ldc, bias ? &bias_epi : NULL, err);
    if (st != FG_OK || ct == FG_F32)
        return st;
    /* back into C: its m rows of n values, one launch (the gaps of a wider ldc keep their
     * value) */
    e = fg_cu_convert_rows(q->stream, c, (int)ct, (size_t)ldc, fc, FG_F32, (size_t)ldc,
                           (size_t)m, (size_t)n);
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "gemm: converting C back");
    return st;
}

static int fg_cuda_storable(uint32_t t)
{
    return t == FG_F32 || t == FG_F16 || t == FG_BF16;
}

/* What gemm and gemm_bias start with (their arguments are checked): the queue's device and
 * the dtypes. */
static fg_status fg_cuda_gemm_enter(const char *op, void *queue, uint32_t a_type,
                                    uint32_t b_type, uint32_t c_type, fg_error *err)
{
    fg_status st = fg_cuda_enter(queue, op, err);
    if (st != FG_OK)
        return st;
    if (!fg_cuda_storable(a_type) || !fg_cuda_storable(b_type) || !fg_cuda_storable(c_type))
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: %s: %s x %s -> %s: this backend stores f32, "
                            "f16 and bf16", op, fg_dtype_name((fg_dtype)a_type),
                            fg_dtype_name((fg_dtype)b_type), fg_dtype_name((fg_dtype)c_type));
    return FG_OK;
}

fg_status fg_cuda_op_gemm(void *state, void *queue, uint32_t a_type, uint32_t b_type,
                       uint32_t c_type, int trans_a, int trans_b, int m, int n, int k,
                       float alpha, const void *a, int lda, const void *b, int ldb, float beta,
                       void *c, int ldc, fg_error *err)
{
    const fg_cuda_backend *be = state;
    fg_status st = fg_cuda_gemm_enter("gemm", queue, a_type, b_type, c_type, err);
    if (st != FG_OK)
        return st;
    fg_cuda_queue *q = queue;
    if (k == 0) { /* C = beta C: no product to take */
        cudaError_t e = fg_cu_scale_matrix(q->stream, (int)c_type, c, m, n, ldc, beta);
        return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, "gemm (k = 0)");
    }
    if (fg_cuda_native(a_type, b_type, c_type))
        return fg_cuda_matmul(be, q, trans_a, trans_b, m, n, k, alpha, a, a_type, lda, b,
                              b_type, ldb, beta, c, c_type, ldc, NULL, err);
    return fg_cuda_gemm_staged(be, q, trans_a, trans_b, m, n, k, alpha, a, a_type, lda, b,
                               b_type, ldb, beta, c, c_type, ldc, NULL, 0, err);
}

/* C = op(A) op(B) + bias (bias_t) rounded once: the BIAS epilogue where cuBLASLt takes the
 * types, else f32 copies; k = 0: the bias on every row. */
static fg_status fg_cuda_gemm_plus_bias(const fg_cuda_backend *be, fg_cuda_queue *q,
                                        uint32_t a_type, uint32_t b_type, uint32_t c_type,
                                        int trans_a, int trans_b, int m, int n, int k,
                                        const void *a, int lda, const void *b, int ldb,
                                        const void *bias, uint32_t bias_t, void *c, int ldc,
                                        const char *op, fg_error *err)
{
    if (k == 0) { /* C = bias on every row */
        cudaError_t e = fg_cu_scale_matrix(q->stream, (int)c_type, c, m, n, ldc, 0.0f);
        for (int r = 0; e == cudaSuccess && bias && r < m; r += ldc == n ? m : 1)
            e = fg_cu_bias_add(q->stream, (int)c_type, (int)bias_t,
                               (char *)c + (size_t)r * (size_t)ldc *
                                               (c_type == FG_F32 ? 4 : 2),
                               bias, ldc == n ? m : 1, n, 1);
        return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, op);
    }
    /* cuBLASLt's bias takes D's type */
    fg_cuda_epi epi = { CUBLASLT_EPILOGUE_BIAS, bias, bias_t, NULL, 0 };
    if (fg_cuda_native(a_type, b_type, c_type) && (!bias || bias_t == c_type))
        return fg_cuda_matmul(be, q, trans_a, trans_b, m, n, k, 1.0f, a, a_type, lda, b,
                              b_type, ldb, 0.0f, c, c_type, ldc, bias ? &epi : NULL, err);
    return fg_cuda_gemm_staged(be, q, trans_a, trans_b, m, n, k, 1.0f, a, a_type, lda, b,
                               b_type, ldb, 0.0f, c, c_type, ldc, bias, bias_t, err);
}

fg_status fg_cuda_op_gemm_bias(void *state, void *queue, uint32_t a_type, uint32_t b_type,
                            uint32_t c_type, int trans_a, int trans_b, int m, int n, int k,
                            const void *a, int lda, const void *b, int ldb, const void *bias,
                            void *c, int ldc, fg_error *err)
{
    fg_status st = fg_cuda_gemm_enter("gemm_bias", queue, a_type, b_type, c_type, err);
    if (st != FG_OK)
        return st;
    return fg_cuda_gemm_plus_bias(state, queue, a_type, b_type, c_type, trans_a, trans_b, m, n,
                                  k, a, lda, b, ldb, bias, b_type, c, ldc, "gemm_bias", err);
}

/* ---- gemm_epilogue (ABI 1.5) ------------------------------------------------------------- */

static size_t fg_cuda_elem(uint32_t t)
{
    return t == FG_F32 ? 4 : 2;
}

/* bias(cols) (+)= the sums over the rows of x (rows, cols; ld): bias_grad, row by row where
 * the rows are not packed */
static cudaError_t fg_cuda_column_sums(fg_cuda_queue *q, uint32_t x_type, uint32_t bias_type,
                                       void *bias, const void *x, int rows, int cols, int ld,
                                       int accumulate)
{
    if (ld == cols)
        return fg_cu_bias_grad(q->stream, (int)x_type, (int)bias_type, bias, x, rows, cols, 1,
                               accumulate);
    cudaError_t e = cudaSuccess;
    for (int r = 0; e == cudaSuccess && r < rows; r++)
        e = fg_cu_bias_grad(q->stream, (int)x_type, (int)bias_type, bias,
                            (const char *)x + (size_t)r * (size_t)ld * fg_cuda_elem(x_type), 1,
                            cols, 1, accumulate || r > 0);
    return e;
}

/* y = gelu(x) or dy * gelu'(x) in place over (rows, cols) with their own lds */
static cudaError_t fg_cuda_gelu_rows(fg_cuda_queue *q, uint32_t t, int backward, const void *x,
                                     int ldx, void *y, int ldy, int rows, int cols)
{
    int packed = ldx == cols && ldy == cols;
    size_t len = packed ? (size_t)rows * (size_t)cols : (size_t)cols, es = fg_cuda_elem(t);
    cudaError_t e = cudaSuccess;
    for (int r = 0; e == cudaSuccess && r < (packed ? 1 : rows); r++) {
        const char *xr = (const char *)x + (size_t)r * (size_t)ldx * es;
        char *yr = (char *)y + (size_t)r * (size_t)ldy * es;
        e = backward ? fg_cu_act_backward(q->stream, (int)t, FG_ACT_GELU, xr, NULL, yr, yr, len)
                     : fg_cu_act_forward(q->stream, (int)t, FG_ACT_GELU, xr, yr, len);
    }
    return e;
}

/* A bias gradient epilogue: cuBLASLt writes the vector (len values of bias_type) into bias,
 * or, accumulating, into the staging buffer, then added to bias. */
static fg_status fg_cuda_matmul_bgrad(const fg_cuda_backend *be, fg_cuda_queue *q,
                                      uint32_t lt_epi, int trans_a, int trans_b, int m, int n,
                                      int k, const void *a, uint32_t ab, int lda, const void *b,
                                      int ldb, float beta, void *c, uint32_t ct, int ldc,
                                      const void *aux, int ldaux, void *bias, uint32_t bias_t,
                                      int len, int accumulate, fg_error *err)
{
    void *target = bias;
    if (accumulate) {
        fg_status st = fg_cuda_stage(q, (size_t)len * fg_cuda_elem(bias_t), "gemm_epilogue", err);
        if (st != FG_OK)
            return st;
        target = q->stage;
    }
    fg_cuda_epi epi = { lt_epi, target, bias_t, aux, ldaux };
    fg_status st = fg_cuda_matmul(be, q, trans_a, trans_b, m, n, k, 1.0f, a, ab, lda, b, ab, ldb,
                                  beta, c, ct, ldc, &epi, err);
    if (st != FG_OK || !accumulate)
        return st;
    cudaError_t e = fg_cu_axpy(q->stream, (int)bias_t, (int)bias_t, 1.0f, target, bias,
                               (size_t)len);
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, "gemm_epilogue (adding the bias "
                                                           "gradient)");
}

static fg_status fg_cuda_epi_gelu_forward(const fg_cuda_backend *be, fg_cuda_queue *q,
                                          uint32_t ab, uint32_t ct, uint32_t bt, int trans_a,
                                          int trans_b, int m, int n, int k, const void *a,
                                          int lda, const void *b, int ldb, void *c, int ldc,
                                          void *aux, int ldaux, const void *bias, fg_error *err)
{
    if (k > 0 && fg_cuda_native(ab, ab, ct) && bt == ct && ldaux % 8 == 0) {
        fg_cuda_epi epi = { CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, bt, aux, ldaux };
        return fg_cuda_matmul(be, q, trans_a, trans_b, m, n, k, 1.0f, a, ab, lda, b, ab, ldb,
                              0.0f, c, ct, ldc, &epi, err);
    }
    fg_status st = fg_cuda_gemm_plus_bias(be, q, ab, ab, ct, trans_a, trans_b, m, n, k, a, lda,
                                          b, ldb, bias, bt, aux, ldaux, "gemm_epilogue", err);
    if (st != FG_OK)
        return st;
    cudaError_t e = fg_cuda_gelu_rows(q, ct, 0, aux, ldaux, c, ldc, m, n);
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, "gemm_epilogue (gelu)");
}

static fg_status fg_cuda_epi_dgelu(const fg_cuda_backend *be, fg_cuda_queue *q, uint32_t ab,
                                   uint32_t ct, uint32_t bt, int trans_a, int trans_b, int m,
                                   int n, int k, const void *a, int lda, const void *b, int ldb,
                                   void *c, int ldc, const void *aux, int ldaux, void *bias,
                                   int accumulate, fg_error *err)
{
    int lt = k > 0 && fg_cuda_native(ab, ab, ct) && ldaux % 8 == 0;
    if (lt && bt == ct) /* the gradient's vector in D's type: all in the epilogue */
        return fg_cuda_matmul_bgrad(be, q, CUBLASLT_EPILOGUE_DGELU_BGRAD, trans_a, trans_b, m,
                                    n, k, a, ab, lda, b, ldb, 0.0f, c, ct, ldc, aux, ldaux,
                                    bias, bt, n, accumulate, err);
    fg_status st;
    cudaError_t e = cudaSuccess;
    if (lt) { /* DGELU in the epilogue, the sums (e.g. f32 of a bf16 D) by bias_grad */
        fg_cuda_epi epi = { CUBLASLT_EPILOGUE_DGELU, NULL, 0, aux, ldaux };
        st = fg_cuda_matmul(be, q, trans_a, trans_b, m, n, k, 1.0f, a, ab, lda, b, ab, ldb,
                            0.0f, c, ct, ldc, &epi, err);
    } else {
        st = fg_cuda_op_gemm((void *)be, q, ab, ab, ct, trans_a, trans_b, m, n, k, 1.0f, a,
                             lda, b, ldb, 0.0f, c, ldc, err);
        if (st == FG_OK)
            e = fg_cuda_gelu_rows(q, ct, 1, aux, ldaux, c, ldc, m, n);
    }
    if (st != FG_OK)
        return st;
    if (e == cudaSuccess)
        e = fg_cuda_column_sums(q, ct, bt, bias, c, m, n, ldc, accumulate);
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, "gemm_epilogue (dgelu, bias "
                                                           "gradient)");
}

static fg_status fg_cuda_epi_bgradb(const fg_cuda_backend *be, fg_cuda_queue *q, uint32_t ab,
                                    uint32_t ct, uint32_t bt, int trans_a, int trans_b, int m,
                                    int n, int k, const void *a, int lda, const void *b,
                                    int ldb, void *c, int ldc, void *bias, int accumulate,
                                    fg_error *err)
{
    float beta = accumulate ? 1.0f : 0.0f;
    if (k > 0 && fg_cuda_native(ab, ab, ct) && bt == ct)
        return fg_cuda_matmul_bgrad(be, q, CUBLASLT_EPILOGUE_BGRADB, trans_a, trans_b, m, n, k,
                                    a, ab, lda, b, ldb, beta, c, ct, ldc, NULL, 0, bias, bt, m,
                                    accumulate, err);
    fg_status st = fg_cuda_op_gemm((void *)be, q, ab, ab, ct, trans_a, trans_b, m, n, k, 1.0f,
                                   a, lda, b, ldb, beta, c, ldc, err);
    if (st != FG_OK)
        return st;
    cudaError_t e;
    if (trans_a) /* A (k, m): its columns' sums */
        e = fg_cuda_column_sums(q, ab, bt, bias, a, k, m, lda, accumulate);
    else if (lda == k) /* A (m, k) packed: each row a "spatial" run of bias_grad */
        e = fg_cu_bias_grad(q->stream, (int)ab, (int)bt, bias, a, 1, m, k, accumulate);
    else
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: gemm_epilogue: bgradb over an untransposed A with "
                            "lda = %d > k = %d needs cuBLASLt's epilogue (%s x %s -> %s, bias "
                            "%s)", lda, k, fg_dtype_name((fg_dtype)ab),
                            fg_dtype_name((fg_dtype)ab), fg_dtype_name((fg_dtype)ct),
                            fg_dtype_name((fg_dtype)bt));
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, "gemm_epilogue (bias gradient)");
}

fg_status fg_cuda_op_gemm_epilogue(void *state, void *queue, uint32_t ab_dtype,
                                   uint32_t c_dtype, uint32_t bias_dtype, int epilogue,
                                   int trans_a, int trans_b, int m, int n, int k, const void *a,
                                   int lda, const void *b, int ldb, void *c, int ldc, void *aux,
                                   int ldaux, void *bias, int accumulate, fg_error *err)
{
    const fg_cuda_backend *be = state;
    fg_status st = fg_cuda_gemm_enter("gemm_epilogue", queue, ab_dtype, c_dtype, bias_dtype,
                                      err);
    if (st != FG_OK)
        return st;
    fg_cuda_queue *q = queue;
    switch (epilogue) {
    case FG_EPI_BIAS:
        return fg_cuda_gemm_plus_bias(be, q, ab_dtype, ab_dtype, c_dtype, trans_a, trans_b, m,
                                      n, k, a, lda, b, ldb, bias, bias_dtype, c, ldc,
                                      "gemm_epilogue", err);
    case FG_EPI_GELU_AUX_BIAS:
        return fg_cuda_epi_gelu_forward(be, q, ab_dtype, c_dtype, bias_dtype, trans_a, trans_b,
                                        m, n, k, a, lda, b, ldb, c, ldc, aux, ldaux, bias, err);
    case FG_EPI_DGELU_BGRAD:
        return fg_cuda_epi_dgelu(be, q, ab_dtype, c_dtype, bias_dtype, trans_a, trans_b, m, n,
                                 k, a, lda, b, ldb, c, ldc, aux, ldaux, bias, accumulate, err);
    default:
        return fg_cuda_epi_bgradb(be, q, ab_dtype, c_dtype, bias_dtype, trans_a, trans_b, m, n,
                                  k, a, lda, b, ldb, c, ldc, bias, accumulate, err);
    }
}

/* The batch strides count in the alignment: every matrix of the batch must have it. */
fg_status fg_cuda_matmul_batched(const fg_cuda_backend *be, fg_cuda_queue *q,
                                 const fg_cuda_batched_gemm *g, fg_error *err)
{
    fg_cuda_gemm_key key;
    memset(&key, 0, sizeof key);
    key.trans_a = g->trans_a;
    key.trans_b = g->trans_b;
    key.m = g->m;
    key.n = g->n;
    key.k = g->k;
    key.lda = g->lda;
    key.ldb = g->ldb;
    key.ldc = g->ldc;
    key.a_type = key.b_type = key.c_type = FG_F32;
    key.align = fg_cuda_alignment(g->a, g->b, g->c);
    uint32_t strides = fg_cuda_alignment((const void *)(uintptr_t)(4u * (uint32_t)g->stride_a),
                                         (const void *)(uintptr_t)(4u * (uint32_t)g->stride_b),
                                         (const void *)(uintptr_t)(4u * (uint32_t)g->stride_c));
    if (g->batch > 1 && strides < key.align)
        key.align = strides;
    key.batch = g->batch;
    key.stride_a = g->stride_a;
    key.stride_b = g->stride_b;
    key.stride_c = g->stride_c;
    fg_cuda_gemm_plan *p;
    fg_status st = fg_cuda_plan_find(be, q, &key, &p, err);
    if (st != FG_OK)
        return st;
    cublasStatus_t s = cublasLtMatmul(q->lt, p->op, &g->alpha, g->b, p->a, g->a, p->b, &g->beta,
                                      g->c, p->c, g->c, p->c, &p->algo, q->lt_workspace,
                                      FG_CUDA_LT_WORKSPACE, q->stream);
    return s == CUBLAS_STATUS_SUCCESS ? FG_OK : fg_cuda_lt_fail(err, s, "attention: batched gemm");
}
