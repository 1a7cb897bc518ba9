/* Elementwise kernels: fill/scale/axpy/clamp, conversions, activations, bias add, dropout
 * and the fused optimizer updates, each templated on its storage types (f32 arithmetic).
 * Each follows its kernels/cpu counterpart formula for formula (built with --fmad=false,
 * so the arithmetic rounds as the CPU's does). */
#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f

/* The streaming kernels run over packs of 16 bytes (for_vec, when every pointer is
 * 16-byte aligned: `vec`), then the tail one element at a time; VEC_BODY opens the body
 * of one pack of W elements starting at element i. */
#define VEC_BODY [&](size_t i, auto w_) { constexpr int W = decltype(w_)::value; (void)w_;

template <typename T> __global__ void fill_k(T *x, float v, size_t n, int vec)
{
    for_vec<vec_of<T>::value>(n, vec, VEC_BODY
        float o[W];
        for (int k = 0; k < W; k++)
            o[k] = v;
        st_n(x, i, o);
    });
}

template <typename T> __global__ void scale_k(T *x, float a, size_t n, int vec)
{
    for_vec<vec_of<T>::value>(n, vec, VEC_BODY
        float v[W];
        ld_n(x, i, v);
        for (int k = 0; k < W; k++)
            v[k] = v[k] * a;
        st_n(x, i, v);
    });
}

template <typename X, typename Y>
__global__ void axpy_k(float a, const X *x, Y *y, size_t n, int vec)
{
    for_vec<vec_of<X, Y>::value>(n, vec, VEC_BODY
        float xv[W], yv[W];
        ld_n(x, i, xv);
        ld_n(y, i, yv);
        for (int k = 0; k < W; k++)
            yv[k] = yv[k] + a * xv[k];
        st_n(y, i, yv);
    });
}

/* NaN stays NaN: both comparisons are false for it (fminf/fmaxf would drop it). */
template <typename T> __global__ void clamp_k(T *x, float lo, float hi, size_t n, int vec)
{
    for_vec<vec_of<T>::value>(n, vec, VEC_BODY
        float v[W];
        ld_n(x, i, v);
        for (int k = 0; k < W; k++) {
            float e = v[k] < lo ? lo : v[k];
            v[k] = e > hi ? hi : e;
        }
        st_n(x, i, v);
    });
}

template <typename D, typename S>
__global__ void convert_k(D *__restrict__ dst, const S *__restrict__ src, size_t n, int vec)
{
    for_vec<vec_of<D, S>::value>(n, vec, VEC_BODY
        float v[W];
        ld_n(src, i, v);
        st_n(dst, i, v);
    });
}

/* dst(rows, cols; dst_ld) = src(rows, cols; src_ld): one launch for a strided matrix. */
template <typename D, typename S>
__global__ void convert_rows_k(D *__restrict__ dst, size_t dst_ld, const S *__restrict__ src,
                               size_t src_ld, size_t rows, size_t cols)
{
    FGCU_FOR(i, rows * cols)
    {
        size_t r = i / cols, c = i - r * cols;
        st(dst, r * dst_ld + c, ld(src, r * src_ld + c));
    }
}

template <typename D, typename S>
__global__ void accumulate_k(D *__restrict__ dst, const S *__restrict__ src, size_t n, int acc,
                             int vec)
{
    for_vec<vec_of<D, S>::value>(n, vec, VEC_BODY
        float d[W], v[W];
        ld_n(src, i, v);
        if (acc)
            ld_n(dst, i, d);
        for (int k = 0; k < W; k++)
            d[k] = (acc ? d[k] : 0.0f) + v[k];
        st_n(dst, i, d);
    });
}

template <typename T> __global__ void scale_matrix_k(T *c, int rows, int cols, int ldc, float beta)
{
    size_t n = (size_t)rows * (size_t)cols;
    FGCU_FOR(i, n)
    {
        size_t o = (i / (size_t)cols) * (size_t)ldc + i % (size_t)cols;
        st(c, o, beta == 0.0f ? 0.0f : ld(c, o) * beta);
    }
}

__device__ __forceinline__ float act_one(int act, float v)
{
    switch (act) {
    case 1: return v > 0.0f ? v : 0.0f;
    case 2: {
        float t = tanhf(GELU_K0 * (v + GELU_K1 * v * v * v));
        return 0.5f * v * (1.0f + t);
    }
    case 3: return tanhf(v);
    case 4: return 1.0f / (1.0f + expf(-v));
    default: return v;
    }
}

