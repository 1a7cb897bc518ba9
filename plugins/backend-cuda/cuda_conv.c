/* 2-D convolution through cuDNN's convolution API (cudnnConvolutionForward,
 * BackwardData, BackwardFilter). Algorithms are picked once per shape, element type and
 * queue from cuDNN's heuristics: deterministic ones first, within the workspace
 * conv2d_workspace() promised, FMA-only kernels for fp32 unless allow_tf32. The bias and
 * its gradient use the backend's own kernels.
 *
 * The workspace holds, in order: the algorithms' scratch (a budget that depends only on
 * the shape), an act-typed copy of w when the parameters are stored in another type, and
 * an act-typed dw when the gradients are (cuDNN takes one element type per call; a
 * bf16-mixed dw is computed in bf16 and added into the f32 gradient, as PyTorch's autocast
 * does). */
#include <string.h>

#include "cuda_backend.h"
#include "cuda_ops.h"
#include "fulgur/backend_checks.h"

#define FG_CUDA_MIB ((size_t)1 << 20)

static size_t fg_cuda_round(size_t n)
{
    return (n + 255) / 256 * 256;
}

/* Scratch the algorithms may use: twice the im2col matrix, within [16, 256] MiB. */
static size_t fg_cuda_conv_budget(const fg_conv2d_desc *d)
{
    size_t im2col = (size_t)d->c * (size_t)d->r * (size_t)d->s * (size_t)d->n *
                    (size_t)d->out_h * (size_t)d->out_w * sizeof(float);
    size_t b = 2 * im2col;
    b = b < 16 * FG_CUDA_MIB ? 16 * FG_CUDA_MIB : b > 256 * FG_CUDA_MIB ? 256 * FG_CUDA_MIB : b;
    return fg_cuda_round(b);
}

static size_t fg_cuda_filter_bytes(const fg_conv2d_desc *d)
{
    return fg_cuda_round((size_t)d->k * (size_t)d->c * (size_t)d->r * (size_t)d->s *
                         sizeof(float));
}

size_t fg_cuda_conv2d_workspace(void *state, const fg_conv2d_desc *d)
{
    (void)state;
    if (fg_check_window("backend.cuda", "conv2d_workspace", d, 1, NULL) != FG_OK)
        return 0;
    return fg_cuda_conv_budget(d) + 2 * fg_cuda_filter_bytes(d);
}

/* ---- plans ------------------------------------------------------------------------------ */

static void fg_cuda_conv_release(fg_cuda_conv_plan *p)
{
    if (p->x)
        cudnnDestroyTensorDescriptor(p->x);
    if (p->y)
        cudnnDestroyTensorDescriptor(p->y);
    if (p->w)
        cudnnDestroyFilterDescriptor(p->w);
    if (p->conv)
        cudnnDestroyConvolutionDescriptor(p->conv);
    memset(p, 0, sizeof *p);
}

void fg_cuda_conv_plans_destroy(fg_cuda_queue *q)
{
    for (int i = 0; i < FG_CUDA_CONV_PLANS; i++)
        fg_cuda_conv_release(&q->conv[i]);
}

static fg_status fg_cuda_dnn(const fg_cuda_backend *be, fg_cuda_queue *q, fg_error *err)
{
    if (q->dnn)
        return FG_OK;
    cudnnStatus_t s = cudnnCreate(&q->dnn);
    if (s != CUDNN_STATUS_SUCCESS) {
        q->dnn = NULL;
        return fg_error_set(err, s == CUDNN_STATUS_ALLOC_FAILED ? FG_OUT_OF_MEMORY
                                                                : FG_BACKEND_ERROR,
                            "backend.cuda: cannot start cuDNN: %s (libcudnn %zu at run time, "
                            "built against %d)", cudnnGetErrorString(s), cudnnGetVersion(),
                            CUDNN_VERSION);
    }
    s = cudnnSetStream(q->dnn, q->stream);
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "cudnnSetStream");
    if (cudnnGetVersion() < CUDNN_VERSION && be->host && be->host->log)
        be->host->log(be->host, FG_LOG_WARN,
                      "backend.cuda: libcudnn %zu at run time is older than the %d this "
                      "plugin was built against", cudnnGetVersion(), CUDNN_VERSION);
    return FG_OK;
}

