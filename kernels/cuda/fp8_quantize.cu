/* fp8 quantization with delayed scaling (gemm_fp8, ABI 1.9): a tensor's scale from its amax
 * history, then the tensor scaled, rounded to E4M3 or E5M2 (nearest even, saturated to the
 * largest finite value, NaN kept: cuda_fp8.h's __NV_SATFINITE conversion) and its amax taken
 * in the same pass. The history update is Transformer Engine's: shift by one, the new amax
 * at [0]. */
#include <cuda_fp8.h>
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

__device__ __forceinline__ float fp8_max(int format)
{
    return format == FG_CU_F8E4M3 ? 448.0f : 57344.0f;
}

/* One thread: scale = fp8_max / amax / 2^margin from the history (kept when amax is zero
 * or not finite), {scale, 1/scale} written, the history shifted and [0] zeroed for the
 * quantize pass's atomic max. */
__global__ void fp8_scale_update_k(float *scale, float *history, int len, int algo,
                                   float margin, int format)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    float amax = history[0];
    for (int i = 1; algo == FG_CU_AMAX_MAX && i < len; i++)
        amax = history[i] > amax ? history[i] : amax;
    float s = scale[0];
    if (amax > 0.0f && isfinite(amax))
        s = fp8_max(format) / amax / exp2f(margin);
    scale[0] = s;
    scale[1] = 1.0f / s;
    for (int i = len - 1; i > 0; i--)
        history[i] = history[i - 1];
    history[0] = 0.0f;
}

__device__ __forceinline__ unsigned char to_fp8(float v, int format)
{
    return (unsigned char)__nv_cvt_float_to_fp8(v, __NV_SATFINITE,
                                                format == FG_CU_F8E4M3 ? __NV_E4M3 : __NV_E5M2);
}

/* dst (rows, cols) packed, or its transpose (cols, rows) packed, from src (rows, cols;
 * src_ld).
 * amax (NULL: not taken) gets max |src| as the bits of a non-negative float, whose order is
 * the values' (a NaN's bits are above +inf's, so a NaN wins). */
template <typename T>
__global__ void fp8_quantize_k(const T *src, int rows, int cols, int src_ld, int transpose,
                               const float *scale, int format, unsigned char *dst,
                               unsigned *amax)
{
    float s = scale[0];
    unsigned local = 0;
    size_t n = (size_t)rows * (size_t)cols;
    FGCU_FOR(i, n) {
        size_t r = i / (size_t)cols, c = i % (size_t)cols;
        float v = ld(src, r * (size_t)src_ld + c);
        size_t o = transpose ? c * (size_t)rows + r : i;
        dst[o] = to_fp8(v * s, format);
        FGCU_POINT();
        float a = fabsf(v);
        unsigned bits;
        memcpy(&bits, &a, sizeof bits);
        local = bits > local ? bits : local;
    }
    local = warp_max(local);
    if (amax && (threadIdx.x & 31) == 0)
        atomicMax(amax, local);
}

} // namespace

cudaError_t fg_cu_fp8_scale_update(cudaStream_t s, float *scale, float *history, int len,
                                   int algo, float margin, int format)
{
    FGCU_LAUNCH(1, 1, 0, s, fp8_scale_update_k)(scale, history, len, algo, margin, format);
    return cudaGetLastError();
}

cudaError_t fg_cu_fp8_quantize(cudaStream_t s, int type, const void *src, int rows, int cols,
                               int ld, int transpose, const float *scale, int format, void *dst,
                               float *amax)
{
    size_t n = (size_t)rows * (size_t)cols;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, fp8_quantize_k<T>)(
                      (const T *)src, rows, cols, ld, transpose, scale, format,
                      (unsigned char *)dst, (unsigned *)amax));
    return cudaGetLastError();
}