template <typename T>
__global__ void act_forward_k(int act, const T *x, T *y, size_t n, int vec)
{
    for_vec<vec_of<T>::value>(n, vec, VEC_BODY
        float v[W];
        ld_n(x, i, v);
        for (int k = 0; k < W; k++)
            v[k] = act_one(act, v[k]);
        st_n(y, i, v);
    });
}

/* dy * act'(x) from x (relu, gelu) or y (tanh, sigmoid): `v` holds the one read. */
__device__ __forceinline__ float act_grad_one(int act, float v, float g)
{
    switch (act) {
    case 1: return v > 0.0f ? g : 0.0f;
    case 2: {
        float t = tanhf(GELU_K0 * (v + GELU_K1 * v * v * v));
        float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * v * v);
        return g * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    }
    case 3: return g * (1.0f - v * v);
    case 4: return g * v * (1.0f - v);
    default: return g;
    }
}

/* relu and gelu read x, tanh and sigmoid y; the other pointer may be NULL. */
template <typename T>
__global__ void act_backward_k(int act, const T *x, const T *y, const T *dy,
                               T *dx, size_t n, int vec)
{
    const T *in = act == 1 || act == 2 ? x : act == 3 || act == 4 ? y : NULL;
    for_vec<vec_of<T>::value>(n, vec, VEC_BODY
        float g[W], v[W];
        ld_n(dy, i, g);
        if (in)
            ld_n(in, i, v);
        for (int k = 0; k < W; k++)
            g[k] = act_grad_one(act, in ? v[k] : 0.0f, g[k]);
        st_n(dx, i, g);
    });
}

template <typename T>
__global__ void bias_add_k(T *y, const void *bias, int bias_type, int cols, int spatial,
                           size_t n, int vec)
{
    for_vec<vec_of<T>::value>(n, vec, VEC_BODY
        float v[W];
        ld_n(y, i, v);
        for (int k = 0; k < W; k++)
            v[k] = v[k] + ld_dyn(bias, bias_type, ((i + k) / (size_t)spatial) % (size_t)cols);
        st_n(y, i, v);
    });
}

template <typename T>
__global__ void dropout_forward_k(uint64_t key, uint64_t offset, const uint64_t *offset_dev,
                                  uint32_t threshold, float scale, const T *x, T *y,
                                  uint8_t *mask, size_t n, int vec)
{
    if (offset_dev) /* the step's part, in device memory (CUDA graphs) */
        offset += *offset_dev;
    for_vec<vec_of<T>::value>(n, vec, VEC_BODY
        float v[W];
        ld_n(x, i, v);
        for (int k = 0; k < W; k++) {
            uint64_t z = mix64(key + (offset + i + k) * 0x9E3779B97F4A7C15ull);
            int keep = (uint32_t)(z >> 40) >= threshold;
            mask[i + k] = (uint8_t)keep;
            v[k] = keep ? v[k] * scale : 0.0f;
        }
        st_n(y, i, v);
    });
}

/* One thread: after the draws that read it, the counter moves on to the next step's. */
__global__ void dropout_advance_k(uint64_t *offset_dev, uint64_t advance)
{
    *offset_dev += advance;
}

template <typename T>
__global__ void dropout_backward_k(float scale, const uint8_t *__restrict__ mask,
                                   const T *dy, T *dx, size_t n, int vec)
{
    for_vec<vec_of<T>::value>(n, vec, VEC_BODY
        float v[W];
        ld_n(dy, i, v);
        for (int k = 0; k < W; k++)
            v[k] = mask[i + k] ? v[k] * scale : 0.0f;
        st_n(dx, i, v);
    });
}

/* Each element's update in f32 from the widened parameter, rounded back into P. */
template <typename P, typename G>
__global__ void sgd_k(fg_cu_sgd a, P *__restrict__ param, const G *__restrict__ grad,
                      float *__restrict__ buf, size_t n)
{
    float lr = a.lr, wd = a.weight_decay, mom = a.momentum, damp = 1.0f - a.dampening;
    FGCU_FOR(i, n)
    {
        float p = ld(param, i);
        float g = ld(grad, i) + wd * p;
        if (mom == 0.0f) {
            p -= lr * g;
        } else if (a.first_step) {
            buf[i] = g;
            p -= lr * (a.nesterov ? g + mom * g : g);
        } else {
            float nb = mom * buf[i] + damp * g;
            buf[i] = nb;
            p -= lr * (a.nesterov ? g + mom * nb : nb);
        }
        st(param, i, p);
    }
}