static cudnnDataType_t fg_cuda_dnn_type(uint32_t t)
{
    return t == FG_F16 ? CUDNN_DATA_HALF : t == FG_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

static cudnnStatus_t fg_cuda_conv_descriptors(fg_cuda_conv_plan *p)
{
    const fg_cuda_conv_key *k = &p->key;
    cudnnDataType_t t = fg_cuda_dnn_type(k->type);
    cudnnStatus_t s = cudnnCreateTensorDescriptor(&p->x);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnCreateTensorDescriptor(&p->y);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnCreateFilterDescriptor(&p->w);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnCreateConvolutionDescriptor(&p->conv);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, t, k->n, k->c, k->h, k->w);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetFilter4dDescriptor(p->w, t, CUDNN_TENSOR_NCHW, k->k, k->c, k->r, k->s);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetConvolution2dDescriptor(p->conv, k->pad_h, k->pad_w, k->stride_h,
                                            k->stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT);
    int on = 0, ok = 0, oh = 0, ow = 0;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &ok, &oh, &ow);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, t, on, ok, oh, ow);
    return s;
}

/* fp32 without allow_tf32 must not run on tensor cores (TF32 rounds the operands). */
static int fg_cuda_strict(const fg_cuda_backend *be, uint32_t type)
{
    return type == FG_F32 && !be->allow_tf32;
}

/* Under strict fp32 only FMA_MATH results: DEFAULT_MATH lets cuDNN use TF32 for FLOAT. */
static int fg_cuda_math_ok(int strict, cudnnMathType_t m)
{
    return !strict || m == CUDNN_FMA_MATH;
}

static cudnnMathType_t fg_cuda_run_math(int strict, cudnnMathType_t m)
{
    return strict ? CUDNN_FMA_MATH : m;
}

/* Picks from `count` heuristic results: deterministic first, then any. Each macro use
 * expands over one perf struct type (forward, backward data, backward filter). */
#define FG_CUDA_PICK(perf, count, budget, strict, algo_out, math_out, found)               \
    do {                                                                                   \
        found = 0;                                                                         \
        for (int pass = 0; pass < 2 && !found; pass++)                                     \
            for (int i = 0; i < (count) && !found; i++)                                    \
                if ((perf)[i].status == CUDNN_STATUS_SUCCESS &&                            \
                    (perf)[i].memory <= (budget) &&                                        \
                    fg_cuda_math_ok(strict, (perf)[i].mathType) &&                         \
                    (pass == 1 || (perf)[i].determinism == CUDNN_DETERMINISTIC)) {         \
                    algo_out = (perf)[i].algo;                                             \
                    math_out = fg_cuda_run_math(strict, (perf)[i].mathType);               \
                    found = 1;                                                             \
                }                                                                          \
    } while (0)

/* No heuristic result fit and the fallback does not either (or cuDNN refused it). */
static fg_status fg_cuda_no_algo(fg_error *err, const char *pass, cudnnStatus_t s, size_t need,
                                 size_t budget)
{
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d: the fallback algorithm's workspace");
    return fg_error_set(err, FG_BACKEND_ERROR,
                        "backend.cuda: conv2d: no %s algorithm fits the %zu-byte workspace "
                        "budget (the fallback needs %zu bytes)", pass, budget, need);
}

