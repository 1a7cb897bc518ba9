/* A CPU reference of the legacy cuDNN convolution entry points backend-cuda calls, from
 * NVIDIA's documentation of their semantics (cudnn_ops.h, cudnn_cnn.h, the cuDNN 9 "Legacy
 * API" reference):
 *   NCHW tensors, KCRS filters, cross-correlation (CONVOLUTION flips the filter), pad,
 *   stride and dilation per axis; out = 1 + (in + 2 pad - ((r - 1) dil + 1)) / stride;
 *   y = alpha conv(x, w) + beta y, dx = alpha conv^T(dy, w) + beta dx,
 *   dw = alpha corr(x, dy) + beta dw, with beta == 0 reading nothing of the output.
 * The math type set on the descriptor at the call decides the arithmetic: FMA_MATH is f32;
 * DEFAULT_MATH or TENSOR_OP_MATH on FLOAT data runs on TF32 tensor cores (cuDNN's default
 * since 8.0 on sm_80+), so the operands are rounded to TF32. Algorithms: each has a
 * workspace need (cudnnGet*WorkspaceSize) and a determinism (ALGO_0 of the backward passes
 * accumulates with atomics: non-deterministic); FFT and WINOGRAD report NOT_SUPPORTED.
 * Layouts: NCHW tensors with KCRS filters, or NHWC tensors with KRSC filters (channels-last,
 * cudnnSetTensor4dDescriptor / cudnnSetFilter4dDescriptor with CUDNN_TENSOR_NHWC); a mix
 * of the two in one call is not emulated (NOT_SUPPORTED). HALF/BFLOAT16 data is widened
 * to f32, accumulated in f32 and rounded once into the output's type, as the tensor-core
 * kernels do; algorithms on NHWC half/bf16 data report TENSOR_OP math only when c and k
 * are multiples of 8 (the tensor-core kernels' 16-byte channel vectors), else DEFAULT
 * math: cuDNN's non-tensor-core path (modelled from the documentation, not from the
 * library's kernel list, which needs a device). cudnnFind*AlgorithmEx runs the pass on
 * the given buffers and reports the algorithms sorted by a modelled time (the emulator
 * cannot time: a fixed factor per algorithm times the pass's multiply-adds, so the
 * "fastest" one is the same on every run): unsupported ones NOT_SUPPORTED, those needing
 * more than the workspace ALLOC_FAILED, after the others.
 * Rejected as cuDNN does: non-positive dims or strides, negative padding (BAD_PARAM at the
 * set call), channel counts that do not match, an output descriptor of another shape, mixed
 * data types (BAD_PARAM), a compute type the data type cannot use (NOT_SUPPORTED), a
 * workspace smaller than the algorithm needs (BAD_PARAM; unsure whether cuDNN says
 * BAD_PARAM or NOT_SUPPORTED there), operands outside device memory (EXECUTION_FAILED).
 * Test-only. */
#include <stdio.h>
#include <stdlib.h>

#include <cudnn.h>

#include <vector>

#include "emu_api.h"
#include "emu_types.h"

