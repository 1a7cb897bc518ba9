/* Rotary position embedding in place, as kernels/cpu/rope.c (Hugging Face Llama's half-split
 * convention: in each head of D values x_i pairs with x_{i+D/2}, turned by p * theta^(-2i/D)
 * at position p = pos0 + row % seq, or by p * inv_freq[i] from a table of rope scaling;
 * the backward turns by the opposite angle). The table travels by value in the kernel's
 * parameters (at most FG_CU_ROPE_MAX_PAIRS pairs), so a launch reads no host memory and a
 * captured graph keeps it. One thread
 * takes W consecutive i of one row (W = 1, or a 128-bit pack when the layout allows it),
 * computes their angles once in double as the CPU does, and turns them in every head. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

/* The angles' source: theta, or (pairs > 0) a table of inverse frequencies. */
struct rope_freqs {
    double theta;
    int pairs;
    double inv_freq[FG_CU_ROPE_MAX_PAIRS];
};

/* Only theta: the kernels of rope without scaling take this smaller parameter block. */
struct rope_theta {
    double theta;
};

__device__ __forceinline__ double rope_angle(const rope_theta &f, double pos, int i,
                                             int head_dim)
{
    return pos * pow(f.theta, -2.0 * i / head_dim);
}

__device__ __forceinline__ double rope_angle(const rope_freqs &f, double pos, int i, int)
{
    return pos * f.inv_freq[i];
}

template <typename T, int W, typename F>
__device__ __forceinline__ void rope_pack(T *x, size_t r, int i, int seq, int pos0, int heads,
                                          int head_dim, int ld, const F &f, double sign)
{
    int half = head_dim / 2;
    double pos = (double)pos0 + (double)(r % (size_t)seq);
    float c[W], s[W];
#pragma unroll
    for (int k = 0; k < W; k++) {
        double angle = rope_angle(f, pos, i + k, head_dim);
        c[k] = (float)cos(angle);
        s[k] = (float)(sign * sin(angle));
    }
    for (int h = 0; h < heads; h++) {
        size_t a = r * (size_t)ld + (size_t)h * (size_t)head_dim + (size_t)i;
        float x1[W], x2[W];
        ld_n(x, a, x1);
        ld_n(x, a + (size_t)half, x2);
        float y1[W], y2[W];
#pragma unroll
        for (int k = 0; k < W; k++) {
            y1[k] = x1[k] * c[k] - x2[k] * s[k];
            y2[k] = x2[k] * c[k] + x1[k] * s[k];
        }
        st_n(x, a, y1);
        st_n(x, a + (size_t)half, y2);
    }
}

/* Packs of W values along i: rows * (half / W) of them, a grid-stride loop. */
template <typename T, int W, typename F>
__global__ void rope_k(T *x, int rows, int seq, int pos0, int heads, int head_dim, int ld,
                       F f, double sign)
{
    size_t packs = (size_t)(head_dim / 2 / W);
    FGCU_FOR(t, (size_t)rows * packs)
        rope_pack<T, W, F>(x, t / packs, (int)(t % packs) * W, seq, pos0, heads, head_dim, ld,
                           f, sign);
}

template <typename T, typename F>
cudaError_t rope_launch(cudaStream_t s, T *x, int rows, int seq, int pos0, int heads,
                        int head_dim, int ld, const F &theta, double sign)
{
    constexpr int W = vec_of<T>::value;
    int half = head_dim / 2;
    /* every pack starts at a multiple of W elements from a 16-byte aligned x */
    if (aligned16(x) && half % W == 0 && ld % W == 0) {
        size_t n = (size_t)rows * (size_t)(half / W);
        FGCU_LAUNCH(grid_for(n), kThreads, 0, s, rope_k<T, W, F>)(x, rows, seq, pos0, heads,
                                                                head_dim, ld, theta, sign);
    } else {
        size_t n = (size_t)rows * (size_t)half;
        FGCU_LAUNCH(grid_for(n), kThreads, 0, s, rope_k<T, 1, F>)(x, rows, seq, pos0, heads,
                                                                head_dim, ld, theta, sign);
    }
    return cudaGetLastError();
}

} // namespace

cudaError_t fg_cu_rope(cudaStream_t s, int type, int backward, int rows, int seq, int pos0,
                       int heads, int head_dim, int ld, float theta, void *x)
{
    if (rows == 0)
        return cudaSuccess;
    double sign = backward ? -1.0 : 1.0;
    rope_theta f = {(double)theta};
    FGCU_DISPATCH(type, T,
                  return rope_launch<T>(s, (T *)x, rows, seq, pos0, heads, head_dim, ld, f,
                                        sign));
    return cudaSuccess;
}

cudaError_t fg_cu_rope_freq(cudaStream_t s, int type, int backward, int rows, int seq,
                            int pos0, int heads, int head_dim, int ld, const double *inv_freq,
                            void *x)
{
    if (head_dim / 2 > FG_CU_ROPE_MAX_PAIRS)
        return cudaErrorInvalidValue;
    if (rows == 0)
        return cudaSuccess;
    double sign = backward ? -1.0 : 1.0;
    rope_freqs f = {};
    f.pairs = head_dim / 2;
    for (int i = 0; i < f.pairs; i++)
        f.inv_freq[i] = inv_freq[i];
    FGCU_DISPATCH(type, T,
                  return rope_launch<T>(s, (T *)x, rows, seq, pos0, heads, head_dim, ld, f,
                                        sign));
    return cudaSuccess;
}
