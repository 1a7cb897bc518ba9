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

/* T's rounding of v: what a store then a load give. */
template <typename T> __device__ __forceinline__ float rnd(float v)
{
    return io<T>::to_f(io<T>::from_f(v));
}

/* One block per row, W elements per access (W > 1: cols a multiple of W and x, a, r, y
 * 16-byte aligned). With `a` (the residual form) the row is first r = x + a rounded into T,
 * as axpy(1, a, x) writes it (r may alias x or a; each thread reads back only what it
 * wrote), and r is what is normalised. */
template <typename T, int W>
__global__ void ln_forward_k(int rms, int cols, const T *x, const T *a, T *r,
                             const void *gamma, const void *beta, int param_type, float eps,
                             float *mean, float *rstd, T *y)
{
    __shared__ double sh[kLnThreads];
    size_t n = (size_t)cols, base = (size_t)blockIdx.x * n, step = (size_t)kLnThreads * W;
    double acc = 0.0;
    for (size_t i = threadIdx.x * (size_t)W; i < n; i += step) {
        float v[W];
        ld_n(x, base + i, v);
        if (a) {
            float av[W];
            ld_n(a, base + i, av);
            for (int k = 0; k < W; k++)
                v[k] = rnd<T>(v[k] + 1.0f * av[k]);
            st_n(r, base + i, v);
        }
        for (int k = 0; k < W; k++)
            acc += (double)v[k];
    }
    const T *src = a ? r : x;
    double sum = block_sum<kLnThreads>(acc, sh);
    double m = rms ? 0.0 : sum / (double)n;
    acc = 0.0;
    for (size_t i = threadIdx.x * (size_t)W; i < n; i += step) {
        float v[W];
        ld_n(src, base + i, v);
        for (int k = 0; k < W; k++) {
            double d = (double)v[k] - m;
            acc += d * d;
        }
    }
    double sq = block_sum<kLnThreads>(acc, sh);
    double rs = 1.0 / sqrt(sq / (double)n + (double)eps);
    if (threadIdx.x == 0) {
        if (mean)
            mean[blockIdx.x] = (float)m;
        rstd[blockIdx.x] = (float)rs;
    }
    float fm = (float)m, fr = (float)rs;
    for (size_t i = threadIdx.x * (size_t)W; i < n; i += step) {
        float v[W];
        ld_n(src, base + i, v);
        for (int k = 0; k < W; k++) {
            v[k] = (v[k] - fm) * fr;
            if (gamma)
                v[k] *= ld_dyn(gamma, param_type, i + k);
            if (beta)
                v[k] += ld_dyn(beta, param_type, i + k);
        }
        st_n(y, base + i, v);
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
                        const float *mean, const float *rstd, const T *dy, const T *dres, T *dx)
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
        float v = (float)(drs * (g - m1 - (double)ln_xhat(x, base + i, m, rs) * m2));
        st(dx, base + i, dres ? rnd<T>(v) + 1.0f * ld(dres, base + i) : v);
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

/* The whole backward in one kernel: a block per chunk of rows, each row's dx (with dres:
 * dx = dres + dx rounded as axpy adds it) as ln_dx_k, and the chunk's column sums of
 * dy*xhat and dy in the block's dynamic shared memory (2 * cols doubles: sg, sb). Each
 * column belongs to one thread for every row, so the sums need no barrier nor atomics and
 * take the rows in order. With `direct` (one chunk) they are added into dgamma/dbeta;
 * otherwise written to partial[chunk][col] (g) and partial[chunks + chunk][col] (b) for
 * ln_param_sum_k. W elements per access as ln_forward_k. */
template <typename T, int W>
__global__ void ln_backward_k(int rms, int rows, int cols, int chunk_rows, int chunks,
                              const T *x, const void *gamma, int param_type, const float *mean,
                              const float *rstd, const T *dy, const T *dres, T *dx,
                              int want_params, double *partial, int direct, void *dgamma,
                              void *dbeta, int grad_type, int accumulate)
{
    __shared__ double sh[kLnThreads];
    FGCU_DYNAMIC_SHARED(double, sums);
    size_t n = (size_t)cols, step = (size_t)kLnThreads * W;
    double *sg = sums, *sb = sums + n;
    if (want_params)
        for (size_t i = threadIdx.x * (size_t)W; i < n; i += step)
            for (int k = 0; k < W; k++)
                sg[i + k] = sb[i + k] = 0.0;
    int r0 = (int)blockIdx.x * chunk_rows, r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    for (int r = r0; r < r1; r++) {
        size_t base = (size_t)r * n;
        float m = rms ? 0.0f : mean[r], rs = rstd[r];
        double m1 = 0.0, m2 = 0.0;
        if (dx) {
            double a1 = 0.0, a2 = 0.0;
            for (size_t i = threadIdx.x * (size_t)W; i < n; i += step) {
                float xv[W], d[W];
                ld_n(x, base + i, xv);
                ld_n(dy, base + i, d);
                for (int k = 0; k < W; k++) {
                    double g = (double)d[k] *
                               (gamma ? (double)ld_dyn(gamma, param_type, i + k) : 1.0);
                    a1 += g;
                    a2 += g * (double)((xv[k] - m) * rs);
                }
            }
            double s1 = block_sum<kLnThreads>(a1, sh);
            double s2 = block_sum<kLnThreads>(a2, sh);
            m1 = rms ? 0.0 : s1 / (double)n;
            m2 = s2 / (double)n;
        }
        for (size_t i = threadIdx.x * (size_t)W; i < n; i += step) {
            float xv[W], d[W], o[W] = {}, res[W] = {};
            ld_n(x, base + i, xv);
            ld_n(dy, base + i, d);
            if (dx && dres)
                ld_n(dres, base + i, res);
            for (int k = 0; k < W; k++) {
                float xh = (xv[k] - m) * rs;
                if (want_params) {
                    sg[i + k] += (double)d[k] * (double)xh;
                    sb[i + k] += (double)d[k];
                }
                if (!dx)
                    continue;
                double g = (double)d[k] * (gamma ? (double)ld_dyn(gamma, param_type, i + k) : 1.0);
                o[k] = (float)((double)rs * (g - m1 - (double)xh * m2));
                if (dres)
                    o[k] = rnd<T>(o[k]) + 1.0f * res[k];
            }
            if (dx)
                st_n(dx, base + i, o);
        }
    }
    if (!want_params)
        return;
    for (size_t i = threadIdx.x * (size_t)W; i < n; i += step)
        for (int k = 0; k < W; k++) {
            size_t col = i + k;
            double g = sg[col], b = sb[col];
            if (!direct) {
                partial[(size_t)blockIdx.x * n + col] = g;
                partial[((size_t)chunks + blockIdx.x) * n + col] = b;
                continue;
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

/* Row chunks of the parameter gradients: about 64 rows a chunk (fused: 32), as many as the
 * scratch holds (at most 256); a partition that depends only on the shape. */
static int ln_chunk_rows(int rows, int cols, int per_chunk)
{
    int chunks = (rows + per_chunk - 1) / per_chunk;
    int room = (int)(FG_CU_SCRATCH_DOUBLES / (2 * (size_t)cols));
    if (chunks > 256)
        chunks = 256;
    if (chunks > room)
        chunks = room;
    if (chunks < 1)
        chunks = 1;
    return (rows + chunks - 1) / chunks;
}

/* The widest access every row allows: a pack of 16 bytes when cols is a multiple of it and
 * every pointer 16-byte aligned, else one element. */
template <typename T> static bool ln_vec(int cols, bool ptrs_aligned)
{
    return ptrs_aligned && cols % vec_of<T>::value == 0;
}

template <typename T>
static cudaError_t ln_forward_t(cudaStream_t s, int param_type, int rms, int rows, int cols,
                                const T *x, const T *a, T *r, const void *gamma,
                                const void *beta, float eps, float *mean, float *rstd, T *y)
{
    constexpr int V = vec_of<T>::value;
    if (ln_vec<T>(cols, aligned16(x, a, r, y)))
        FGCU_LAUNCH((unsigned)rows, kLnThreads, 0, s, ln_forward_k<T, V>)(
            rms, cols, x, a, r, gamma, rms ? NULL : beta, param_type, eps, rms ? NULL : mean,
            rstd, y);
    else
        FGCU_LAUNCH((unsigned)rows, kLnThreads, 0, s, ln_forward_k<T, 1>)(
            rms, cols, x, a, r, gamma, rms ? NULL : beta, param_type, eps, rms ? NULL : mean,
            rstd, y);
    return cudaGetLastError();
}

/* Dynamic shared memory the fused backward may take without an opt-in. */
constexpr size_t kLnFusedShared = 48 * 1024;

template <typename T>
static cudaError_t ln_backward_fused(cudaStream_t s, int param_type, int grad_type, int rms,
                                     int rows, int cols, const T *x, const void *gamma,
                                     const float *mean, const float *rstd, const T *dy,
                                     const T *dres, T *dx, void *dgamma, void *dbeta,
                                     int accumulate, double *scratch)
{
    constexpr int V = vec_of<T>::value;
    int want = dgamma || dbeta;
    int chunk_rows = want ? ln_chunk_rows(rows, cols, 32) : 1;
    int chunks = (rows + chunk_rows - 1) / chunk_rows;
    int direct = chunks == 1;
    size_t shmem = want ? 2 * (size_t)cols * sizeof(double) : 0;
    if (ln_vec<T>(cols, aligned16(x, dy, dres, dx)))
        FGCU_LAUNCH((unsigned)chunks, kLnThreads, shmem, s, ln_backward_k<T, V>)(
            rms, rows, cols, chunk_rows, chunks, x, gamma, param_type, mean, rstd, dy, dres,
            dx, want, scratch, direct, dgamma, dbeta, grad_type, accumulate);
    else
        FGCU_LAUNCH((unsigned)chunks, kLnThreads, shmem, s, ln_backward_k<T, 1>)(
            rms, rows, cols, chunk_rows, chunks, x, gamma, param_type, mean, rstd, dy, dres,
            dx, want, scratch, direct, dgamma, dbeta, grad_type, accumulate);
    if (want && !direct)
        FGCU_LAUNCH(grid_for((size_t)cols), kThreads, 0, s, ln_param_sum_k)(
            cols, chunks, scratch, dgamma, dbeta, grad_type, accumulate);
    return cudaGetLastError();
}

/* Rows too wide for the fused kernel's shared sums: dx a block per row, then the parameter
 * gradients over column tiles. */
template <typename T>
static cudaError_t ln_backward_split(cudaStream_t s, int param_type, int grad_type, int rms,
                                     int rows, int cols, const T *x, const void *gamma,
                                     const float *mean, const float *rstd, const T *dy,
                                     const T *dres, T *dx, void *dgamma, void *dbeta,
                                     int accumulate, double *scratch)
{
    if (dx)
        FGCU_LAUNCH((unsigned)rows, kLnThreads, 0, s, ln_dx_k<T>)(
            rms, cols, x, gamma, param_type, mean, rstd, dy, dres, dx);
    if (dgamma || dbeta) {
        int chunk_rows = ln_chunk_rows(rows, cols, 64);
        int chunks = (rows + chunk_rows - 1) / chunk_rows;
        int direct = chunks == 1;
        dim3 grid((unsigned)((cols + kColTile - 1) / kColTile), (unsigned)chunks);
        dim3 block(kColTile, kRowStripes);
        FGCU_LAUNCH(grid, block, 0, s, ln_param_k<T>)(
            rms, rows, cols, chunk_rows, chunks, x, mean, rstd, dy, dgamma != NULL,
            dbeta != NULL, scratch, direct, dgamma, dbeta, grad_type, accumulate);
        if (!direct)
            FGCU_LAUNCH(grid_for((size_t)cols), kThreads, 0, s, ln_param_sum_k)(
                cols, chunks, scratch, dgamma, dbeta, grad_type, accumulate);
    }
    return cudaGetLastError();
}

template <typename T>
static cudaError_t ln_backward_t(cudaStream_t s, int param_type, int grad_type, int rms,
                                 int rows, int cols, const T *x, const void *gamma,
                                 const float *mean, const float *rstd, const T *dy,
                                 const T *dres, T *dx, void *dgamma, void *dbeta,
                                 int accumulate, double *scratch)
{
    if (rms)
        dbeta = NULL;
    if (!dx)
        dres = NULL;
    if (2 * (size_t)cols * sizeof(double) <= kLnFusedShared)
        return ln_backward_fused<T>(s, param_type, grad_type, rms, rows, cols, x, gamma, mean,
                                    rstd, dy, dres, dx, dgamma, dbeta, accumulate, scratch);
    return ln_backward_split<T>(s, param_type, grad_type, rms, rows, cols, x, gamma, mean,
                                rstd, dy, dres, dx, dgamma, dbeta, accumulate, scratch);
}

extern "C" {

cudaError_t fg_cu_ln_forward(cudaStream_t s, int type, int param_type, int rms, int rows,
                             int cols, const void *x, const void *gamma, const void *beta,
                             float eps, float *mean, float *rstd, void *y)
{
    if (!known_type(param_type))
        return cudaErrorInvalidValue;
    FGCU_DISPATCH(type, T,
                  return ln_forward_t<T>(s, param_type, rms, rows, cols, (const T *)x, NULL,
                                         NULL, gamma, beta, eps, mean, rstd, (T *)y));
    return cudaSuccess;
}

cudaError_t fg_cu_ln_residual_forward(cudaStream_t s, int type, int param_type, int rms,
                                      int rows, int cols, const void *a, const void *b, void *r,
                                      const void *gamma, const void *beta, float eps,
                                      float *mean, float *rstd, void *y)
{
    if (!known_type(param_type) || !a || !r)
        return cudaErrorInvalidValue;
    FGCU_DISPATCH(type, T,
                  return ln_forward_t<T>(s, param_type, rms, rows, cols, (const T *)b,
                                         (const T *)a, (T *)r, gamma, beta, eps, mean, rstd,
                                         (T *)y));
    return cudaSuccess;
}

cudaError_t fg_cu_ln_backward(cudaStream_t s, int type, int param_type, int grad_type,
                              int rms, int rows, int cols, const void *x, const void *gamma,
                              const float *mean, const float *rstd, const void *dy, void *dx,
                              void *dgamma, void *dbeta, int accumulate, double *scratch)
{
    return fg_cu_ln_residual_backward(s, type, param_type, grad_type, rms, rows, cols, x, gamma,
                                      mean, rstd, dy, NULL, dx, dgamma, dbeta, accumulate,
                                      scratch);
}

cudaError_t fg_cu_ln_residual_backward(cudaStream_t s, int type, int param_type, int grad_type,
                                       int rms, int rows, int cols, const void *x,
                                       const void *gamma, const float *mean, const float *rstd,
                                       const void *dy, const void *dres, void *dx,
                                       void *dgamma, void *dbeta, int accumulate,
                                       double *scratch)
{
    if (!known_type(param_type) || !known_type(grad_type))
        return cudaErrorInvalidValue;
    FGCU_DISPATCH(type, T,
                  return ln_backward_t<T>(s, param_type, grad_type, rms, rows, cols,
                                          (const T *)x, gamma, mean, rstd, (const T *)dy,
                                          (const T *)dres, (T *)dx, dgamma, dbeta, accumulate,
                                          scratch));
    return cudaSuccess;
}

} // extern "C"