namespace {

constexpr uint32_t kHandle = 0x646e6e48u, kTensor = 0x646e6e54u, kFilter = 0x646e6e46u,
                   kConv = 0x646e6e43u;

struct handle {
    uint32_t magic;
    cudaStream_t stream;
};

struct tensor { /* tensors and filters */
    uint32_t magic;
    int set;
    cudnnDataType_t type;
    cudnnTensorFormat_t format;
    int n, c, h, w;
};

struct conv {
    uint32_t magic;
    int set;
    int pad_h, pad_w, u, v, dil_h, dil_w;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    cudnnMathType_t math;
};

struct shape {
    int n, c, h, w, k, r, s, oh, ow;
    int nhwc; /* x, y NHWC and the filter KRSC */
};

int bad(const void *p, uint32_t magic)
{
    return !p || *(const uint32_t *)p != magic;
}

cudaDataType_t data(cudnnDataType_t t)
{
    return t == CUDNN_DATA_HALF ? CUDA_R_16F : t == CUDNN_DATA_BFLOAT16 ? CUDA_R_16BF
                                                                       : CUDA_R_32F;
}

int storable(cudnnDataType_t t)
{
    return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16;
}

int out_dim(int in, int pad, int f, int dil, int stride)
{
    return 1 + (in + 2 * pad - ((f - 1) * dil + 1)) / stride;
}

cudnnStatus_t fail(cudnnStatus_t s, const char *who, const char *why)
{
    fprintf(stderr, "cuDNN (emulated): %s: %s\n", who, why);
    return s;
}

/* The checks every convolution call makes; fills the shape. */
cudnnStatus_t check(const char *who, const void *h, const tensor *x, const tensor *w,
                    const conv *cv, const tensor *y, shape *sh)
{
    if (bad(h, kHandle))
        return fail(CUDNN_STATUS_BAD_PARAM, who, "not a cuDNN handle");
    if (bad(x, kTensor) || bad(y, kTensor) || bad(w, kFilter) || bad(cv, kConv) || !x->set ||
        !y->set || !w->set || !cv->set)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "a descriptor that is not set");
    int layout_ok = x->format == CUDNN_TENSOR_NCHW || x->format == CUDNN_TENSOR_NHWC;
    if (!layout_ok || y->format != x->format || w->format != x->format)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who,
                    "tensors and filter not all NCHW or all NHWC (not emulated)");
    if (x->c != w->c)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "x channels differ from the filter's");
    int oh = out_dim(x->h, cv->pad_h, w->h, cv->dil_h, cv->u);
    int ow = out_dim(x->w, cv->pad_w, w->w, cv->dil_w, cv->v);
    if (y->n != x->n || y->c != w->n || y->h != oh || y->w != ow) {
        fprintf(stderr, "cuDNN (emulated): %s: output %dx%dx%dx%d, the convolution gives "
                "%dx%dx%dx%d\n", who, y->n, y->c, y->h, y->w, x->n, w->n, oh, ow);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (x->type != w->type || x->type != y->type)
        return fail(CUDNN_STATUS_BAD_PARAM, who, "x, w and y of different data types");
    int compute_ok = cv->compute == CUDNN_DATA_FLOAT ||
                     (cv->compute == CUDNN_DATA_HALF && x->type == CUDNN_DATA_HALF);
    if (!compute_ok)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who,
                    "a compute type this data type has no configuration for");
    *sh = shape{ x->n, x->c, x->h, x->w, w->n, w->h, w->w, oh, ow,
                 x->format == CUDNN_TENSOR_NHWC };
    return CUDNN_STATUS_SUCCESS;
}

size_t im2col_bytes(const shape &s)
{
    return (size_t)s.c * s.r * s.s * (size_t)s.oh * s.ow * s.n * 4;
}

size_t fwd_workspace(const shape &s, cudnnConvolutionFwdAlgo_t a)
{
    switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return 0;
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
        return (size_t)s.c * s.r * s.s * 4 + 256;
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return im2col_bytes(s);
    default: return (size_t)-1;
    }
}

size_t bwd_data_workspace(const shape &s, cudnnConvolutionBwdDataAlgo_t a)
{
    switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return 0;
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return (size_t)s.k * s.c * s.r * s.s * 4;
    default: return (size_t)-1;
    }
}

size_t bwd_filter_workspace(const shape &s, cudnnConvolutionBwdFilterAlgo_t a)
{
    switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return 0;
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return im2col_bytes(s);
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return (size_t)s.k * s.c * s.r * s.s * 4 * 4;
    default: return (size_t)-1;
    }
}

cudnnMathType_t reported_math(const conv *cv, cudnnDataType_t t, const shape &s)
{
    if (cv->math == CUDNN_FMA_MATH)
        return CUDNN_FMA_MATH;
    if (s.nhwc && t != CUDNN_DATA_FLOAT && (s.c % 8 || s.k % 8))
        return CUDNN_DEFAULT_MATH; /* no tensor-core kernel for these channel counts */
    return t == CUDNN_DATA_FLOAT && cv->math == CUDNN_DEFAULT_MATH ? CUDNN_DEFAULT_MATH
                                                                   : CUDNN_TENSOR_OP_MATH;
}

int uses_tf32(const conv *cv, cudnnDataType_t t)
{
    return t == CUDNN_DATA_FLOAT && cv->math != CUDNN_FMA_MATH;
}

/* A tensor widened to f32 once (rounded to TF32 when tf), so the loops read floats. */
std::vector<float> widen(const void *p, cudnnDataType_t t, size_t n, int tf)
{
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) {
        float f = fgemu::load(p, data(t), i);
        v[i] = tf ? fgemu::tf32(f) : f;
    }
    return v;
}

size_t count_of(const tensor *t)
{
    return (size_t)t->n * t->c * t->h * t->w;
}

/* Common to the three passes: algorithm known, workspace large enough, stream live,
 * operands device memory. */
