/* Batch normalisation over (n, c, spatial), as kernels/cpu/batchnorm.c: one block per
 * channel; the channel's sums in f64 (two passes: mean, then squared deviations), the
 * normalisation and the running-statistics update in the CPU's formulas. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kBnThreads = 512;

/* Offset of the channel's j-th value, j in [0, n*spatial). */
__device__ __forceinline__ size_t bn_at(size_t j, size_t sp, size_t csp, size_t ch)
{
    size_t i = j / sp;
    return i * csp + ch * sp + (j - i * sp);
}

template <typename T>
__global__ void bn_forward_k(int training, int n, int c, int spatial, const T *x,
                             const void *gamma, const void *beta, int param_type,
                             float *running_mean, float *running_var, float momentum, float eps,
                             float *saved_mean, float *saved_invstd, T *y)
{
    __shared__ double sh[kBnThreads];
    __shared__ double stat[2];
    size_t ch = blockIdx.x, sp = (size_t)spatial, csp = (size_t)c * sp;
    size_t count = (size_t)n * sp;
    double dcount = (double)count;
    if (training) {
        double acc = 0.0;
        for (size_t j = threadIdx.x; j < count; j += kBnThreads)
            acc += (double)ld(x, bn_at(j, sp, csp, ch));
        double mean = block_sum<kBnThreads>(acc, sh) / dcount;
        acc = 0.0;
        for (size_t j = threadIdx.x; j < count; j += kBnThreads) {
            double v = (double)ld(x, bn_at(j, sp, csp, ch)) - mean;
            acc += v * v;
        }
        double var = block_sum<kBnThreads>(acc, sh) / dcount; /* biased */
        if (threadIdx.x == 0) {
            double invstd = 1.0 / sqrt(var + (double)eps);
            saved_mean[ch] = (float)mean;
            saved_invstd[ch] = (float)invstd;
            double m = (double)momentum;
            double unbiased = dcount > 1.0 ? var * dcount / (dcount - 1.0) : var;
            if (running_mean)
                running_mean[ch] = (float)((1.0 - m) * running_mean[ch] + m * mean);
            if (running_var)
                running_var[ch] = (float)((1.0 - m) * running_var[ch] + m * unbiased);
            stat[0] = mean;
            stat[1] = invstd;
        }
    } else if (threadIdx.x == 0) {
        stat[0] = running_mean[ch];
        stat[1] = 1.0 / sqrt((double)running_var[ch] + (double)eps);
    }
    __syncthreads();
    double mean = stat[0], invstd = stat[1];
    float g = gamma ? ld_dyn(gamma, param_type, ch) : 1.0f;
    float be = beta ? ld_dyn(beta, param_type, ch) : 0.0f;
    float fmean = (float)mean, scale = (float)(invstd * g);
    for (size_t j = threadIdx.x; j < count; j += kBnThreads) {
        size_t at = bn_at(j, sp, csp, ch);
        st(y, at, (ld(x, at) - fmean) * scale + be);
    }
}

template <typename T>
__global__ void bn_backward_k(int n, int c, int spatial, const T *x,
                              const void *gamma, int param_type, const float *saved_mean,
                              const float *saved_invstd, const T *dy,
                              T *dx, void *dgamma, void *dbeta, int grad_type,
                              int accumulate)
{
    __shared__ double sh[kBnThreads];
    size_t ch = blockIdx.x, sp = (size_t)spatial, csp = (size_t)c * sp;
    size_t count = (size_t)n * sp;
    double dcount = (double)count;
    double mean = saved_mean[ch], invstd = saved_invstd[ch];
    double a0 = 0.0, a1 = 0.0;
    for (size_t j = threadIdx.x; j < count; j += kBnThreads) {
        size_t at = bn_at(j, sp, csp, ch);
        double g = (double)ld(dy, at);
        a0 += g;
        a1 += g * ((double)ld(x, at) - mean);
    }
    double sum_dy = block_sum<kBnThreads>(a0, sh);
    double sum_dy_xhat = block_sum<kBnThreads>(a1, sh) * invstd;
    if (threadIdx.x == 0) {
        if (dbeta)
            st_dyn(dbeta, grad_type, ch,
                   (float)(accumulate ? (double)ld_dyn(dbeta, grad_type, ch) + sum_dy : sum_dy));
        if (dgamma)
            st_dyn(dgamma, grad_type, ch,
                   (float)(accumulate ? (double)ld_dyn(dgamma, grad_type, ch) + sum_dy_xhat
                                      : sum_dy_xhat));
    }
    if (!dx)
        return;
    double g = gamma ? (double)ld_dyn(gamma, param_type, ch) : 1.0;
    double k = g * invstd;
    double mdy = sum_dy / dcount, mdyx = sum_dy_xhat / dcount;
    float fa = (float)k, fc = (float)(-k * mdyx * invstd), fd = (float)(-k * mdy);
    float fmean = (float)mean;
    for (size_t j = threadIdx.x; j < count; j += kBnThreads) {
        size_t at = bn_at(j, sp, csp, ch);
        st(dx, at, fa * ld(dy, at) + fc * (ld(x, at) - fmean) + fd);
    }
}

} // namespace

extern "C" {

cudaError_t fg_cu_bn_forward(cudaStream_t s, int type, int param_type, int training, int n,
                             int c, int spatial, const void *x, const void *gamma,
                             const void *beta, float *running_mean, float *running_var,
                             float momentum, float eps, float *saved_mean,
                             float *saved_invstd, void *y)
{
    if (!known_type(param_type))
        return cudaErrorInvalidValue;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH((unsigned)c, kBnThreads, 0, s, bn_forward_k<T>)(
                      training, n, c, spatial, (const T *)x, gamma, beta, param_type,
                      running_mean, running_var, momentum, eps, saved_mean, saved_invstd,
                      (T *)y));
    return cudaGetLastError();
}

cudaError_t fg_cu_bn_backward(cudaStream_t s, int type, int param_type, int grad_type, int n,
                              int c, int spatial, const void *x, const void *gamma,
                              const float *saved_mean, const float *saved_invstd,
                              const void *dy, void *dx, void *dgamma, void *dbeta,
                              int accumulate)
{
    if (!known_type(param_type) || !known_type(grad_type))
        return cudaErrorInvalidValue;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH((unsigned)c, kBnThreads, 0, s, bn_backward_k<T>)(
                      n, c, spatial, (const T *)x, gamma, param_type, saved_mean,
                      saved_invstd, dy ? (const T *)dy : NULL, (T *)dx, dgamma, dbeta,
                      grad_type, accumulate));
    return cudaGetLastError();
}

} // extern "C"
