/* Max and average pooling over NCHW planes (or NHWC: the same planes with channel stride
 * c), as kernels/cpu/pool2d.c: forward one thread per output; backward one thread per input, which gathers the outputs whose window covers it
 * in ascending output order (the order the CPU scatters them in): no atomics, the same
 * sums bit for bit. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

template <typename T>
__global__ void pool_forward_k(fg_cu_window d, int is_max, const T *__restrict__ x,
                               T *__restrict__ y, int32_t *__restrict__ argmax, size_t total)
{
    float inv_window = 1.0f / (float)(d.r * d.s);
    size_t P = (size_t)d.out_h * (size_t)d.out_w, hw = (size_t)d.h * (size_t)d.w;
    FGCU_FOR(o, total)
    {
        size_t p, xs; /* p = oh * out_w + ow; xs: x's stride along w */
        const T *xp;
        if (d.nhwc) { /* o = (p of n) * c + ch; xp at (n, 0, 0, ch) */
            size_t ch = o % (size_t)d.c, q = o / (size_t)d.c, n = q / P;
            p = q - n * P;
            xp = x + n * hw * (size_t)d.c + ch;
            xs = (size_t)d.c;
        } else {
            size_t plane = o / P;
            p = o - plane * P;
            xp = x + plane * hw;
            xs = 1;
        }
        int oh = (int)(p / (size_t)d.out_w), ow = (int)(p - (size_t)oh * (size_t)d.out_w);
        int h0 = oh * d.stride_h - d.pad_h, w0 = ow * d.stride_w - d.pad_w;
        float best = -INFINITY, sum = 0.0f;
        int32_t where = -1;
        for (int r = 0; r < d.r; r++) {
            int ih = h0 + r;
            if (ih < 0 || ih >= d.h)
                continue;
            for (int s = 0; s < d.s; s++) {
                int iw = w0 + s;
                if (iw < 0 || iw >= d.w)
                    continue;
                float v = ld(xp, ((size_t)ih * (size_t)d.w + (size_t)iw) * xs);
                sum += v;
                if (v > best || (v != v && best == best) || where < 0) {
                    best = v;
                    where = ih * d.w + iw;
                }
            }
        }
        if (is_max) {
            st(y, o, where < 0 ? 0.0f : best);
            argmax[o] = where;
        } else {
            st(y, o, sum * inv_window);
        }
    }
}

/* First output index along one axis whose window (at stride, from -pad, `win` wide)
 * covers input i, and one past the last; an empty range when none does. */
__device__ __forceinline__ void covering(int i, int pad, int win, int stride, int out, int *lo,
                                         int *hi)
{
    int first = i + pad - win + 1; /* o*stride >= first */
    int l = first <= 0 ? 0 : (first + stride - 1) / stride;
    int h = (i + pad) / stride + 1; /* o*stride <= i + pad */
    *lo = l;
    *hi = h < out ? h : out;
}

template <typename T>
__global__ void pool_backward_k(fg_cu_window d, int is_max, const T *__restrict__ dy,
                                const int32_t *__restrict__ argmax, T *__restrict__ dx,
                                size_t total)
{
    float inv_window = 1.0f / (float)(d.r * d.s);
    size_t P = (size_t)d.out_h * (size_t)d.out_w, hw = (size_t)d.h * (size_t)d.w;
    FGCU_FOR(i, total)
    {
        size_t q, ys; /* q = ih * w + iw; ys: dy's stride along out_w */
        const T *g;
        const int32_t *am;
        if (d.nhwc) { /* i = (q of n) * c + ch; dy's (n, 0, 0, ch) and argmax likewise */
            size_t ch = i % (size_t)d.c, r = i / (size_t)d.c, n = r / hw;
            q = r - n * hw;
            g = dy + n * P * (size_t)d.c + ch;
            am = is_max ? argmax + n * P * (size_t)d.c + ch : NULL;
            ys = (size_t)d.c;
        } else {
            size_t plane = i / hw;
            q = i - plane * hw;
            g = dy + plane * P;
            am = is_max ? argmax + plane * P : NULL;
            ys = 1;
        }
        int ih = (int)(q / (size_t)d.w), iw = (int)(q - (size_t)ih * (size_t)d.w);
        int oh0, oh1, ow0, ow1;
        covering(ih, d.pad_h, d.r, d.stride_h, d.out_h, &oh0, &oh1);
        covering(iw, d.pad_w, d.s, d.stride_w, d.out_w, &ow0, &ow1);
        float acc = 0.0f;
        for (int oh = oh0; oh < oh1; oh++)
            for (int ow = ow0; ow < ow1; ow++) {
                size_t o = ((size_t)oh * (size_t)d.out_w + (size_t)ow) * ys;
                if (!is_max)
                    acc += ld(g, o) * inv_window;
                else if (am[o] == (int32_t)q)
                    acc += ld(g, o);
            }
        st(dx, i, acc);
    }
}

} // namespace

extern "C" {

cudaError_t fg_cu_pool_forward(cudaStream_t s, int type, int is_max, const fg_cu_window *d,
                               const void *x, void *y, int32_t *argmax)
{
    size_t total = (size_t)d->n * (size_t)d->c * (size_t)d->out_h * (size_t)d->out_w;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(total), kThreads, 0, s, pool_forward_k<T>)(
                      *d, is_max, (const T *)x, (T *)y, argmax, total));
    return cudaGetLastError();
}

cudaError_t fg_cu_pool_backward(cudaStream_t s, int type, int is_max, const fg_cu_window *d,
                                const void *dy, const int32_t *argmax, void *dx)
{
    size_t total = (size_t)d->n * (size_t)d->c * (size_t)d->h * (size_t)d->w;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(total), kThreads, 0, s, pool_backward_k<T>)(
                      *d, is_max, (const T *)dy, argmax, (T *)dx, total));
    return cudaGetLastError();
}

} // extern "C"
