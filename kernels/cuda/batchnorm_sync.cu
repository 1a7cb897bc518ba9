/* Batch normalisation split around a reduction across replicas ([model] sync_batchnorm),
 * as kernels/cpu/batchnorm_sync.c: local f64 sums, the normalisation from summed ones, and
 * the two halves of backward. One block per channel (batchnorm.cu's layout and tree order);
 * block 0 also writes the count that ends each (2c + 1) vector of sums. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kSyncBnThreads = 512;

/* Offset of the channel's j-th value, j in [0, n*spatial). */
__device__ __forceinline__ size_t sbn_at(size_t j, size_t sp, size_t csp, size_t ch)
{
    size_t i = j / sp;
    return i * csp + ch * sp + (j - i * sp);
}

template <typename T>
__global__ void sbn_stats_k(int n, int c, int spatial, const T *x, double *stats)
{
    __shared__ double sh[kSyncBnThreads];
    size_t ch = blockIdx.x, sp = (size_t)spatial, csp = (size_t)c * sp;
    size_t count = (size_t)n * sp;
    double a = 0.0, q = 0.0;
    for (size_t j = threadIdx.x; j < count; j += kSyncBnThreads) {
        double v = (double)ld(x, sbn_at(j, sp, csp, ch));
        a += v;
        q += v * v;
    }
    double sum = block_sum<kSyncBnThreads>(a, sh);
    double sumsq = block_sum<kSyncBnThreads>(q, sh);
    if (threadIdx.x == 0) {
        stats[ch] = sum;
        stats[(size_t)c + ch] = sumsq;
        if (ch == 0)
            stats[2 * (size_t)c] = (double)count;
    }
}

template <typename T>
__global__ void sbn_apply_k(int n, int c, int spatial, const T *x, const double *stats,
                            const void *gamma, const void *beta, int param_type,
                            float *running_mean, float *running_var, float momentum,
                            float eps, float *saved_mean, float *saved_invstd, T *y)
{
    __shared__ float coef[2];
    size_t ch = blockIdx.x, sp = (size_t)spatial, csp = (size_t)c * sp;
    size_t count = (size_t)n * sp;
    if (threadIdx.x == 0) {
        double total = stats[2 * (size_t)c];
        double mean = stats[ch] / total;
        double var = stats[(size_t)c + ch] / total - mean * mean; /* biased */
        if (!(var > 0.0))
            var = 0.0;
        double invstd = 1.0 / sqrt(var + (double)eps);
        saved_mean[ch] = (float)mean;
        saved_invstd[ch] = (float)invstd;
        double m = (double)momentum;
        double unbiased = total > 1.0 ? var * total / (total - 1.0) : var;
        if (running_mean) {
            running_mean[ch] = (float)((1.0 - m) * running_mean[ch] + m * mean);
            running_var[ch] = (float)((1.0 - m) * running_var[ch] + m * unbiased);
        }
        float g = gamma ? ld_dyn(gamma, param_type, ch) : 1.0f;
        coef[0] = (float)mean;
        coef[1] = (float)(invstd * g);
    }
    __syncthreads();
    float fmean = coef[0], scale = coef[1];
    float be = beta ? ld_dyn(beta, param_type, ch) : 0.0f;
    for (size_t j = threadIdx.x; j < count; j += kSyncBnThreads) {
        size_t at = sbn_at(j, sp, csp, ch);
        st(y, at, (ld(x, at) - fmean) * scale + be);
    }
}

__device__ __forceinline__ void sbn_store(void *p, int type, size_t ch, double v, int accumulate)
{
    st_dyn(p, type, ch, (float)(accumulate ? (double)ld_dyn(p, type, ch) + v : v));
}