cudnnStatus_t prepare(const char *who, const handle *h, size_t need, void *ws, size_t ws_size,
                      const void *const *ptrs, const size_t *bytes, int count)
{
    if (need == (size_t)-1)
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "an algorithm that is not emulated");
    if (ws_size < need || (need && !ws)) {
        fprintf(stderr, "cuDNN (emulated): %s: workspace of %zu bytes, the algorithm needs "
                "%zu\n", who, ws_size, need);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (need && !fgemu_is_device(ws, need))
        return fail(CUDNN_STATUS_EXECUTION_FAILED, who, "the workspace is not device memory");
    if (!fgemu_stream_valid(h->stream) || fgemu_sticky() != cudaSuccess)
        return fail(CUDNN_STATUS_EXECUTION_FAILED, who, "the handle's stream is not live");
    if (fgemu_capturing(h->stream)) { /* the emulator records no cuDNN call */
        fgemu_capture_invalidate(h->stream, who);
        return fail(CUDNN_STATUS_NOT_SUPPORTED, who, "not emulated under stream capture");
    }
    fgemu_stream_drain(h->stream);
    for (int i = 0; i < count; i++)
        if (!fgemu_is_device(ptrs[i], bytes[i]))
            return fail(CUDNN_STATUS_EXECUTION_FAILED, who, "an operand is not device memory");
    return CUDNN_STATUS_SUCCESS;
}

size_t bytes_of(const tensor *t)
{
    return (size_t)t->n * t->c * t->h * t->w * fgemu::elem_size(data(t->type));
}

/* (ih, iw) of output (oy, ox) and filter tap (i, j); the filter is flipped for
 * CUDNN_CONVOLUTION. */
void tap(const conv *cv, const shape &s, int oy, int ox, int i, int j, int *ih, int *iw)
{
    int fi = cv->mode == CUDNN_CONVOLUTION ? s.r - 1 - i : i;
    int fj = cv->mode == CUDNN_CONVOLUTION ? s.s - 1 - j : j;
    *ih = oy * cv->u - cv->pad_h + fi * cv->dil_h;
    *iw = ox * cv->v - cv->pad_w + fj * cv->dil_w;
}

size_t xi(const shape &s, int n, int c, int h, int w)
{
    if (s.nhwc)
        return (((size_t)n * s.h + h) * s.w + w) * s.c + c;
    return (((size_t)n * s.c + c) * s.h + h) * s.w + w;
}
size_t yi(const shape &s, int n, int k, int h, int w)
{
    if (s.nhwc)
        return (((size_t)n * s.oh + h) * s.ow + w) * s.k + k;
    return (((size_t)n * s.k + k) * s.oh + h) * s.ow + w;
}
size_t wi(const shape &s, int k, int c, int i, int j)
{
    if (s.nhwc)
        return (((size_t)k * s.r + i) * s.s + j) * s.c + c;
    return (((size_t)k * s.c + c) * s.r + i) * s.s + j;
}

float scalar(const void *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

} // namespace

extern "C" {

const char *cudnnGetErrorString(cudnnStatus_t s)
{
    switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER:
        return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_ALLOC_FAILED: return "CUDNN_STATUS_ALLOC_FAILED";
    default: return "CUDNN_STATUS_INTERNAL_ERROR (emulated)";
    }
}

size_t cudnnGetVersion(void)
{
    return CUDNN_VERSION;
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    if (!h)
        return CUDNN_STATUS_BAD_PARAM;
    *h = (cudnnHandle_t) new handle{ kHandle, 0 };
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    if (bad(h, kHandle))
        return CUDNN_STATUS_BAD_PARAM;
    ((handle *)h)->magic = 0;
    delete (handle *)h;
    return CUDNN_STATUS_SUCCESS;
}

/* The stream of a live handle, for the backend API (emu_cudnn_graph.cc); 0 when h is not a
 * handle. */
