/* A CPU reference of the cuBLASLt entry points backend-cuda calls, from NVIDIA's
 * documentation of their semantics (cublasLt.h and the cuBLASLt API reference):
 *   D = alpha * op(A) op(B) + beta * C, column-major by default (CUBLASLT_ORDER_COL: element
 *   (i, j) at i + j * ld, ld >= rows) or row-major (CUBLASLT_ORDER_ROW, ld >= cols); op(A) is
 *   m x k, op(B) k x n, C and D m x n; batches at the layouts' strided offsets; beta == 0
 *   reads nothing of C; epilogues RELU, BIAS, RELU_BIAS, GELU, GELU_BIAS (bias of m values,
 *   added before the activation), GELU_AUX(_BIAS) (the GELU's input also stored into the aux
 *   matrix, m x n column-major with EPILOGUE_AUX_LD, D's type), DGELU (D = result *
 *   gelu'(aux)), DGELU_BGRAD (and the bias gradient: D's m row sums over its n columns, into
 *   BIAS_POINTER), BGRADA / BGRADB (the bias gradient of op(A)'s m rows / op(B)'s n columns,
 *   summed over k). cublasLt.h's rules for them: the aux ld a multiple of 8 (NOT_SUPPORTED)
 *   and >= m (INVALID_VALUE); an aux type set other than D's (INVALID_VALUE); a bias
 *   gradient in the output's type (NOT_SUPPORTED otherwise); no batches with these
 *   epilogues (their batch strides are not emulated: NOT_SUPPORTED).
 * It rejects what the library rejects, with its status: attribute buffers of the wrong size
 * (INVALID_VALUE), shapes that do not chain (INVALID_VALUE), type mixes outside the
 * COMPUTE_32F/FAST_TF32 table (NOT_SUPPORTED), D != C in place with another layout
 * (INVALID_VALUE), a workspace smaller than the algorithm's (INVALID_VALUE), pointers not
 * aligned to what the algorithm was chosen for (NOT_SUPPORTED, misaligned), operands that are
 * not device memory (EXECUTION_FAILED: an illegal address on a GPU). Products accumulate in
 * f32 in k order; FAST_TF32 rounds A and B to TF32 first. fp8 operands (E4M3, E5M2; ABI
 * 1.9's gemm_fp8) with A/B scale pointers under cublasLtMatmul's fp8 rules for sm_90
 * (fp8_rule below); the product times A's then B's scale. Test-only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublasLt.h>

#include <vector>

#include "emu_api.h"
#include "emu_types.h"

using fgemu::load;
using fgemu::store;

namespace {

constexpr uint32_t kMagicHandle = 0x4c74484eu, kMagicDesc = 0x4c744465u,
                   kMagicLayout = 0x4c744c61u, kMagicPref = 0x4c745072u,
                   kMagicAlgo = 0x4c74416cu;

struct handle {
    uint32_t magic;
};

struct desc {
    uint32_t magic;
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t trans_a, trans_b, trans_c, pointer_mode;
    uint32_t epilogue;
    const void *bias;
    int32_t bias_type;
    const void *aux;
    int64_t aux_ld;
    int32_t aux_type;
    /* fp8: the operands' scale factors (device f32, NULL: 1) and the rest of that family */
    const void *scale_a, *scale_b, *scale_c, *scale_d, *amax_d;
    int8_t fast_accum;
};

struct layout {
    uint32_t magic;
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t order, batch;
    int64_t stride;
};

struct pref {
    uint32_t magic;
    uint64_t max_workspace;
    uint32_t align[4];
};

/* What cublasLtMatmulAlgo_t carries here. */
struct algo_info {
    uint32_t magic;
    uint32_t align;
    uint64_t workspace;
};

int bad(const void *p, uint32_t magic)
{
    return !p || *(const uint32_t *)p != magic;
}

