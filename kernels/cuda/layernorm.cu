/* Layer normalisation and RMS normalisation over the last dimension of x (rows, cols), as
 * kernels/cpu/layernorm.c: one block per row, the row's sums in f64 (mean, then squared
 * deviations), the normalisation in the CPU's f32 formula. The parameter gradients are
 * column sums over every row: partial sums over fixed row chunks into the queue's scratch,
 * then the chunks in order (the partition depends only on the shape). */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kLnThreads = 128;
constexpr int kColTile = 32, kRowStripes = 8; /* parameter gradients: 256 threads a block */

template <typename T>
__global__ void ln_forward_k(int rms, int cols, const T *x, const void *gamma,
                             const void *beta, int param_type, float eps, float *mean,
                             float *rstd, T *y)
{
    __shared__ double sh[kLnThreads];
    size_t n = (size_t)cols, base = (size_t)blockIdx.x * n;
    double acc = 0.0;
    for (size_t i = threadIdx.x; i < n; i += kLnThreads)
        acc += (double)ld(x, base + i);
    double sum = block_sum<kLnThreads>(acc, sh);
    double m = rms ? 0.0 : sum / (double)n;
    acc = 0.0;
    for (size_t i = threadIdx.x; i < n; i += kLnThreads) {
        double d = (double)ld(x, base + i) - m;
        acc += d * d;
    }
    double sq = block_sum<kLnThreads>(acc, sh);
    double rs = 1.0 / sqrt(sq / (double)n + (double)eps);
    if (threadIdx.x == 0) {
        if (mean)
            mean[blockIdx.x] = (float)m;
        rstd[blockIdx.x] = (float)rs;
    }
    float fm = (float)m, fr = (float)rs;
    for (size_t i = threadIdx.x; i < n; i += kLnThreads) {
        float v = (ld(x, base + i) - fm) * fr;
        if (gamma)
            v *= ld_dyn(gamma, param_type, i);
        if (beta)
            v += ld_dyn(beta, param_type, i);
        st(y, base + i, v);
    }
}

/* xhat of (row, i), as the forward computed it. */
template <typename T>
__device__ __forceinline__ float ln_xhat(const T *x, size_t at, float m, float rs)
{
    return (ld(x, at) - m) * rs;
}

/* dx = rstd * (g*dy - mean(g*dy) - xhat * mean(g*dy*xhat)); RMS drops the mean(g*dy). */
template <typename T>
__global__ void ln_dx_k(int rms, int cols, const T *x, const void *gamma, int param_type,
                        const float *mean, const float *rstd, const T *dy, T *dx)
{
    __shared__ double sh[kLnThreads];
    size_t n = (size_t)cols, r = blockIdx.x, base = r * n;
    float m = rms ? 0.0f : mean[r], rs = rstd[r];
    double a1 = 0.0, a2 = 0.0;
    for (size_t i = threadIdx.x; i < n; i += kLnThreads) {
        double g = (double)ld(dy, base + i) * (gamma ? (double)ld_dyn(gamma, param_type, i) : 1.0);
        a1 += g;
        a2 += g * (double)ln_xhat(x, base + i, m, rs);
    }
    double s1 = block_sum<kLnThreads>(a1, sh);
    double s2 = block_sum<kLnThreads>(a2, sh);
    double m1 = rms ? 0.0 : s1 / (double)n, m2 = s2 / (double)n, drs = rs;
    for (size_t i = threadIdx.x; i < n; i += kLnThreads) {
        double g = (double)ld(dy, base + i) * (gamma ? (double)ld_dyn(gamma, param_type, i) : 1.0);
        st(dx, base + i, (float)(drs * (g - m1 - (double)ln_xhat(x, base + i, m, rs) * m2)));
    }
}

/* Column sums of dy*xhat and dy over rows [chunk*chunk_rows, ...): 32 columns by 8 row
 * stripes, the stripes added in order. With `direct` (one chunk) the sums are the result
 * and go to dgamma/dbeta; otherwise to partial[chunk][col] (g) and partial[chunks + ...] (b). */