int fgemu_cudnn_stream(const void *h, cudaStream_t *s)
{
    if (bad(h, kHandle))
        return 0;
    *s = ((const handle *)h)->stream;
    return 1;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    if (bad(h, kHandle) || !fgemu_stream_valid(s))
        return CUDNN_STATUS_BAD_PARAM;
    ((handle *)h)->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t create_tensor(void **out, uint32_t magic)
{
    if (!out)
        return CUDNN_STATUS_BAD_PARAM;
    tensor *t = new tensor{};
    t->magic = magic;
    *out = t;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t destroy_tensor(void *p, uint32_t magic)
{
    if (!p)
        return CUDNN_STATUS_SUCCESS;
    if (bad(p, magic))
        return CUDNN_STATUS_BAD_PARAM;
    ((tensor *)p)->magic = 0;
    delete (tensor *)p;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t set_tensor(void *p, uint32_t magic, cudnnTensorFormat_t f,
                                cudnnDataType_t t, int n, int c, int h, int w)
{
    if (bad(p, magic) || n <= 0 || c <= 0 || h <= 0 || w <= 0 || !storable(t) ||
        (f != CUDNN_TENSOR_NCHW && f != CUDNN_TENSOR_NHWC))
        return CUDNN_STATUS_BAD_PARAM;
    tensor *d = (tensor *)p;
    d->set = 1;
    d->type = t;
    d->format = f;
    d->n = n;
    d->c = c;
    d->h = h;
    d->w = w;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
    return create_tensor((void **)d, kTensor);
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
    return destroy_tensor(d, kTensor);
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f,
                                         cudnnDataType_t t, int n, int c, int h, int w)
{
    return set_tensor(d, kTensor, f, t, n, c, h, w);
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d)
{
    return create_tensor((void **)d, kFilter);
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
    return destroy_tensor(d, kFilter);
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
                                         cudnnTensorFormat_t f, int k, int c, int h, int w)
{
    return set_tensor(d, kFilter, f, t, k, c, h, w);
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
    if (!d)
        return CUDNN_STATUS_BAD_PARAM;
    conv *c = new conv{};
    c->magic = kConv;
    c->math = CUDNN_DEFAULT_MATH;
    *d = (cudnnConvolutionDescriptor_t)c;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
    if (!d)
        return CUDNN_STATUS_SUCCESS;
    if (bad(d, kConv))
        return CUDNN_STATUS_BAD_PARAM;
    ((conv *)d)->magic = 0;
    delete (conv *)d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h,
                                              int pad_w, int u, int v, int dil_h, int dil_w,
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute)
{
    if (bad(d, kConv) || pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dil_h <= 0 ||
        dil_w <= 0 || (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION))
        return CUDNN_STATUS_BAD_PARAM;
    if (compute != CUDNN_DATA_FLOAT && compute != CUDNN_DATA_HALF)
        return CUDNN_STATUS_NOT_SUPPORTED;
    conv *c = (conv *)d;
    c->set = 1;
    c->pad_h = pad_h;
    c->pad_w = pad_w;
    c->u = u;
    c->v = v;
    c->dil_h = dil_h;
    c->dil_w = dil_w;
    c->mode = mode;
    c->compute = compute;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
    if (bad(d, kConv) || (m != CUDNN_DEFAULT_MATH && m != CUDNN_TENSOR_OP_MATH &&
                          m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && m != CUDNN_FMA_MATH))
        return CUDNN_STATUS_BAD_PARAM;
    ((conv *)d)->math = m;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t d,
                                                    const cudnnTensorDescriptor_t x,
                                                    const cudnnFilterDescriptor_t w, int *n,
                                                    int *c, int *h, int *wo)
{
    const conv *cv = (const conv *)d;
    const tensor *tx = (const tensor *)x, *tw = (const tensor *)w;
    if (bad(cv, kConv) || bad(tx, kTensor) || bad(tw, kFilter) || !cv->set || !tx->set ||
        !tw->set || !n || !c || !h || !wo || tx->c != tw->c)
        return CUDNN_STATUS_BAD_PARAM;
    int oh = out_dim(tx->h, cv->pad_h, tw->h, cv->dil_h, cv->u);
    int ow = out_dim(tx->w, cv->pad_w, tw->w, cv->dil_w, cv->v);
    if (oh < 1 || ow < 1)
        return CUDNN_STATUS_BAD_PARAM;
    *n = tx->n;
    *c = tw->n;
    *h = oh;
    *wo = ow;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h,
                                                      const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t d,
                                                      const cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t algo,
                                                      size_t *size)
{
    shape s;
    cudnnStatus_t st = check("cudnnGetConvolutionForwardWorkspaceSize", h, (const tensor *)x,
                             (const tensor *)w, (const conv *)d, (const tensor *)y, &s);
    if (st != CUDNN_STATUS_SUCCESS || !size)
        return st != CUDNN_STATUS_SUCCESS ? st : CUDNN_STATUS_BAD_PARAM;
    size_t need = fwd_workspace(s, algo);
    if (need == (size_t)-1)
        return CUDNN_STATUS_NOT_SUPPORTED;
    *size = need;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t d, const cudnnTensorDescriptor_t dx,
    cudnnConvolutionBwdDataAlgo_t algo, size_t *size)
{
    shape s;
    cudnnStatus_t st = check("cudnnGetConvolutionBackwardDataWorkspaceSize", h,
                             (const tensor *)dx, (const tensor *)w, (const conv *)d,
                             (const tensor *)dy, &s);
    if (st != CUDNN_STATUS_SUCCESS || !size)
        return st != CUDNN_STATUS_SUCCESS ? st : CUDNN_STATUS_BAD_PARAM;
    size_t need = bwd_data_workspace(s, algo);
    if (need == (size_t)-1)
        return CUDNN_STATUS_NOT_SUPPORTED;
    *size = need;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t d, const cudnnFilterDescriptor_t dw,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t *size)
{
    shape s;
    cudnnStatus_t st = check("cudnnGetConvolutionBackwardFilterWorkspaceSize", h,
                             (const tensor *)x, (const tensor *)dw, (const conv *)d,
                             (const tensor *)dy, &s);
    if (st != CUDNN_STATUS_SUCCESS || !size)
        return st != CUDNN_STATUS_SUCCESS ? st : CUDNN_STATUS_BAD_PARAM;
    size_t need = bwd_filter_workspace(s, algo);
    if (need == (size_t)-1)
        return CUDNN_STATUS_NOT_SUPPORTED;
    *size = need;
    return CUDNN_STATUS_SUCCESS;
}

/* The _v7 heuristics: every algorithm of the pass, fastest first as cuDNN orders them;
 * unsupported ones with status NOT_SUPPORTED. */
#define FGEMU_PERF(arr, i, a, ws, det, cv, t, sh)                                            \
    do {                                                                                   \
        memset(&(arr)[i], 0, sizeof((arr)[i]));                                            \
        (arr)[i].algo = (a);                                                               \
        size_t need_ = (ws);                                                               \
        (arr)[i].status = need_ == (size_t)-1 ? CUDNN_STATUS_NOT_SUPPORTED                 \
                                              : CUDNN_STATUS_SUCCESS;                      \
        (arr)[i].memory = need_ == (size_t)-1 ? 0 : need_;                                 \
        (arr)[i].time = (float)(i + 1);                                                    \
        (arr)[i].determinism = (det) ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;      \
        (arr)[i].mathType = reported_math(cv, t, sh);                                      \
    } while (0)

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h,
                                                     const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t d,
                                                     const cudnnTensorDescriptor_t y,
                                                     const int requested, int *returned,
                                                     cudnnConvolutionFwdAlgoPerf_t *perf)
{
    shape s;
    const conv *cv = (const conv *)d;
    cudnnStatus_t st = check("cudnnGetConvolutionForwardAlgorithm_v7", h, (const tensor *)x,
                             (const tensor *)w, cv, (const tensor *)y, &s);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (requested < 1 || !returned || !perf)
        return CUDNN_STATUS_BAD_PARAM;
    const cudnnConvolutionFwdAlgo_t order[] = { CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                                CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                                CUDNN_CONVOLUTION_FWD_ALGO_FFT };
    cudnnDataType_t t = ((const tensor *)x)->type;
    int n = 0;
    for (int i = 0; i < 4 && n < requested; i++, n++)
        FGEMU_PERF(perf, n, order[i], fwd_workspace(s, order[i]), 1, cv, t, s);
    *returned = n;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h,
                                                          const cudnnFilterDescriptor_t w,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t d,
                                                          const cudnnTensorDescriptor_t dx,
                                                          const int requested, int *returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    shape s;
    const conv *cv = (const conv *)d;
    cudnnStatus_t st = check("cudnnGetConvolutionBackwardDataAlgorithm_v7", h,
                             (const tensor *)dx, (const tensor *)w, cv, (const tensor *)dy, &s);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (requested < 1 || !returned || !perf)
        return CUDNN_STATUS_BAD_PARAM;
    const cudnnConvolutionBwdDataAlgo_t order[] = { CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT };
    cudnnDataType_t t = ((const tensor *)dx)->type;
    int n = 0;
    for (int i = 0; i < 3 && n < requested; i++, n++)
        FGEMU_PERF(perf, n, order[i], bwd_data_workspace(s, order[i]),
                   order[i] != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, cv, t, s);
    *returned = n;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t d, const cudnnFilterDescriptor_t dw, const int requested,
    int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    shape s;
    const conv *cv = (const conv *)d;
    cudnnStatus_t st = check("cudnnGetConvolutionBackwardFilterAlgorithm_v7", h,
                             (const tensor *)x, (const tensor *)dw, cv, (const tensor *)dy, &s);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (requested < 1 || !returned || !perf)
        return CUDNN_STATUS_BAD_PARAM;
    const cudnnConvolutionBwdFilterAlgo_t order[] = { CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT };
    cudnnDataType_t t = ((const tensor *)x)->type;
    int n = 0;
    for (int i = 0; i < 4 && n < requested; i++, n++)
        FGEMU_PERF(perf, n, order[i], bwd_filter_workspace(s, order[i]),
                   order[i] == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, cv, t, s);
    *returned = n;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha,
                                      const cudnnTensorDescriptor_t xd, const void *x,
                                      const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t d,
                                      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_size,
                                      const void *beta, const cudnnTensorDescriptor_t yd,
                                      void *y)
{
    const char *who = "cudnnConvolutionForward";
    shape s;
    const conv *cv = (const conv *)d;
    const tensor *tx = (const tensor *)xd, *tw = (const tensor *)wd, *ty = (const tensor *)yd;
    cudnnStatus_t st = check(who, h, tx, tw, cv, ty, &s);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (!alpha || !beta)
        return CUDNN_STATUS_BAD_PARAM;
    float al = scalar(alpha), be = scalar(beta);
    const void *ptrs[] = { x, w, y };
    size_t bytes[] = { bytes_of(tx), bytes_of(tw), bytes_of(ty) };
    st = prepare(who, (const handle *)h, fwd_workspace(s, algo), ws, ws_size, ptrs, bytes, 3);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    cudnnDataType_t t = tx->type;
    int tf = uses_tf32(cv, t);
    std::vector<float> fx = widen(x, t, count_of(tx), tf), fw = widen(w, t, count_of(tw), tf);
    for (int n = 0; n < s.n; n++)
        for (int k = 0; k < s.k; k++)
            for (int oy = 0; oy < s.oh; oy++)
                for (int ox = 0; ox < s.ow; ox++) {
                    float acc = 0.0f;
                    for (int c = 0; c < s.c; c++)
                        for (int i = 0; i < s.r; i++)
                            for (int j = 0; j < s.s; j++) {
                                int ih, iw;
                                tap(cv, s, oy, ox, i, j, &ih, &iw);
                                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w)
                                    continue;
                                acc += fx[xi(s, n, c, ih, iw)] * fw[wi(s, k, c, i, j)];
                            }
                    size_t o = yi(s, n, k, oy, ox);
                    float v = al * acc;
                    if (be != 0.0f)
                        v += be * fgemu::load(y, data(t), o);
                    fgemu::store(y, data(t), o, v);
                }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
                                           const cudnnFilterDescriptor_t wd, const void *w,
                                           const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const cudnnConvolutionDescriptor_t d,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws,
                                           size_t ws_size, const void *beta,
                                           const cudnnTensorDescriptor_t dxd, void *dx)
{
    const char *who = "cudnnConvolutionBackwardData";
    shape s;
    const conv *cv = (const conv *)d;
    const tensor *tx = (const tensor *)dxd, *tw = (const tensor *)wd, *ty = (const tensor *)dyd;
    cudnnStatus_t st = check(who, h, tx, tw, cv, ty, &s);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (!alpha || !beta)
        return CUDNN_STATUS_BAD_PARAM;
    float al = scalar(alpha), be = scalar(beta);
    const void *ptrs[] = { dx, w, dy };
    size_t bytes[] = { bytes_of(tx), bytes_of(tw), bytes_of(ty) };
    st = prepare(who, (const handle *)h, bwd_data_workspace(s, algo), ws, ws_size, ptrs, bytes,
                 3);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    cudnnDataType_t t = tx->type;
    int tf = uses_tf32(cv, t);
    size_t count = (size_t)s.n * s.c * s.h * s.w;
    std::vector<float> fdy = widen(dy, t, count_of(ty), tf), fw = widen(w, t, count_of(tw), tf);
    float *acc = (float *)calloc(count, sizeof(float));
    if (!acc)
        return CUDNN_STATUS_ALLOC_FAILED;
    for (int n = 0; n < s.n; n++)
        for (int k = 0; k < s.k; k++)
            for (int oy = 0; oy < s.oh; oy++)
                for (int ox = 0; ox < s.ow; ox++) {
                    float g = fdy[yi(s, n, k, oy, ox)];
                    for (int c = 0; c < s.c; c++)
                        for (int i = 0; i < s.r; i++)
                            for (int j = 0; j < s.s; j++) {
                                int ih, iw;
                                tap(cv, s, oy, ox, i, j, &ih, &iw);
                                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w)
                                    continue;
                                acc[xi(s, n, c, ih, iw)] += g * fw[wi(s, k, c, i, j)];
                            }
                }
    for (size_t i = 0; i < count; i++) {
        float v = al * acc[i];
        if (be != 0.0f)
            v += be * fgemu::load(dx, data(t), i);
        fgemu::store(dx, data(t), i, v);
    }
    free(acc);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha,
                                             const cudnnTensorDescriptor_t xd, const void *x,
                                             const cudnnTensorDescriptor_t dyd, const void *dy,
                                             const cudnnConvolutionDescriptor_t d,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws,
                                             size_t ws_size, const void *beta,
                                             const cudnnFilterDescriptor_t dwd, void *dw)
{
    const char *who = "cudnnConvolutionBackwardFilter";
    shape s;
    const conv *cv = (const conv *)d;
    const tensor *tx = (const tensor *)xd, *tw = (const tensor *)dwd, *ty = (const tensor *)dyd;
    cudnnStatus_t st = check(who, h, tx, tw, cv, ty, &s);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (!alpha || !beta)
        return CUDNN_STATUS_BAD_PARAM;
    float al = scalar(alpha), be = scalar(beta);
    const void *ptrs[] = { x, dw, dy };
    size_t bytes[] = { bytes_of(tx), bytes_of(tw), bytes_of(ty) };
    st = prepare(who, (const handle *)h, bwd_filter_workspace(s, algo), ws, ws_size, ptrs,
                 bytes, 3);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    cudnnDataType_t t = tx->type;
    int tf = uses_tf32(cv, t);
    std::vector<float> fx = widen(x, t, count_of(tx), tf), fdy = widen(dy, t, count_of(ty), tf);
    for (int k = 0; k < s.k; k++)
        for (int c = 0; c < s.c; c++)
            for (int i = 0; i < s.r; i++)
                for (int j = 0; j < s.s; j++) {
                    float acc = 0.0f;
                    for (int n = 0; n < s.n; n++)
                        for (int oy = 0; oy < s.oh; oy++)
                            for (int ox = 0; ox < s.ow; ox++) {
                                int ih, iw;
                                tap(cv, s, oy, ox, i, j, &ih, &iw);
                                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w)
                                    continue;
                                acc += fx[xi(s, n, c, ih, iw)] * fdy[yi(s, n, k, oy, ox)];
                            }
                    size_t o = wi(s, k, c, i, j);
                    float v = al * acc;
                    if (be != 0.0f)
                        v += be * fgemu::load(dw, data(t), o);
                    fgemu::store(dw, data(t), o, v);
                }
    return CUDNN_STATUS_SUCCESS;
}

} // extern "C"