static fg_status fg_cuda_conv_algorithms(const fg_cuda_backend *be, fg_cuda_queue *q,
                                         fg_cuda_conv_plan *p, fg_error *err)
{
    int strict = fg_cuda_strict(be, p->key.type);
    cudnnStatus_t s = cudnnSetConvolutionMathType(
        p->conv, strict ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH);
    int got = 0, found = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetConvolutionForwardAlgorithm_v7(q->dnn, p->x, p->w, p->conv, p->y,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fwd);
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d: choosing the forward algorithm");
    FG_CUDA_PICK(fwd, got, p->budget, strict, p->fwd, p->fwd_math, found);
    size_t need = 0;
    if (!found) { /* implicit GEMM: checked like any other, it must fit the budget too */
        p->fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
        p->fwd_math = strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
        s = cudnnGetConvolutionForwardWorkspaceSize(q->dnn, p->x, p->w, p->conv, p->y, p->fwd,
                                                    &need);
        if (s != CUDNN_STATUS_SUCCESS || need > p->budget)
            return fg_cuda_no_algo(err, "forward", s, need, p->budget);
    }
    cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    s = cudnnGetConvolutionBackwardDataAlgorithm_v7(q->dnn, p->w, p->y, p->conv, p->x,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                    bd);
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d: choosing the backward-data algorithm");
    FG_CUDA_PICK(bd, got, p->budget, strict, p->bwd_data, p->bwd_data_math, found);
    if (!found) { /* ALGO_1 is deterministic (ALGO_0 accumulates with atomics) */
        p->bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
        p->bwd_data_math = strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
        s = cudnnGetConvolutionBackwardDataWorkspaceSize(q->dnn, p->w, p->y, p->conv, p->x,
                                                         p->bwd_data, &need);
        if (s != CUDNN_STATUS_SUCCESS || need > p->budget)
            return fg_cuda_no_algo(err, "backward-data", s, need, p->budget);
    }
    cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    s = cudnnGetConvolutionBackwardFilterAlgorithm_v7(q->dnn, p->x, p->y, p->conv, p->w,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                      &got, bf);
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d: choosing the backward-filter algorithm");
    FG_CUDA_PICK(bf, got, p->budget, strict, p->bwd_filter, p->bwd_filter_math, found);
    if (!found) { /* ALGO_1 is deterministic (ALGO_0 accumulates with atomics) */
        p->bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
        p->bwd_filter_math = strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
        s = cudnnGetConvolutionBackwardFilterWorkspaceSize(q->dnn, p->x, p->y, p->conv, p->w,
                                                           p->bwd_filter, &need);
        if (s != CUDNN_STATUS_SUCCESS || need > p->budget)
            return fg_cuda_no_algo(err, "backward-filter", s, need, p->budget);
    }
    return FG_OK;
}

static fg_status fg_cuda_conv_plan_get(const fg_cuda_backend *be, fg_cuda_queue *q,
                                   const fg_conv2d_desc *d, uint32_t type,
                                   fg_cuda_conv_plan **out, fg_error *err)
{
    fg_cuda_conv_key key = { d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->pad_h, d->pad_w,
                             d->stride_h, d->stride_w, type };
    for (int i = 0; i < FG_CUDA_CONV_PLANS; i++)
        if (q->conv[i].valid && memcmp(&q->conv[i].key, &key, sizeof key) == 0) {
            *out = &q->conv[i];
            return FG_OK;
        }
    fg_status st = fg_cuda_dnn(be, q, err);
    if (st != FG_OK)
        return st;
    fg_cuda_conv_plan *p = &q->conv[q->conv_next];
    q->conv_next = (q->conv_next + 1) % FG_CUDA_CONV_PLANS;
    fg_cuda_conv_release(p);
    p->key = key;
    p->budget = fg_cuda_conv_budget(d);
    cudnnStatus_t s = fg_cuda_conv_descriptors(p);
    st = s == CUDNN_STATUS_SUCCESS ? fg_cuda_conv_algorithms(be, q, p, err)
                                   : fg_cuda_dnn_fail(err, s, "conv2d: descriptors");
    if (st != FG_OK) {
        fg_cuda_conv_release(p);
        return st;
    }
    p->valid = 1;
    *out = p;
    return FG_OK;
}

/* ---- ops ---------------------------------------------------------------------------------- */

static fg_status fg_cuda_conv_begin(const char *op, void *queue, int type_count,
                                    const uint32_t *types, fg_error *err)
{
    fg_status st = fg_cuda_enter(queue, op, err);
    return st == FG_OK ? fg_cuda_check_types(op, type_count, types, err) : st;
}

/* w in the activations' type: w itself, or a copy in the workspace's filter slot. */
static fg_status fg_cuda_conv_filter(fg_cuda_queue *q, uint32_t x_dtype, uint32_t param_dtype,
                                     const fg_conv2d_desc *d, const void *w, void *workspace,
                                     const void **out, fg_error *err)
{
    *out = w;
    if (param_dtype == x_dtype)
        return FG_OK;
    void *copy = (char *)workspace + fg_cuda_conv_budget(d);
    size_t n = (size_t)d->k * (size_t)d->c * (size_t)d->r * (size_t)d->s;
    cudaError_t e = fg_cu_convert(q->stream, copy, (int)x_dtype, w, (int)param_dtype, n);
    *out = copy;
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, "conv2d: converting w");
}