template <typename T>
__global__ void ln_param_k(int rms, int rows, int cols, int chunk_rows, int chunks,
                           const T *x, const float *mean, const float *rstd, const T *dy,
                           int want_g, int want_b, double *partial, int direct, void *dgamma,
                           void *dbeta, int grad_type, int accumulate)
{
    __shared__ double shg[kRowStripes][kColTile], shb[kRowStripes][kColTile];
    int col = blockIdx.x * kColTile + threadIdx.x, chunk = blockIdx.y;
    int r0 = chunk * chunk_rows, r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    double g = 0.0, b = 0.0;
    if (col < cols)
        for (int r = r0 + (int)threadIdx.y; r < r1; r += kRowStripes) {
            size_t at = (size_t)r * (size_t)cols + (size_t)col;
            double d = (double)ld(dy, at);
            if (want_g)
                g += d * (double)ln_xhat(x, at, rms ? 0.0f : mean[r], rstd[r]);
            b += d;
        }
    shg[threadIdx.y][threadIdx.x] = g;
    shb[threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y != 0 || col >= cols)
        return;
    g = b = 0.0;
    for (int k = 0; k < kRowStripes; k++) {
        g += shg[k][threadIdx.x];
        b += shb[k][threadIdx.x];
    }
    if (!direct) {
        partial[(size_t)chunk * (size_t)cols + (size_t)col] = g;
        partial[((size_t)chunks + (size_t)chunk) * (size_t)cols + (size_t)col] = b;
        return;
    }
    if (want_g)
        st_dyn(dgamma, grad_type, col,
               (float)(g + (accumulate ? ld_dyn(dgamma, grad_type, col) : 0.0f)));
    if (want_b)
        st_dyn(dbeta, grad_type, col,
               (float)(b + (accumulate ? ld_dyn(dbeta, grad_type, col) : 0.0f)));
}

/* The chunks' partial sums of each column, in chunk order, into dgamma/dbeta. */
__global__ void ln_param_sum_k(int cols, int chunks, const double *partial, void *dgamma,
                               void *dbeta, int grad_type, int accumulate)
{
    FGCU_FOR(col, (size_t)cols)
    {
        double g = 0.0, b = 0.0;
        for (int k = 0; k < chunks; k++) {
            g += partial[(size_t)k * (size_t)cols + col];
            b += partial[((size_t)chunks + (size_t)k) * (size_t)cols + col];
        }
        if (dgamma)
            st_dyn(dgamma, grad_type, col,
                   (float)(g + (accumulate ? ld_dyn(dgamma, grad_type, col) : 0.0f)));
        if (dbeta)
            st_dyn(dbeta, grad_type, col,
                   (float)(b + (accumulate ? ld_dyn(dbeta, grad_type, col) : 0.0f)));
    }
}

} // namespace

extern "C" {

cudaError_t fg_cu_ln_forward(cudaStream_t s, int type, int param_type, int rms, int rows,
                             int cols, const void *x, const void *gamma, const void *beta,
                             float eps, float *mean, float *rstd, void *y)
{
    if (!known_type(param_type))
        return cudaErrorInvalidValue;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH((unsigned)rows, kLnThreads, 0, s, ln_forward_k<T>)(
                      rms, cols, (const T *)x, gamma, rms ? NULL : beta, param_type, eps,
                      rms ? NULL : mean, rstd, (T *)y));
    return cudaGetLastError();
}

cudaError_t fg_cu_ln_backward(cudaStream_t s, int type, int param_type, int grad_type,
                              int rms, int rows, int cols, const void *x, const void *gamma,
                              const float *mean, const float *rstd, const void *dy, void *dx,
                              void *dgamma, void *dbeta, int accumulate, double *scratch)
{
    if (!known_type(param_type) || !known_type(grad_type))
        return cudaErrorInvalidValue;
    if (rms)
        dbeta = NULL;
    if (dx)
        FGCU_DISPATCH(type, T,
                      FGCU_LAUNCH((unsigned)rows, kLnThreads, 0, s, ln_dx_k<T>)(
                          rms, cols, (const T *)x, gamma, param_type, mean, rstd,
                          (const T *)dy, (T *)dx));
    if (dgamma || dbeta) {
        /* about 64 rows a chunk, as many chunks as the scratch holds (at most 256) */
        int chunks = (rows + 63) / 64;
        int room = (int)(FG_CU_SCRATCH_DOUBLES / (2 * (size_t)cols));
        if (chunks > 256)
            chunks = 256;
        if (chunks > room)
            chunks = room;
        if (chunks < 1)
            chunks = 1;
        int chunk_rows = (rows + chunks - 1) / chunks;
        chunks = (rows + chunk_rows - 1) / chunk_rows;
        int direct = chunks == 1;
        dim3 grid((unsigned)((cols + kColTile - 1) / kColTile), (unsigned)chunks);
        dim3 block(kColTile, kRowStripes);
        FGCU_DISPATCH(type, T,
                      FGCU_LAUNCH(grid, block, 0, s, ln_param_k<T>)(
                          rms, rows, cols, chunk_rows, chunks, (const T *)x, mean, rstd,
                          (const T *)dy, dgamma != NULL, dbeta != NULL, scratch, direct,
                          dgamma, dbeta, grad_type, accumulate));
        if (!direct)
            FGCU_LAUNCH(grid_for((size_t)cols), kThreads, 0, s, ln_param_sum_k)(
                cols, chunks, scratch, dgamma, dbeta, grad_type, accumulate);
    }
    return cudaGetLastError();
}

} // extern "C"