namespace {

/* Find*Ex's answer: each algorithm of `order` with its modelled time (cost[i] times the
 * pass's multiply-adds, in ms at a nominal 1e12 a second), sorted fastest first; the ones
 * that cannot run (NOT_SUPPORTED, ALLOC_FAILED above ws_size) after, at time -1. Returns
 * the fastest runnable algorithm's index in order, -1 if none. */
template <typename Perf, typename Algo>
int timed(Perf *perf, int requested, int *returned, const Algo *order, const double *cost,
          const int *det, int count, const size_t *need, size_t ws_size, const conv *cv,
          cudnnDataType_t t, const shape &s)
{
    double macs = (double)s.n * s.k * s.oh * s.ow * s.c * s.r * s.s;
    std::vector<Perf> all((size_t)count);
    std::vector<double> key((size_t)count);
    for (int i = 0; i < count; i++) {
        Perf &p = all[(size_t)i];
        memset(&p, 0, sizeof p);
        p.algo = order[i];
        p.determinism = det[i] ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
        p.mathType = reported_math(cv, t, s);
        if (need[i] == (size_t)-1) {
            p.status = CUDNN_STATUS_NOT_SUPPORTED;
            p.time = -1;
        } else if (need[i] > ws_size) {
            p.status = CUDNN_STATUS_ALLOC_FAILED;
            p.time = -1;
            p.memory = need[i];
        } else {
            p.status = CUDNN_STATUS_SUCCESS;
            p.time = (float)(cost[i] * macs / 1e9);
            p.memory = need[i];
        }
        key[(size_t)i] = p.status == CUDNN_STATUS_SUCCESS ? p.time : 1e30 + i;
    }
    std::vector<int> idx((size_t)count);
    for (int i = 0; i < count; i++)
        idx[(size_t)i] = i;
    for (int i = 1; i < count; i++) /* stable insertion sort by key */
        for (int j = i; j > 0 && key[(size_t)idx[(size_t)j]] < key[(size_t)idx[(size_t)j - 1]];
             j--) {
            int tmp = idx[(size_t)j];
            idx[(size_t)j] = idx[(size_t)j - 1];
            idx[(size_t)j - 1] = tmp;
        }
    int n = 0;
    for (; n < count && n < requested; n++)
        perf[n] = all[(size_t)idx[(size_t)n]];
    *returned = n;
    return all[(size_t)idx[0]].status == CUDNN_STATUS_SUCCESS ? idx[0] : -1;
}

} // namespace