template <typename P, typename G>
__global__ void adamw_k(fg_cu_adamw a, P *__restrict__ param, const G *__restrict__ grad,
                        float *__restrict__ m, float *__restrict__ v, size_t n)
{
    float decay = 1.0f - a.lr * a.weight_decay, b1 = a.beta1, b2 = a.beta2;
    float step_size = a.lr / a.bc1;
    FGCU_FOR(i, n)
    {
        float g = ld(grad, i);
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        st(param, i, ld(param, i) * decay - step_size * mi / (sqrtf(vi) / a.bc2_sqrt + a.eps));
    }
}

template <typename D>
cudaError_t convert_rows_to(cudaStream_t s, D *dst, size_t dst_ld, const void *src,
                            int src_type, size_t src_ld, size_t rows, size_t cols)
{
    size_t n = rows * cols;
    FGCU_DISPATCH(src_type, S,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, convert_rows_k<D, S>)(
                      dst, dst_ld, (const S *)src, src_ld, rows, cols));
    return cudaGetLastError();
}

template <typename D>
cudaError_t convert_to(cudaStream_t s, D *dst, const void *src, int src_type, size_t n)
{
    FGCU_DISPATCH(src_type, S,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, convert_k<D, S>)(
                      dst, (const S *)src, n, aligned16(dst, src)));
    return cudaGetLastError();
}

template <typename D>
cudaError_t accumulate_to(cudaStream_t s, D *dst, const void *src, int src_type, size_t n,
                          int acc)
{
    FGCU_DISPATCH(src_type, S,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, accumulate_k<D, S>)(
                      dst, (const S *)src, n, acc, aligned16(dst, src)));
    return cudaGetLastError();
}

} // namespace

extern "C" {

cudaError_t fg_cu_fill(cudaStream_t s, int type, void *x, float value, size_t n)
{
    FGCU_DISPATCH(type, T, FGCU_LAUNCH(grid_for(n), kThreads, 0, s, fill_k<T>)((T *)x, value, n, aligned16(x)));
    return cudaGetLastError();
}

cudaError_t fg_cu_scale(cudaStream_t s, int type, void *x, float alpha, size_t n)
{
    FGCU_DISPATCH(type, T, FGCU_LAUNCH(grid_for(n), kThreads, 0, s, scale_k<T>)((T *)x, alpha, n, aligned16(x)));
    return cudaGetLastError();
}

cudaError_t fg_cu_axpy(cudaStream_t s, int x_type, int y_type, float alpha, const void *x,
                       void *y, size_t n)
{
    FGCU_DISPATCH(y_type, Y,
                  FGCU_DISPATCH(x_type, X,
                                FGCU_LAUNCH(grid_for(n), kThreads, 0, s, axpy_k<X, Y>)(
                                    alpha, (const X *)x, (Y *)y, n, aligned16(x, y))));
    return cudaGetLastError();
}

cudaError_t fg_cu_clamp(cudaStream_t s, int type, void *x, float lo, float hi, size_t n)
{
    FGCU_DISPATCH(type, T, FGCU_LAUNCH(grid_for(n), kThreads, 0, s, clamp_k<T>)((T *)x, lo, hi, n, aligned16(x)));
    return cudaGetLastError();
}

cudaError_t fg_cu_convert(cudaStream_t s, void *dst, int dst_type, const void *src,
                          int src_type, size_t n)
{
    if (dst_type == src_type && known_type(dst_type))
        return cudaMemcpyAsync(dst, src, n * (dst_type == F32 ? 4 : 2), cudaMemcpyDeviceToDevice,
                               s);
    FGCU_DISPATCH(dst_type, D, return convert_to<D>(s, (D *)dst, src, src_type, n));
    return cudaSuccess;
}

cudaError_t fg_cu_convert_rows(cudaStream_t s, void *dst, int dst_type, size_t dst_ld,
                               const void *src, int src_type, size_t src_ld, size_t rows,
                               size_t cols)
{
    if (rows == 0 || cols == 0)
        return cudaSuccess;
    FGCU_DISPATCH(dst_type, D,
                  return convert_rows_to<D>(s, (D *)dst, dst_ld, src, src_type, src_ld, rows,
                                            cols));
    return cudaSuccess;
}

cudaError_t fg_cu_accumulate(cudaStream_t s, void *dst, int dst_type, const void *src,
                             int src_type, size_t n, int accumulate)
{
    FGCU_DISPATCH(dst_type, D,
                  return accumulate_to<D>(s, (D *)dst, src, src_type, n, accumulate));
    return cudaSuccess;
}

cudaError_t fg_cu_scale_matrix(cudaStream_t s, int type, void *c, int rows, int cols, int ld,
                               float beta)
{
    size_t n = (size_t)rows * (size_t)cols;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, scale_matrix_k<T>)(
                      (T *)c, rows, cols, ld, beta));
    return cudaGetLastError();
}

