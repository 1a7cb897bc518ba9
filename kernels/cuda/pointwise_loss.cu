/* Pointwise losses (mse, binary cross-entropy on logits), as kernels/cpu/pointwise_loss.c:
 * each value's loss, metric and gradient in the CPU's formulas (f64 where it uses f64), the
 * sums in f64 over fixed chunks, one block each, then the chunks in a fixed tree. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kLossThreads = 256;

/* One value: returns its loss, sets *metric and *grad (dl/dx). */
__device__ __forceinline__ double ploss_one(int kind, float x, float t, double *metric,
                                            float *grad)
{
    if (kind == 1) {
        float d = x - t;
        *metric = fabs((double)d);
        *grad = 2.0f * d;
        return (double)d * (double)d;
    }
    double e = exp(-fabs((double)x));
    double sig = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    *metric = (x > 0) == (t > 0.5f) ? 1.0 : 0.0;
    *grad = (float)(sig - (double)t);
    return (x > 0 ? (double)x : 0.0) - (double)x * (double)t + log1p(e);
}

template <typename T>
__global__ void ploss_partial_k(int kind, const T *x, const float *__restrict__ t, size_t n,
                                size_t chunk, float grad_scale, T *dx, double *loss,
                                double *metric)
{
    __shared__ double sh[kLossThreads];
    size_t lo = (size_t)blockIdx.x * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double l = 0.0, m = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += kLossThreads) {
        double mi;
        float g;
        l += ploss_one(kind, ld(x, i), t[i], &mi, &g);
        m += mi;
        if (dx)
            st(dx, i, g * grad_scale); /* after reading x[i]: dx may alias x */
    }
    double tl = block_sum<kLossThreads>(l, sh);
    double tm = block_sum<kLossThreads>(m, sh);
    if (threadIdx.x == 0) {
        loss[blockIdx.x] = tl;
        metric[blockIdx.x] = tm;
    }
}

__global__ void ploss_sum_k(const double *loss, const double *metric, int count, float scale,
                            float *loss_sum, float *metric_sum)
{
    __shared__ double sh[kLossThreads];
    double l = 0.0, m = 0.0;
    for (int i = threadIdx.x; i < count; i += kLossThreads) {
        l += loss[i];
        m += metric[i];
    }
    double tl = block_sum<kLossThreads>(l, sh);
    double tm = block_sum<kLossThreads>(m, sh);
    if (threadIdx.x == 0) {
        if (loss_sum)
            *loss_sum = (float)((double)*loss_sum + (double)scale * tl);
        if (metric_sum)
            *metric_sum = (float)((double)*metric_sum + (double)scale * tm);
    }
}

} // namespace

extern "C" {

cudaError_t fg_cu_pointwise_loss(cudaStream_t s, int type, int kind, const void *x,
                                 const float *t, size_t n, float scale, float *loss_sum,
                                 float *metric_sum, float grad_scale, void *dx,
                                 double *scratch)
{
    size_t chunk = (n + FG_CU_REDUCE_BLOCKS - 1) / FG_CU_REDUCE_BLOCKS;
    if (chunk < 2048)
        chunk = 2048;
    unsigned blocks = (unsigned)((n + chunk - 1) / chunk);
    double *loss = scratch, *metric = scratch + FG_CU_REDUCE_BLOCKS;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(blocks, kLossThreads, 0, s, ploss_partial_k<T>)(
                      kind, (const T *)x, t, n, chunk, grad_scale, (T *)dx, loss, metric));
    FGCU_LAUNCH(1, kLossThreads, 0, s, ploss_sum_k)(loss, metric, (int)blocks, scale, loss_sum,
                                                     metric_sum);
    return cudaGetLastError();
}

} // extern "C"