extern "C" {

/* The Find*Ex calls: the checks of the pass, the pass run once into the caller's output
 * with the fastest algorithm (cuDNN runs each; they compute the same values here), then
 * the modelled timings. Forward: implicit precomputed GEMM fastest; backward data:
 * ALGO_1; backward filter: the non-deterministic ALGO_0, so a timed choice differs from
 * the deterministic heuristic one (ALGO_1). */
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t d,
    const cudnnTensorDescriptor_t yd, void *y, const int requested, int *returned,
    cudnnConvolutionFwdAlgoPerf_t *perf, void *ws, size_t ws_size)
{
    shape s;
    const conv *cv = (const conv *)d;
    cudnnStatus_t st = check("cudnnFindConvolutionForwardAlgorithmEx", h, (const tensor *)xd,
                             (const tensor *)wd, cv, (const tensor *)yd, &s);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (requested < 1 || !returned || !perf)
        return CUDNN_STATUS_BAD_PARAM;
    const cudnnConvolutionFwdAlgo_t order[] = { CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                                CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                                                CUDNN_CONVOLUTION_FWD_ALGO_FFT };
    const double cost[] = { 2.0, 1.0, 1.5, 1.0 };
    const int det[] = { 1, 1, 1, 1 };
    size_t need[4];
    for (int i = 0; i < 4; i++)
        need[i] = fwd_workspace(s, order[i]);
    int best = timed(perf, requested, returned, order, cost, det, 4, need, ws_size, cv,
                     ((const tensor *)xd)->type, s);
    if (best < 0)
        return CUDNN_STATUS_SUCCESS;
    float one = 1.0f, zero = 0.0f;
    return cudnnConvolutionForward(h, &one, xd, x, wd, w, d, order[best], ws, ws_size, &zero,
                                   yd, y);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t h, const cudnnFilterDescriptor_t wd, const void *w,
    const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t d,
    const cudnnTensorDescriptor_t dxd, void *dx, const int requested, int *returned,
    cudnnConvolutionBwdDataAlgoPerf_t *perf, void *ws, size_t ws_size)
{
    shape s;
    const conv *cv = (const conv *)d;
    cudnnStatus_t st = check("cudnnFindConvolutionBackwardDataAlgorithmEx", h,
                             (const tensor *)dxd, (const tensor *)wd, cv, (const tensor *)dyd,
                             &s);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (requested < 1 || !returned || !perf)
        return CUDNN_STATUS_BAD_PARAM;
    const cudnnConvolutionBwdDataAlgo_t order[] = { CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT };
    const double cost[] = { 1.3, 1.0, 1.0 };
    const int det[] = { 0, 1, 1 };
    size_t need[3];
    for (int i = 0; i < 3; i++)
        need[i] = bwd_data_workspace(s, order[i]);
    int best = timed(perf, requested, returned, order, cost, det, 3, need, ws_size, cv,
                     ((const tensor *)dxd)->type, s);
    if (best < 0)
        return CUDNN_STATUS_SUCCESS;
    float one = 1.0f, zero = 0.0f;
    return cudnnConvolutionBackwardData(h, &one, wd, w, dyd, dy, d, order[best], ws, ws_size,
                                        &zero, dxd, dx);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t d,
    const cudnnFilterDescriptor_t dwd, void *dw, const int requested, int *returned,
    cudnnConvolutionBwdFilterAlgoPerf_t *perf, void *ws, size_t ws_size)
{
    shape s;
    const conv *cv = (const conv *)d;
    cudnnStatus_t st = check("cudnnFindConvolutionBackwardFilterAlgorithmEx", h,
                             (const tensor *)xd, (const tensor *)dwd, cv, (const tensor *)dyd,
                             &s);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (requested < 1 || !returned || !perf)
        return CUDNN_STATUS_BAD_PARAM;
    const cudnnConvolutionBwdFilterAlgo_t order[] = { CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT };
    const double cost[] = { 1.0, 1.6, 1.2, 1.0 };
    const int det[] = { 0, 1, 0, 1 };
    size_t need[4];
    for (int i = 0; i < 4; i++)
        need[i] = bwd_filter_workspace(s, order[i]);
    int best = timed(perf, requested, returned, order, cost, det, 4, need, ws_size, cv,
                     ((const tensor *)xd)->type, s);
    if (best < 0)
        return CUDNN_STATUS_SUCCESS;
    float one = 1.0f, zero = 0.0f;
    return cudnnConvolutionBackwardFilter(h, &one, xd, x, dyd, dy, d, order[best], ws, ws_size,
                                          &zero, dwd, dw);
}

} // extern "C"