template <typename T>
__global__ void sbn_backward_reduce_k(int n, int c, int spatial, const T *x,
                                      const float *saved_mean, const float *saved_invstd,
                                      const T *dy, double *sums, void *dgamma, void *dbeta,
                                      int grad_type, int accumulate)
{
    __shared__ double sh[kSyncBnThreads];
    size_t ch = blockIdx.x, sp = (size_t)spatial, csp = (size_t)c * sp;
    size_t count = (size_t)n * sp;
    double mean = saved_mean[ch], invstd = saved_invstd[ch];
    double a0 = 0.0, a1 = 0.0;
    for (size_t j = threadIdx.x; j < count; j += kSyncBnThreads) {
        size_t at = sbn_at(j, sp, csp, ch);
        double g = (double)ld(dy, at);
        a0 += g;
        a1 += g * ((double)ld(x, at) - mean);
    }
    double sum_dy = block_sum<kSyncBnThreads>(a0, sh);
    double sum_dy_xhat = block_sum<kSyncBnThreads>(a1, sh) * invstd;
    if (threadIdx.x == 0) {
        sums[ch] = sum_dy;
        sums[(size_t)c + ch] = sum_dy_xhat;
        if (ch == 0)
            sums[2 * (size_t)c] = (double)count;
        if (dbeta)
            sbn_store(dbeta, grad_type, ch, sum_dy, accumulate);
        if (dgamma)
            sbn_store(dgamma, grad_type, ch, sum_dy_xhat, accumulate);
    }
}

template <typename T>
__global__ void sbn_backward_apply_k(int n, int c, int spatial, const T *x, const void *gamma,
                                     int param_type, const float *saved_mean,
                                     const float *saved_invstd, const T *dy,
                                     const double *sums, T *dx)
{
    size_t ch = blockIdx.x, sp = (size_t)spatial, csp = (size_t)c * sp;
    size_t count = (size_t)n * sp;
    double total = sums[2 * (size_t)c];
    double invstd = saved_invstd[ch];
    double g = gamma ? (double)ld_dyn(gamma, param_type, ch) : 1.0;
    double k = g * invstd; /* dx = a*dy + c*(x - mean) + d, as batchnorm.cu folds it */
    double mdy = sums[ch] / total, mdyx = sums[(size_t)c + ch] / total;
    float fa = (float)k, fc = (float)(-k * mdyx * invstd), fd = (float)(-k * mdy);
    float fmean = saved_mean[ch];
    for (size_t j = threadIdx.x; j < count; j += kSyncBnThreads) {
        size_t at = sbn_at(j, sp, csp, ch);
        st(dx, at, fa * ld(dy, at) + fc * (ld(x, at) - fmean) + fd);
    }
}

} // namespace

extern "C" {

cudaError_t fg_cu_bn_stats(cudaStream_t s, int type, int n, int c, int spatial, const void *x,
                           double *stats)
{
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH((unsigned)c, kSyncBnThreads, 0, s, sbn_stats_k<T>)(
                      n, c, spatial, (const T *)x, stats));
    return cudaGetLastError();
}

cudaError_t fg_cu_bn_apply(cudaStream_t s, int type, int param_type, int n, int c, int spatial,
                           const void *x, const double *stats, const void *gamma,
                           const void *beta, float *running_mean, float *running_var,
                           float momentum, float eps, float *saved_mean, float *saved_invstd,
                           void *y)
{
    if (!known_type(param_type))
        return cudaErrorInvalidValue;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH((unsigned)c, kSyncBnThreads, 0, s, sbn_apply_k<T>)(
                      n, c, spatial, (const T *)x, stats, gamma, beta, param_type,
                      running_mean, running_var, momentum, eps, saved_mean, saved_invstd,
                      (T *)y));
    return cudaGetLastError();
}

cudaError_t fg_cu_bn_backward_reduce(cudaStream_t s, int type, int grad_type, int n, int c,
                                     int spatial, const void *x, const float *saved_mean,
                                     const float *saved_invstd, const void *dy, double *sums,
                                     void *dgamma, void *dbeta, int accumulate)
{
    if (!known_type(grad_type))
        return cudaErrorInvalidValue;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH((unsigned)c, kSyncBnThreads, 0, s, sbn_backward_reduce_k<T>)(
                      n, c, spatial, (const T *)x, saved_mean, saved_invstd, (const T *)dy,
                      sums, dgamma, dbeta, grad_type, accumulate));
    return cudaGetLastError();
}

cudaError_t fg_cu_bn_backward_apply(cudaStream_t s, int type, int param_type, int n, int c,
                                    int spatial, const void *x, const void *gamma,
                                    const float *saved_mean, const float *saved_invstd,
                                    const void *dy, const double *sums, void *dx)
{
    if (!known_type(param_type))
        return cudaErrorInvalidValue;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH((unsigned)c, kSyncBnThreads, 0, s, sbn_backward_apply_k<T>)(
                      n, c, spatial, (const T *)x, gamma, param_type, saved_mean,
                      saved_invstd, (const T *)dy, sums, (T *)dx));
    return cudaGetLastError();
}

} // extern "C"