fg_status fg_cuda_op_conv2d_forward(void *state, void *queue, uint32_t x_dtype,
                                 uint32_t param_dtype, const fg_conv2d_desc *d, const void *x,
                                 const void *w, const void *bias, void *y, void *workspace,
                                 fg_error *err)
{
    const char *op = "conv2d_forward";
    const uint32_t types[] = { x_dtype, param_dtype };
    fg_status st = fg_cuda_conv_begin(op, queue, 2, types, err);
    if (st != FG_OK)
        return st;
    fg_cuda_queue *q = queue;
    fg_cuda_conv_plan *p;
    const void *wa;
    st = fg_cuda_conv_plan_get(state, q, d, x_dtype, &p, err);
    if (st == FG_OK)
        st = fg_cuda_conv_filter(q, x_dtype, param_dtype, d, w, workspace, &wa, err);
    if (st != FG_OK)
        return st;
    float one = 1.0f, zero = 0.0f;
    cudnnStatus_t s = cudnnSetConvolutionMathType(p->conv, p->fwd_math);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnConvolutionForward(q->dnn, &one, p->x, x, p->w, wa, p->conv, p->fwd, workspace,
                                    p->budget, &zero, p->y, y);
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d_forward");
    if (!bias)
        return FG_OK;
    cudaError_t e = fg_cu_bias_add(q->stream, (int)x_dtype, (int)param_dtype, y, bias, d->n,
                                   d->k, d->out_h * d->out_w);
    return fg_cuda_launched(e, "conv2d_forward (bias)", err);
}

fg_status fg_cuda_op_conv2d_backward(void *state, void *queue, uint32_t x_dtype,
                                  uint32_t param_dtype, uint32_t grad_dtype,
                                  const fg_conv2d_desc *d, const void *x, const void *w,
                                  const void *dy, void *dx, void *dw, void *dbias,
                                  int accumulate, void *workspace, fg_error *err)
{
    const char *op = "conv2d_backward";
    const uint32_t types[] = { x_dtype, param_dtype, grad_dtype };
    fg_status st = fg_cuda_conv_begin(op, queue, 3, types, err);
    if (st != FG_OK)
        return st;
    fg_cuda_queue *q = queue;
    fg_cuda_conv_plan *p;
    st = fg_cuda_conv_plan_get(state, q, d, x_dtype, &p, err);
    if (st != FG_OK)
        return st;
    float one = 1.0f, zero = 0.0f;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    if (dx) {
        const void *wa;
        st = fg_cuda_conv_filter(q, x_dtype, param_dtype, d, w, workspace, &wa, err);
        if (st != FG_OK)
            return st;
        s = cudnnSetConvolutionMathType(p->conv, p->bwd_data_math);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnConvolutionBackwardData(q->dnn, &one, p->w, wa, p->y, dy, p->conv,
                                             p->bwd_data, workspace, p->budget, &zero, p->x,
                                             dx);
        if (s != CUDNN_STATUS_SUCCESS)
            return fg_cuda_dnn_fail(err, s, "conv2d_backward (dx)");
    }
    if (dw) {
        int direct = grad_dtype == x_dtype;
        void *target = direct ? dw
                              : (char *)workspace + fg_cuda_conv_budget(d) +
                                    fg_cuda_filter_bytes(d);
        float beta = direct && accumulate ? 1.0f : 0.0f;
        s = cudnnSetConvolutionMathType(p->conv, p->bwd_filter_math);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnConvolutionBackwardFilter(q->dnn, &one, p->x, x, p->y, dy, p->conv,
                                               p->bwd_filter, workspace, p->budget, &beta,
                                               p->w, target);
        if (s != CUDNN_STATUS_SUCCESS)
            return fg_cuda_dnn_fail(err, s, "conv2d_backward (dw)");
        if (!direct) {
            size_t n = (size_t)d->k * (size_t)d->c * (size_t)d->r * (size_t)d->s;
            cudaError_t e = fg_cu_accumulate(q->stream, dw, (int)grad_dtype, target,
                                             (int)x_dtype, n, accumulate);
            if (e != cudaSuccess)
                return fg_cuda_launched(e, "conv2d_backward (dw)", err);
        }
    }
    if (!dbias)
        return FG_OK;
    cudaError_t e = fg_cu_bias_grad(q->stream, (int)x_dtype, (int)grad_dtype, dbias, dy, d->n,
                                    d->k, d->out_h * d->out_w, accumulate);
    return fg_cuda_launched(e, "conv2d_backward (dbias)", err);
}
