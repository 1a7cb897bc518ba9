/* 2-D convolution through cuDNN's convolution API (cudnnConvolutionForward,
 * BackwardData, BackwardFilter) over NCHW or channels-last NHWC activations (the
 * descriptor's layout, ABI 1.9): one plan per shape, element type, layout and queue, its
 * algorithms picked on first use (cuda_conv_algo.c). The bias and its gradient use the
 * backend's own kernels.
 *
 * The workspace holds, in order: the algorithms' scratch (a budget that depends only on
 * the shape), an act-typed copy of w when the parameters are stored in another type or
 * the layout is NHWC (the parameter stays KCRS, cuDNN's NHWC filter is KRSC: permuted on
 * the way), and an act-typed dw when the gradients are of another type or NHWC (cuDNN
 * takes one element type per call; a bf16-mixed dw is computed in bf16 and added into the
 * f32 gradient, as PyTorch's autocast does). */
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
    cudnnTensorFormat_t f = k->layout == FG_LAYOUT_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    cudnnStatus_t s = cudnnCreateTensorDescriptor(&p->x);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnCreateTensorDescriptor(&p->y);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnCreateFilterDescriptor(&p->w);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnCreateConvolutionDescriptor(&p->conv);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetTensor4dDescriptor(p->x, f, t, k->n, k->c, k->h, k->w);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetFilter4dDescriptor(p->w, t, f, k->k, k->c, k->r, k->s);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetConvolution2dDescriptor(p->conv, k->pad_h, k->pad_w, k->stride_h,
                                            k->stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT);
    int on = 0, ok = 0, oh = 0, ow = 0;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &ok, &oh, &ow);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetTensor4dDescriptor(p->y, f, t, on, ok, oh, ow);
    return s;
}