template <class T> cublasStatus_t set(T *dst, const void *buf, size_t size)
{
    if (!buf || size != sizeof(T))
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(dst, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

/* The (A/B type, C type) pairs COMPUTE_32F with an f32 scale takes (the cuBLASLt
 * "cublasLtMatmul() data types" table, restricted to real f32/f16/bf16); FAST_TF32 only
 * all-f32. */
int types_ok(const desc *d, cudaDataType_t ab, cudaDataType_t c)
{
    if (fgemu::is_fp8(ab)) /* fp8 x fp8: COMPUTE_32F, f32 scale, C = D in bf16, f16 or f32 */
        return d->scale == CUDA_R_32F && d->compute == CUBLAS_COMPUTE_32F &&
               (c == CUDA_R_16BF || c == CUDA_R_16F || c == CUDA_R_32F);
    if (d->scale != CUDA_R_32F)
        return 0;
    if (d->compute == CUBLAS_COMPUTE_32F_FAST_TF32)
        return ab == CUDA_R_32F && c == CUDA_R_32F;
    if (d->compute != CUBLAS_COMPUTE_32F)
        return 0;
    if (ab == CUDA_R_32F)
        return c == CUDA_R_32F;
    if (ab == CUDA_R_16F || ab == CUDA_R_16BF)
        return c == ab || c == CUDA_R_32F;
    return 0;
}

size_t offset(const layout *l, uint64_t r, uint64_t c)
{
    return l->order == CUBLASLT_ORDER_ROW ? r * (uint64_t)l->ld + c : c * (uint64_t)l->ld + r;
}

/* Bytes a layout spans (the last batch's last element + 1), to check device memory. */
size_t span(const layout *l)
{
    if (!l->rows || !l->cols)
        return 0;
    size_t one = offset(l, l->rows - 1, l->cols - 1) + 1;
    return ((size_t)(l->batch - 1) * (size_t)l->stride + one) * fgemu::elem_size(l->type);
}

int ld_ok(const layout *l)
{
    uint64_t need = l->order == CUBLASLT_ORDER_ROW ? l->cols : l->rows;
    return l->ld >= 1 && (uint64_t)l->ld >= need &&
           (l->order == CUBLASLT_ORDER_COL || l->order == CUBLASLT_ORDER_ROW);
}

/* cublasLtMatmul's FP8 requirements on sm_90 (the cuBLAS documentation, "cublasLtMatmul()":
 * FP8 kernels): A transposed and B not (TN), not both E5M2, 16-byte aligned leading
 * dimensions (k a multiple of 16 as well: the rows of the TN operands), f32 scale and
 * compute; a scale pointer of A or B on a non-fp8 matmul is INVALID_VALUE (cublasLt.h: "if
 * set for an unsupported matrix data, scale, and compute type combination"). Not emulated
 * (NOT_SUPPORTED): fp8 outputs (D scale, amax of D), C's scale, epilogues and batches with
 * fp8 operands. NULL when the call keeps the rules. */
const char *fp8_rule(const desc *d, const layout *a, const layout *b, const layout *c,
                     cublasStatus_t *st)
{
    *st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (!fgemu::is_fp8(a->type)) {
        *st = CUBLAS_STATUS_INVALID_VALUE;
        if (d->scale_a || d->scale_b || d->scale_c || d->scale_d || d->amax_d)
            return "a scale or amax pointer on a matmul without fp8 operands";
        return NULL;
    }
    uint64_t k = d->trans_a == CUBLAS_OP_N ? a->cols : a->rows;
    if (a->type == CUDA_R_8F_E5M2 && b->type == CUDA_R_8F_E5M2)
        return "fp8 E5M2 x E5M2 (one operand must be E4M3)";
    if (d->trans_a != CUBLAS_OP_T || d->trans_b != CUBLAS_OP_N)
        return "fp8 operands not in the TN layout (A transposed, B not), which sm_90 needs";
    if (a->order != CUBLASLT_ORDER_COL || b->order != CUBLASLT_ORDER_COL ||
        c->order != CUBLASLT_ORDER_COL)
        return "fp8 operands in a non-column order (not emulated)";
    if (k % 16 || a->ld % 16 || b->ld % 16 || (c->ld * (int64_t)fgemu::elem_size(c->type)) % 16)
        return "fp8 dimensions not 16-byte aligned (k, lda, ldb, ldc's bytes)";
    if (d->scale_c || d->scale_d || d->amax_d)
        return "C or D scale or D amax pointers (fp8 outputs: not emulated)";
    if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT || a->batch > 1)
        return "an epilogue or batches with fp8 operands (not emulated)";
    return NULL;
}

/* The checks shared by the heuristic and the matmul: shapes and types. */
cublasStatus_t check(const desc *d, const layout *a, const layout *b, const layout *c,
                     const layout *dd, const char *who)
{
    uint64_t m = d->trans_a == CUBLAS_OP_N ? a->rows : a->cols;
    uint64_t k = d->trans_a == CUBLAS_OP_N ? a->cols : a->rows;
    uint64_t kb = d->trans_b == CUBLAS_OP_N ? b->rows : b->cols;
    uint64_t n = d->trans_b == CUBLAS_OP_N ? b->cols : b->rows;
    const char *why = NULL;
    cublasStatus_t st = CUBLAS_STATUS_INVALID_VALUE;
    if (k != kb || c->rows != m || c->cols != n || dd->rows != m || dd->cols != n)
        why = "the layouts' shapes do not chain (op(A) m x k, op(B) k x n, C and D m x n)";
    else if (!ld_ok(a) || !ld_ok(b) || !ld_ok(c) || !ld_ok(dd))
        why = "a leading dimension smaller than the rows (COL) or columns (ROW)";
    else if (d->trans_c != CUBLAS_OP_N)
        why = "TRANSC other than CUBLAS_OP_N";
    else if (a->batch != b->batch || a->batch != c->batch || c->batch != dd->batch)
        why = "batch counts differ";
    else if ((fgemu::is_fp8(a->type) ? !fgemu::is_fp8(b->type) : a->type != b->type) ||
             c->type != dd->type || !types_ok(d, a->type, c->type)) {
        why = "a type mix outside the COMPUTE_32F / FAST_TF32 table";
        st = CUBLAS_STATUS_NOT_SUPPORTED;
    } else if ((why = fp8_rule(d, a, b, c, &st)) != NULL) {
    } else if (d->pointer_mode != CUBLASLT_POINTER_MODE_HOST) {
        why = "a pointer mode other than HOST (not emulated)";
        st = CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (!why)
        return CUBLAS_STATUS_SUCCESS;
    fprintf(stderr, "cuBLASLt (emulated): %s: %s (A %llux%llu ld %lld, B %llux%llu ld %lld, "
            "C %llux%llu ld %lld, trans %d/%d)\n", who, why, (unsigned long long)a->rows,
            (unsigned long long)a->cols, (long long)a->ld, (unsigned long long)b->rows,
            (unsigned long long)b->cols, (long long)b->ld, (unsigned long long)c->rows,
            (unsigned long long)c->cols, (long long)c->ld, d->trans_a, d->trans_b);
    return st;
}

uint32_t align_of(const void *p)
{
    uint32_t a = 256;
    while (a > 1 && ((uintptr_t)p & (a - 1)))
        a >>= 1;
    return a;
}

float gelu(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi), the tanh approximation */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/* d/dx of gelu: 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx, t = tanh(u) */
float dgelu(float x)
{
    const float k = 0.7978845608028654f, c = 0.044715f;
    float t = tanhf(k * (x + c * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * c * x * x);
}

int has_aux(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
           e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

int is_bgrad(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA ||
           e == CUBLASLT_EPILOGUE_BGRADB;
}

int epilogue_ok(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_RELU ||
           e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
           e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || has_aux(e) ||
           is_bgrad(e);
}

/* The epilogue's own rules (cublasLt.h), against D's layout. */
cublasStatus_t epilogue_check(const desc *o, const layout *d, const char *who)
{
    const char *why = NULL;
    cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
    uint32_t e = o->epilogue;
    if (!epilogue_ok(e))
        why = "an epilogue that is not emulated";
    else if ((has_aux(e) || is_bgrad(e)) && d->batch > 1)
        why = "an aux or bias-gradient epilogue over batches (not emulated)";
    else if (has_aux(e) && o->aux_ld % 8 != 0)
        why = "EPILOGUE_AUX_LD not a multiple of 8";
    else if (has_aux(e) && (o->aux_ld < 1 || (uint64_t)o->aux_ld < d->rows)) {
        why = "EPILOGUE_AUX_LD smaller than D's rows";
        st = CUBLAS_STATUS_INVALID_VALUE;
    } else if (has_aux(e) && o->aux_type >= 0 && o->aux_type != (int32_t)d->type) {
        why = "an EPILOGUE_AUX_DATA_TYPE other than D's";
        st = CUBLAS_STATUS_INVALID_VALUE;
    } else if (is_bgrad(e) && o->bias_type >= 0 && o->bias_type != (int32_t)d->type)
        why = "a bias gradient whose BIAS_DATA_TYPE is not the output's type";
    if (!why)
        return CUBLAS_STATUS_SUCCESS;
    fprintf(stderr, "cuBLASLt (emulated): %s: epilogue %u: %s (aux ld %lld, D %llux%llu)\n",
            who, e, why, (long long)o->aux_ld, (unsigned long long)d->rows,
            (unsigned long long)d->cols);
    return st;
}

/* A validated matmul: its descriptors and scalars by value (a captured one runs later). */
struct matmul_work {
    desc o;
    layout la, lb, lc, ld;
    float al, be;
    const void *A, *B, *C;
    void *D;
};

void compute(const matmul_work *w)
{
    const desc *o = &w->o;
    const layout *la = &w->la, *lb = &w->lb, *lc = &w->lc, *ld = &w->ld;
    float al = w->al, be = w->be;
    const void *A = w->A, *B = w->B, *C = w->C;
    void *D = w->D;
    uint64_t m = ld->rows, n = ld->cols;
    uint64_t k = o->trans_a == CUBLAS_OP_N ? la->cols : la->rows;
    int tf = o->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    bool fp8 = fgemu::is_fp8(la->type);
    float sa = o->scale_a ? load(o->scale_a, CUDA_R_32F, 0) : 1.0f;
    float sb = o->scale_b ? load(o->scale_b, CUDA_R_32F, 0) : 1.0f;
    uint32_t e = o->epilogue;
    int with_bias = e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
                    e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    cudaDataType_t bias_type = o->bias_type < 0 ? ld->type : (cudaDataType_t)o->bias_type;
    layout la_aux = { kMagicLayout, ld->type, m, n, o->aux_ld, CUBLASLT_ORDER_COL, 1, 0 };
    int with_gelu = e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
               e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    int aux_out = e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    int with_dgelu = e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
    for (int bt = 0; bt < ld->batch; bt++) {
        const char *pa = (const char *)A + (size_t)bt * la->stride * fgemu::elem_size(la->type);
        const char *pb = (const char *)B + (size_t)bt * lb->stride * fgemu::elem_size(lb->type);
        const char *pc = (const char *)C + (size_t)bt * lc->stride * fgemu::elem_size(lc->type);
        char *pd = (char *)D + (size_t)bt * ld->stride * fgemu::elem_size(ld->type);
        /* op(A) row by row (m x k) and op(B) column by column (n x k), widened once */
        std::vector<float> fa(m * k), fb(n * k);
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t p = 0; p < k; p++) {
                size_t ia = o->trans_a == CUBLAS_OP_N ? offset(la, i, p) : offset(la, p, i);
                float x = load(pa, la->type, ia);
                fa[i * k + p] = tf ? fgemu::tf32(x) : x;
            }
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t p = 0; p < k; p++) {
                size_t ib = o->trans_b == CUBLAS_OP_N ? offset(lb, p, j) : offset(lb, j, p);
                float y = load(pb, lb->type, ib);
                fb[j * k + p] = tf ? fgemu::tf32(y) : y;
            }
        std::vector<double> grad(e == CUBLASLT_EPILOGUE_BGRADB ? n : m, 0.0);
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t i = 0; i < m; i++) {
                float acc = 0.0f;
                const float *ra = &fa[i * k], *cb = &fb[j * k];
                for (uint64_t p = 0; p < k; p++)
                    acc += ra[p] * cb[p];
                float v = al * acc;
                if (fp8) /* the operands' scales, A's then B's, on the f32 product */
                    v = v * sa * sb;
                if (be != 0.0f)
                    v += be * load(pc, lc->type, offset(lc, i, j));
                if (with_bias)
                    v += load(o->bias, bias_type, i);
                if (aux_out) /* the GELU's input */
                    store((void *)o->aux, ld->type, offset(&la_aux, i, j), v);
                if (e == CUBLASLT_EPILOGUE_RELU || e == CUBLASLT_EPILOGUE_RELU_BIAS)
                    v = v > 0.0f ? v : 0.0f;
                if (with_gelu)
                    v = gelu(v);
                if (with_dgelu)
                    v *= dgelu(load(o->aux, ld->type, offset(&la_aux, i, j)));
                if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD)
                    grad[i] += (double)v;
                store(pd, ld->type, offset(ld, i, j), v);
            }
        /* the bias gradients of the operands: sums over k */
        for (uint64_t i = 0; e == CUBLASLT_EPILOGUE_BGRADA && i < m; i++)
            for (uint64_t p = 0; p < k; p++)
                grad[i] += (double)fa[i * k + p];
        for (uint64_t j = 0; e == CUBLASLT_EPILOGUE_BGRADB && j < n; j++)
            for (uint64_t p = 0; p < k; p++)
                grad[j] += (double)fb[j * k + p];
        for (size_t i = 0; is_bgrad(e) && i < grad.size(); i++)
            store((void *)o->bias, bias_type, i, (float)grad[i]);
    }
}

