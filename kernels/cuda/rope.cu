/* Rotary position embedding in place, as kernels/cpu/rope.c (Hugging Face Llama's half-split
 * convention: in each head of D values x_i pairs with x_{i+D/2}, turned by p * theta^(-2i/D)
 * at position p = pos0 + row % seq; the backward turns by the opposite angle). One thread
 * takes W consecutive i of one row (W = 1, or a 128-bit pack when the layout allows it),
 * computes their angles once in double as the CPU does, and turns them in every head. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

template <typename T, int W>
__device__ __forceinline__ void rope_pack(T *x, size_t r, int i, int seq, int pos0, int heads,
                                          int head_dim, int ld, double theta, double sign)
{
    int half = head_dim / 2;
    double pos = (double)pos0 + (double)(r % (size_t)seq);
    float c[W], s[W];
#pragma unroll
    for (int k = 0; k < W; k++) {
        double angle = pos * pow(theta, -2.0 * (i + k) / head_dim);
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
template <typename T, int W>
__global__ void rope_k(T *x, int rows, int seq, int pos0, int heads, int head_dim, int ld,
                       double theta, double sign)
{
    size_t packs = (size_t)(head_dim / 2 / W);
    FGCU_FOR(t, (size_t)rows * packs)
        rope_pack<T, W>(x, t / packs, (int)(t % packs) * W, seq, pos0, heads, head_dim, ld,
                        theta, sign);
}

template <typename T>
cudaError_t rope_launch(cudaStream_t s, T *x, int rows, int seq, int pos0, int heads,
                        int head_dim, int ld, double theta, double sign)
{
    constexpr int W = vec_of<T>::value;
    int half = head_dim / 2;
    /* every pack starts at a multiple of W elements from a 16-byte aligned x */
    if (aligned16(x) && half % W == 0 && ld % W == 0) {
        size_t n = (size_t)rows * (size_t)(half / W);
        FGCU_LAUNCH(grid_for(n), kThreads, 0, s, rope_k<T, W>)(x, rows, seq, pos0, heads,
                                                                head_dim, ld, theta, sign);
    } else {
        size_t n = (size_t)rows * (size_t)half;
        FGCU_LAUNCH(grid_for(n), kThreads, 0, s, rope_k<T, 1>)(x, rows, seq, pos0, heads,
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
    FGCU_DISPATCH(type, T,
                  return rope_launch<T>(s, (T *)x, rows, seq, pos0, heads, head_dim, ld,
                                        (double)theta, sign));
    return cudaSuccess;
}
