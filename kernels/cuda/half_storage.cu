/* Half gradients and "true" half parameters: the fp32 helpers and fused optimizer updates
 * over f32, f16 or bf16 storage, arithmetic in f32 with the formulas of elementwise.cu and
 * reduce.cu, results rounded to nearest even into their storage (st_dyn). */
#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kReduce = 256;

__global__ void sumsq_dyn_k(const void *x, int type, size_t n, size_t chunk, double *partial)
{
    __shared__ double sh[kReduce];
    size_t lo = (size_t)blockIdx.x * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double acc = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += kReduce) {
        double v = (double)ld_dyn(x, type, i);
        acc += v * v;
    }
    double total = block_sum<kReduce>(acc, sh);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = total;
}

__global__ void partials_k(const double *partial, int count, float *out)
{
    __shared__ double sh[kReduce];
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += kReduce)
        acc += partial[i];
    double total = block_sum<kReduce>(acc, sh);
    if (threadIdx.x == 0)
        *out = (float)total;
}

__global__ void scale_clamp_dyn_k(void *x, int type, float alpha, float lo, float hi,
                                  int clamp, size_t n)
{
    FGCU_FOR(i, n)
    {
        float v = ld_dyn(x, type, i) * alpha;
        if (clamp)
            v = fminf(fmaxf(v, lo), hi);
        st_dyn(x, type, i, v);
    }
}

__global__ void sgd_dyn_k(fg_cu_sgd a, void *param, int pt, const void *grad, int gt,
                          float *__restrict__ buf, size_t n)
{
    float lr = a.lr, wd = a.weight_decay, mom = a.momentum, damp = 1.0f - a.dampening;
    FGCU_FOR(i, n)
    {
        float p = ld_dyn(param, pt, i);
        float g = ld_dyn(grad, gt, i) + wd * p;
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
        st_dyn(param, pt, i, p);
    }
}

__global__ void adamw_dyn_k(fg_cu_adamw a, void *param, int pt, const void *grad, int gt,
                            float *__restrict__ m, float *__restrict__ v, size_t n)
{
    float decay = 1.0f - a.lr * a.weight_decay, b1 = a.beta1, b2 = a.beta2;
    float step_size = a.lr / a.bc1;
    FGCU_FOR(i, n)
    {
        float g = ld_dyn(grad, gt, i);
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = ld_dyn(param, pt, i);
        st_dyn(param, pt, i, p * decay - step_size * mi / (sqrtf(vi) / a.bc2_sqrt + a.eps));
    }
}

} // namespace

extern "C" {

cudaError_t fg_cu_sum_squares_ex(cudaStream_t s, const void *x, int type, size_t n,
                                 float *out, double *scratch)
{
    if (!known_type(type))
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaMemsetAsync(out, 0, sizeof *out, s);
    size_t chunk = (n + FG_CU_REDUCE_BLOCKS - 1) / FG_CU_REDUCE_BLOCKS;
    if (chunk < 8192)
        chunk = 8192;
    unsigned blocks = (unsigned)((n + chunk - 1) / chunk);
    sumsq_dyn_k<<<blocks, kReduce, 0, s>>>(x, type, n, chunk, scratch);
    partials_k<<<1, kReduce, 0, s>>>(scratch, (int)blocks, out);
    return cudaGetLastError();
}

cudaError_t fg_cu_scale_clamp_ex(cudaStream_t s, void *x, int type, float alpha, float lo,
                                 float hi, int clamp, size_t n)
{
    if (!known_type(type))
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    scale_clamp_dyn_k<<<grid_for(n), kThreads, 0, s>>>(x, type, alpha, lo, hi, clamp, n);
    return cudaGetLastError();
}

cudaError_t fg_cu_sgd_update_ex(cudaStream_t s, const fg_cu_sgd *a, void *param, int pt,
                                const void *grad, int gt, float *buf, size_t n)
{
    if (!known_type(pt) || !known_type(gt))
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    sgd_dyn_k<<<grid_for(n), kThreads, 0, s>>>(*a, param, pt, grad, gt, buf, n);
    return cudaGetLastError();
}

cudaError_t fg_cu_adamw_update_ex(cudaStream_t s, const fg_cu_adamw *a, void *param, int pt,
                                  const void *grad, int gt, float *m, float *v, size_t n)
{
    if (!known_type(pt) || !known_type(gt))
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaSuccess;
    adamw_dyn_k<<<grid_for(n), kThreads, 0, s>>>(*a, param, pt, grad, gt, m, v, n);
    return cudaGetLastError();
}

} // extern "C"