cudaError_t fg_cu_act_forward(cudaStream_t s, int type, int act, const void *x, void *y,
                              size_t n)
{
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, act_forward_k<T>)(
                      act, (const T *)x, (T *)y, n, aligned16(x, y)));
    return cudaGetLastError();
}

cudaError_t fg_cu_act_backward(cudaStream_t s, int type, int act, const void *x,
                               const void *y, const void *dy, void *dx, size_t n)
{
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, act_backward_k<T>)(
                      act, (const T *)x, (const T *)y, (const T *)dy, (T *)dx, n,
                      aligned16(x, y, dy, dx)));
    return cudaGetLastError();
}

cudaError_t fg_cu_bias_add(cudaStream_t s, int type, int bias_type, void *y, const void *bias,
                           int rows, int cols, int spatial)
{
    if (!known_type(bias_type))
        return cudaErrorInvalidValue;
    size_t n = (size_t)rows * (size_t)cols * (size_t)spatial;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, bias_add_k<T>)(
                      (T *)y, bias, bias_type, cols, spatial, n, aligned16(y)));
    return cudaGetLastError();
}

cudaError_t fg_cu_dropout_forward(cudaStream_t s, int type, uint64_t key, uint64_t offset,
                                  uint32_t threshold, float scale, const void *x, void *y,
                                  uint8_t *mask, size_t n)
{
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, dropout_forward_k<T>)(
                      key, offset, (const uint64_t *)NULL, threshold, scale, (const T *)x,
                      (T *)y, mask, n, aligned16(x, y)));
    return cudaGetLastError();
}

cudaError_t fg_cu_dropout_forward_dev(cudaStream_t s, int type, uint64_t key, uint64_t offset,
                                      uint64_t *offset_dev, uint64_t advance,
                                      uint32_t threshold, float scale, const void *x, void *y,
                                      uint8_t *mask, size_t n)
{
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, dropout_forward_k<T>)(
                      key, offset, (const uint64_t *)offset_dev, threshold, scale,
                      (const T *)x, (T *)y, mask, n, aligned16(x, y)));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || advance == 0)
        return e;
    FGCU_LAUNCH(1, 1, 0, s, dropout_advance_k)(offset_dev, advance);
    return cudaGetLastError();
}

cudaError_t fg_cu_dropout_backward(cudaStream_t s, int type, float scale, const uint8_t *mask,
                                   const void *dy, void *dx, size_t n)
{
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, dropout_backward_k<T>)(
                      scale, mask, (const T *)dy, (T *)dx, n, aligned16(dy, dx)));
    return cudaGetLastError();
}

cudaError_t fg_cu_sgd_update(cudaStream_t s, const fg_cu_sgd *a, void *param, int param_type,
                             const void *grad, int grad_type, float *buf, size_t n)
{
    FGCU_DISPATCH(param_type, P,
                  FGCU_DISPATCH(grad_type, G,
                                FGCU_LAUNCH(grid_for(n), kThreads, 0, s, sgd_k<P, G>)(
                                    *a, (P *)param, (const G *)grad, buf, n)));
    return cudaGetLastError();
}

cudaError_t fg_cu_adamw_update(cudaStream_t s, const fg_cu_adamw *a, void *param,
                               int param_type, const void *grad, int grad_type, float *m,
                               float *v, size_t n)
{
    FGCU_DISPATCH(param_type, P,
                  FGCU_DISPATCH(grad_type, G,
                                FGCU_LAUNCH(grid_for(n), kThreads, 0, s, adamw_k<P, G>)(
                                    *a, (P *)param, (const G *)grad, m, v, n)));
    return cudaGetLastError();
}

} // extern "C"