static fg_status fg_cuda_conv_plan_get(const fg_cuda_backend *be, fg_cuda_queue *q,
                                   const fg_conv2d_desc *d, uint32_t type,
                                   fg_cuda_conv_plan **out, fg_error *err)
{
    fg_cuda_conv_key key = { d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->pad_h, d->pad_w,
                             d->stride_h, d->stride_w, type, fg_conv2d_layout(d) };
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
    if (s != CUDNN_STATUS_SUCCESS) {
        fg_cuda_conv_release(p);
        return fg_cuda_dnn_fail(err, s, "conv2d: descriptors");
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

static int fg_cuda_conv_nhwc(const fg_conv2d_desc *d)
{
    return fg_conv2d_layout(d) == FG_LAYOUT_NHWC;
}

static size_t fg_cuda_filter_count(const fg_conv2d_desc *d)
{
    return (size_t)d->k * (size_t)d->c * (size_t)d->r * (size_t)d->s;
}

/* The workspace's act-typed filter slots: 0 the copy of w, 1 the dw cuDNN writes. */
static void *fg_cuda_filter_slot(const fg_conv2d_desc *d, void *workspace, int slot)
{
    return (char *)workspace + fg_cuda_conv_budget(d) + (size_t)slot * fg_cuda_filter_bytes(d);
}

/* w as cuDNN reads it (activations' type; KRSC under NHWC): w itself, or a copy in the
 * workspace's filter slot. */
static fg_status fg_cuda_conv_filter(fg_cuda_queue *q, uint32_t x_dtype, uint32_t param_dtype,
                                     const fg_conv2d_desc *d, const void *w, void *workspace,
                                     const void **out, fg_error *err)
{
    *out = w;
    int nhwc = fg_cuda_conv_nhwc(d);
    if (param_dtype == x_dtype && !nhwc)
        return FG_OK;
    void *copy = fg_cuda_filter_slot(d, workspace, 0);
    size_t rs = (size_t)d->r * (size_t)d->s;
    cudaError_t e = nhwc ? fg_cu_channels_permute(q->stream, copy, (int)x_dtype, w,
                                                  (int)param_dtype, (size_t)d->k, (size_t)d->c,
                                                  rs, 1, 0)
                         : fg_cu_convert(q->stream, copy, (int)x_dtype, w, (int)param_dtype,
                                         fg_cuda_filter_count(d));
    *out = copy;
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, "conv2d: converting w");
}

/* The bias kernels' (rows, cols, spatial) view of y: per channel over each plane (NCHW),
 * or the last axis of (n*out_h*out_w, k) rows (NHWC). */
static void fg_cuda_conv_bias_view(const fg_conv2d_desc *d, int *rows, int *spatial)
{
    int plane = d->out_h * d->out_w;
    *rows = fg_cuda_conv_nhwc(d) ? d->n * plane : d->n;
    *spatial = fg_cuda_conv_nhwc(d) ? 1 : plane;
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
    fg_cuda_conv_operands o = { x, wa, y, workspace };
    if (st == FG_OK)
        st = fg_cuda_conv_choose(state, q, p, FG_CUDA_CONV_FWD, &o, err);
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
    int rows, spatial;
    fg_cuda_conv_bias_view(d, &rows, &spatial);
    cudaError_t e = fg_cu_bias_add(q->stream, (int)x_dtype, (int)param_dtype, y, bias, rows,
                                   d->k, spatial);
    return fg_cuda_launched(e, "conv2d_forward (bias)", err);
}

static fg_status fg_cuda_conv_dx(const fg_cuda_backend *be, fg_cuda_queue *q,
                                 fg_cuda_conv_plan *p, uint32_t x_dtype, uint32_t param_dtype,
                                 const fg_conv2d_desc *d, const void *w, const void *dy,
                                 void *dx, void *workspace, fg_error *err)
{
    const void *wa;
    fg_status st = fg_cuda_conv_filter(q, x_dtype, param_dtype, d, w, workspace, &wa, err);
    fg_cuda_conv_operands o = { wa, dy, dx, workspace };
    if (st == FG_OK)
        st = fg_cuda_conv_choose(be, q, p, FG_CUDA_CONV_BWD_DATA, &o, err);
    if (st != FG_OK)
        return st;
    float one = 1.0f, zero = 0.0f;
    cudnnStatus_t s = cudnnSetConvolutionMathType(p->conv, p->bwd_data_math);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnConvolutionBackwardData(q->dnn, &one, p->w, wa, p->y, dy, p->conv, p->bwd_data,
                                         workspace, p->budget, &zero, p->x, dx);
    return s == CUDNN_STATUS_SUCCESS ? FG_OK
                                     : fg_cuda_dnn_fail(err, s, "conv2d_backward (dx)");
}

/* dw straight into the gradient when cuDNN can write it (same type, NCHW), else into the
 * workspace's slot and then converted (and permuted back to KCRS) into it. */
static fg_status fg_cuda_conv_dw(const fg_cuda_backend *be, fg_cuda_queue *q,
                                 fg_cuda_conv_plan *p, uint32_t x_dtype, uint32_t grad_dtype,
                                 const fg_conv2d_desc *d, const void *x, const void *dy,
                                 void *dw, int accumulate, void *workspace, fg_error *err)
{
    int nhwc = fg_cuda_conv_nhwc(d), direct = grad_dtype == x_dtype && !nhwc;
    void *slot = fg_cuda_filter_slot(d, workspace, 1);
    void *target = direct ? dw : slot;
    fg_cuda_conv_operands o = { x, dy, slot, workspace }; /* timing never writes dw */
    fg_status st = fg_cuda_conv_choose(be, q, p, FG_CUDA_CONV_BWD_FILTER, &o, err);
    if (st != FG_OK)
        return st;
    float one = 1.0f, beta = direct && accumulate ? 1.0f : 0.0f;
    cudnnStatus_t s = cudnnSetConvolutionMathType(p->conv, p->bwd_filter_math);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnConvolutionBackwardFilter(q->dnn, &one, p->x, x, p->y, dy, p->conv,
                                           p->bwd_filter, workspace, p->budget, &beta, p->w,
                                           target);
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d_backward (dw)");
    if (direct)
        return FG_OK;
    size_t rs = (size_t)d->r * (size_t)d->s;
    cudaError_t e = nhwc ? fg_cu_channels_permute(q->stream, dw, (int)grad_dtype, slot,
                                                  (int)x_dtype, (size_t)d->k, (size_t)d->c, rs,
                                                  0, accumulate)
                         : fg_cu_accumulate(q->stream, dw, (int)grad_dtype, slot, (int)x_dtype,
                                            fg_cuda_filter_count(d), accumulate);
    return fg_cuda_launched(e, "conv2d_backward (dw)", err);
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
    if (st == FG_OK && dx)
        st = fg_cuda_conv_dx(state, q, p, x_dtype, param_dtype, d, w, dy, dx, workspace, err);
    if (st == FG_OK && dw)
        st = fg_cuda_conv_dw(state, q, p, x_dtype, grad_dtype, d, x, dy, dw, accumulate,
                             workspace, err);
    if (st != FG_OK || !dbias)
        return st;
    int rows, spatial;
    fg_cuda_conv_bias_view(d, &rows, &spatial);
    cudaError_t e = fg_cu_bias_grad(q->stream, (int)x_dtype, (int)grad_dtype, dbias, dy, rows,
                                    d->k, spatial, accumulate);
    return fg_cuda_launched(e, "conv2d_backward (dbias)", err);
}