void run_matmul(void *ctx, cudaStream_t s)
{
    fgemu_stream_drain(s);
    compute((const matmul_work *)ctx);
}

void drop_matmul(void *ctx)
{
    delete (matmul_work *)ctx;
}

} // namespace

extern "C" {

const char *cublasLtGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
    }
}

const char *cublasLtGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    default: return "cuBLASLt (emulated) error";
    }
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    *h = (cublasLtHandle_t) new handle{ kMagicHandle };
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    if (bad(h, kMagicHandle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    ((handle *)h)->magic = 0;
    delete (handle *)h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *out, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    desc *d = new desc{};
    d->magic = kMagicDesc;
    d->compute = compute;
    d->scale = scale;
    d->trans_a = d->trans_b = d->trans_c = CUBLAS_OP_N;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->bias_type = -1; /* default: the type of D */
    d->aux_type = -1;  /* default: the type of D */
    *out = (cublasLtMatmulDesc_t)d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t p)
{
    if (bad(p, kMagicDesc))
        return CUBLAS_STATUS_INVALID_VALUE;
    ((desc *)p)->magic = 0;
    delete (desc *)p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t p,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size)
{
    if (bad(p, kMagicDesc))
        return CUBLAS_STATUS_INVALID_VALUE;
    desc *d = (desc *)p;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return set(&d->trans_a, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set(&d->trans_b, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSC: return set(&d->trans_c, buf, size);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set(&d->pointer_mode, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set(&d->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set(&d->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set(&d->bias_type, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set(&d->aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set(&d->aux_ld, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return set(&d->aux_type, buf, size);
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return set(&d->scale_a, buf, size);
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return set(&d->scale_b, buf, size);
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: return set(&d->scale_c, buf, size);
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: return set(&d->scale_d, buf, size);
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: return set(&d->amax_d, buf, size);
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return set(&d->fast_accum, buf, size);
    default:
        fprintf(stderr, "cuBLASLt (emulated): matmul attribute %d is not emulated\n",
                (int)attr);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *out, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (type != CUDA_R_32F && type != CUDA_R_16F && type != CUDA_R_16BF && !fgemu::is_fp8(type))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    layout *l = new layout{ kMagicLayout, type, rows, cols, ld, CUBLASLT_ORDER_COL, 1, 0 };
    *out = (cublasLtMatrixLayout_t)l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t p)
{
    if (bad(p, kMagicLayout))
        return CUBLAS_STATUS_INVALID_VALUE;
    ((layout *)p)->magic = 0;
    delete (layout *)p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t p,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size)
{
    if (bad(p, kMagicLayout))
        return CUBLAS_STATUS_INVALID_VALUE;
    layout *l = (layout *)p;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return set(&l->order, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set(&l->batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set(&l->stride, buf, size);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *out)
{
    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    /* defaults: no workspace, 256-byte alignment of every pointer */
    *out = (cublasLtMatmulPreference_t) new pref{ kMagicPref, 0, { 256, 256, 256, 256 } };
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    if (bad(p, kMagicPref))
        return CUBLAS_STATUS_INVALID_VALUE;
    ((pref *)p)->magic = 0;
    delete (pref *)p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size)
{
    if (bad(p, kMagicPref))
        return CUBLAS_STATUS_INVALID_VALUE;
    pref *r = (pref *)p;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return set(&r->max_workspace, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return set(&r->align[0], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return set(&r->align[1], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return set(&r->align[2], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return set(&r->align[3], buf, size);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

/* One algorithm: it needs the smallest alignment the preference allows (at most 16 bytes:
 * the vector width), and a split-k workspace of m*n floats when k is large and the
 * preference allows that much. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t p, int requested,
                                              cublasLtMatmulHeuristicResult_t *results,
                                              int *returned)
{
    if (bad(h, kMagicHandle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requested <= 0 || !results || !returned || bad(op, kMagicDesc) ||
        bad(a, kMagicLayout) || bad(b, kMagicLayout) || bad(c, kMagicLayout) ||
        bad(d, kMagicLayout) || bad(p, kMagicPref))
        return CUBLAS_STATUS_INVALID_VALUE;
    *returned = 0;
    const desc *o = (const desc *)op;
    const layout *la = (const layout *)a, *lc = (const layout *)c;
    cublasStatus_t st = check(o, la, (const layout *)b, lc, (const layout *)d,
                              "cublasLtMatmulAlgoGetHeuristic");
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    st = epilogue_check(o, (const layout *)d, "cublasLtMatmulAlgoGetHeuristic");
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    const pref *r = (const pref *)p;
    uint32_t align = 16;
    for (int i = 0; i < 4; i++)
        if (r->align[i] < align)
            align = r->align[i];
    uint64_t k = o->trans_a == CUBLAS_OP_N ? la->cols : la->rows;
    uint64_t splitk = k >= 1024 ? lc->rows * lc->cols * 4 : 0;
    memset(&results[0], 0, sizeof results[0]);
    algo_info info = { kMagicAlgo, align ? align : 1, splitk <= r->max_workspace ? splitk : 0 };
    memcpy(&results[0].algo, &info, sizeof info);
    results[0].workspaceSize = info.workspace;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t a, const void *B,
                              cublasLtMatrixLayout_t b, const void *beta, const void *C,
                              cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspace_size, cudaStream_t stream)
{
    if (bad(h, kMagicHandle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bad(op, kMagicDesc) || bad(a, kMagicLayout) || bad(b, kMagicLayout) ||
        bad(c, kMagicLayout) || bad(d, kMagicLayout) || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!fgemu_stream_valid(stream) || fgemu_sticky() != cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    fgemu_stream_drain(stream);
    const desc *o = (const desc *)op;
    const layout *la = (const layout *)a, *lb = (const layout *)b, *lc = (const layout *)c,
                 *ld = (const layout *)d;
    cublasStatus_t st = check(o, la, lb, lc, ld, "cublasLtMatmul");
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    st = epilogue_check(o, ld, "cublasLtMatmul");
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    if (C == D && (lc->ld != ld->ld || lc->order != ld->order || lc->type != ld->type)) {
        fprintf(stderr, "cuBLASLt (emulated): in-place matmul (C == D) with different C and "
                "D layouts\n");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    algo_info info = { kMagicAlgo, 1, 0 };
    if (algo) {
        memcpy(&info, algo, sizeof info);
        if (info.magic != kMagicAlgo)
            return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (workspace_size < info.workspace || (info.workspace && !workspace)) {
        fprintf(stderr, "cuBLASLt (emulated): workspace of %zu bytes, the algorithm needs "
                "%llu\n", workspace_size, (unsigned long long)info.workspace);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const void *ptrs[4] = { A, B, C, D };
    for (int i = 0; i < 4; i++)
        if (align_of(ptrs[i]) < info.align) {
            fprintf(stderr, "cuBLASLt (emulated): %c at %p is not %u-byte aligned, the "
                    "alignment the algorithm was chosen for\n", "ABCD"[i], ptrs[i], info.align);
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
    float al, be;
    memcpy(&al, alpha, 4);
    memcpy(&be, beta, 4);
    const layout *ls[4] = { la, lb, lc, ld };
    for (int i = 0; i < 4; i++)
        if ((i != 2 || be != 0.0f) && !fgemu_is_device(ptrs[i], span(ls[i]))) {
            fprintf(stderr, "cuBLASLt (emulated): %c (%p, %zu bytes) is not device memory\n",
                    "ABCD"[i], ptrs[i], span(ls[i]));
            return CUBLAS_STATUS_EXECUTION_FAILED;
        }
    const void *scales[2] = { o->scale_a, o->scale_b };
    for (int i = 0; i < 2; i++)
        if (scales[i] && !fgemu_is_device(scales[i], 4)) {
            fprintf(stderr, "cuBLASLt (emulated): the %c scale (%p) is not device memory\n",
                    "AB"[i], scales[i]);
            return CUBLAS_STATUS_EXECUTION_FAILED;
        }
    for (int i = 0; fgemu::is_fp8(la->type) && i < 4; i++)
        if (align_of(ptrs[i]) < 16) {
            fprintf(stderr, "cuBLASLt (emulated): fp8 matmul: %c at %p is not 16-byte "
                    "aligned\n", "ABCD"[i], ptrs[i]);
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
    uint64_t m = ld->rows, n = ld->cols;
    uint32_t e = o->epilogue;
    int with_bias = e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
                    e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    cudaDataType_t bias_type = o->bias_type < 0 ? ld->type : (cudaDataType_t)o->bias_type;
    uint64_t bias_len = e == CUBLASLT_EPILOGUE_BGRADB ? n : m;
    if ((with_bias || is_bgrad(e)) &&
        (!o->bias || !fgemu_is_device(o->bias, bias_len * fgemu::elem_size(bias_type))))
        return CUBLAS_STATUS_INVALID_VALUE;
    layout la_aux = { kMagicLayout, ld->type, m, n, o->aux_ld, CUBLASLT_ORDER_COL, 1, 0 };
    if (has_aux(e) && (!o->aux || !fgemu_is_device(o->aux, span(&la_aux)))) {
        fprintf(stderr, "cuBLASLt (emulated): the aux matrix (%p) is not device memory\n",
                o->aux);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    matmul_work w = { *o, *la, *lb, *lc, *ld, al, be, A, B, C, D };
    if (fgemu_capturing(stream)) /* a node of the graph: run at each launch */
        fgemu_capture_add(stream, run_matmul, new matmul_work(w), drop_matmul);
    else
        compute(&w);
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
