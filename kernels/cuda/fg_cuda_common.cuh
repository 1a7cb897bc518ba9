/* Device helpers shared by the CUDA kernels: typed loads and stores (f32 arithmetic over
 * f32, f16 and bf16 storage), the dtype dispatch, launch sizes and fixed-order reductions. */
#ifndef FG_CUDA_COMMON_CUH
#define FG_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#include "fg_cuda_kernels.h"

/* FGCU_LAUNCH(grid, block, shmem, stream, kernel)(args...) is kernel<<<...>>>(args...)
 * under nvcc; compiled as C++ against the emulated device (tests/cudaemu, FGEMU defined by
 * its force-included header) it runs the kernel there. FGCU_POINT() marks a global load or
 * store, where the emulator's random mode may switch threads; FGCU_DYNAMIC_SHARED(T, name)
 * declares the block's dynamic shared memory (extern __shared__); FGCU_ALIGNED(p, bytes)
 * makes the emulator fault, as the device does, on a vector access at a misaligned p. */
#ifdef FGEMU
#define FGCU_LAUNCH(grid, block, shmem, stream, ...)                                       \
    ::fgemu::launcher(#__VA_ARGS__, &__VA_ARGS__, grid, block, shmem, stream)
#define FGCU_POINT() fgemu_point()
#define FGCU_DYNAMIC_SHARED(T, name) T *name = (T *)fgemu_dynamic_shared()
#define FGCU_ALIGNED(p, bytes) fgemu_check_aligned(p, bytes)
#else
#define FGCU_LAUNCH(grid, block, shmem, stream, ...) __VA_ARGS__<<<grid, block, shmem, stream>>>
#define FGCU_POINT() ((void)0)
#define FGCU_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#define FGCU_ALIGNED(p, bytes) ((void)0)
#endif

namespace fgcu {

enum { F32 = 1, F16 = 2, BF16 = 3 };

template <typename T> struct io;
template <> struct io<float> {
    static __device__ __forceinline__ float to_f(float v) { return v; }
    static __device__ __forceinline__ float from_f(float v) { return v; }
    static __device__ __forceinline__ float ld(const float *p, size_t i)
    {
        FGCU_POINT();
        return p[i];
    }
    static __device__ __forceinline__ void st(float *p, size_t i, float v)
    {
        FGCU_POINT();
        p[i] = v;
    }
};
template <> struct io<__half> {
    static __device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half from_f(float v) { return __float2half_rn(v); }
    static __device__ __forceinline__ float ld(const __half *p, size_t i)
    {
        FGCU_POINT();
        return __half2float(p[i]);
    }
    static __device__ __forceinline__ void st(__half *p, size_t i, float v)
    {
        FGCU_POINT();
        p[i] = __float2half_rn(v);
    }
};
template <> struct io<__nv_bfloat16> {
    static __device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 from_f(float v)
    {
        return __float2bfloat16_rn(v);
    }
    static __device__ __forceinline__ float ld(const __nv_bfloat16 *p, size_t i)
    {
        FGCU_POINT();
        return __bfloat162float(p[i]);
    }
    static __device__ __forceinline__ void st(__nv_bfloat16 *p, size_t i, float v)
    {
        FGCU_POINT();
        p[i] = __float2bfloat16_rn(v);
    }
};

template <typename T> __device__ __forceinline__ float ld(const T *p, size_t i)
{
    return io<T>::ld(p, i);
}
template <typename T> __device__ __forceinline__ void st(T *p, size_t i, float v)
{
    io<T>::st(p, i, v);
}

/* ---- 128-bit loads and stores --------------------------------------------------------
 * ld_n / st_n move W consecutive elements starting at element i as one access of
 * W * sizeof(T) bytes (16: one 128-bit load or store; W = 1: a scalar one), converted to and
 * from f32 element by element with the scalar rounding, so a vectorised kernel computes the
 * same bits as its scalar form. The address must be aligned to the access's size: callers
 * take the vector path only when every pointer is 16-byte aligned (aligned16) and each
 * access starts at a multiple of W elements, and finish the elements past the last whole
 * pack one at a time (for_vec). */
template <int BYTES> struct raw_of;
template <> struct raw_of<2> { typedef unsigned short type; };
template <> struct raw_of<4> { typedef unsigned type; };
template <> struct raw_of<8> { typedef uint2 type; };
template <> struct raw_of<16> { typedef uint4 type; };

/* Elements of T in one 128-bit access (8 halves or 4 floats); of two types read or written
 * together, the smaller count (each access is at most 16 bytes). */
template <typename A, typename B = A> struct vec_of {
    static constexpr int a = (int)(16 / sizeof(A)), b = (int)(16 / sizeof(B));
    static constexpr int value = a < b ? a : b;
};

template <int W> struct width {
    static constexpr int value = W;
};

template <typename T, int W>
__device__ __forceinline__ void ld_n(const T *p, size_t i, float (&v)[W])
{
    typedef typename raw_of<(int)sizeof(T) * W>::type R;
    FGCU_POINT();
    FGCU_ALIGNED(p + i, sizeof(R));
    R r = *reinterpret_cast<const R *>(p + i);
    T e[W];
    memcpy((void *)e, &r, sizeof r);
#pragma unroll
    for (int k = 0; k < W; k++)
        v[k] = io<T>::to_f(e[k]);
}

template <typename T, int W>
__device__ __forceinline__ void st_n(T *p, size_t i, const float (&v)[W])
{
    typedef typename raw_of<(int)sizeof(T) * W>::type R;
    T e[W];
#pragma unroll
    for (int k = 0; k < W; k++)
        e[k] = io<T>::from_f(v[k]);
    R r;
    memcpy(&r, (const void *)e, sizeof r);
    FGCU_POINT();
    FGCU_ALIGNED(p + i, sizeof(R));
    *reinterpret_cast<R *>(p + i) = r;
}

/* Whether every pointer (NULL counts as aligned) sits on a 16-byte boundary. */
inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
template <typename... Ps> inline bool aligned16(const void *p, Ps... rest)
{
    return aligned16(p) && aligned16(rest...);
}

/* A grid-stride loop over n elements in packs of W: f(i, width<W>()) for each whole pack
 * when `vec` (the pointers aligned), then f(i, width<1>()) for each element after the last
 * whole pack (all of them without `vec`). */
template <int W, class F> __device__ __forceinline__ void for_vec(size_t n, bool vec, F f)
{
    size_t nv = vec ? n / (size_t)W : 0;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < nv;
         k += (size_t)gridDim.x * blockDim.x)
        f(k * (size_t)W, width<W>());
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < n - nv * (size_t)W;
         t += (size_t)gridDim.x * blockDim.x)
        f(nv * (size_t)W + t, width<1>());
}

/* Loads and stores whose type is known only at run time (small per-channel tensors). */
__device__ __forceinline__ float ld_dyn(const void *p, int type, size_t i)
{
    FGCU_POINT();
    if (type == F16)
        return __half2float(((const __half *)p)[i]);
    if (type == BF16)
        return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

__device__ __forceinline__ void st_dyn(void *p, int type, size_t i, float v)
{
    FGCU_POINT();
    if (type == F16)
        ((__half *)p)[i] = __float2half_rn(v);
    else if (type == BF16)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
        ((float *)p)[i] = v;
}

inline bool known_type(int t) { return t == F32 || t == F16 || t == BF16; }

/* Threads per block of the elementwise kernels, and a grid that covers n with a
 * grid-stride loop (capped: each thread then takes several elements). */
constexpr int kThreads = 256;
inline unsigned grid_for(size_t n)
{
    size_t blocks = (n + kThreads - 1) / kThreads;
    if (blocks > 8192)
        blocks = 8192;
    return blocks ? (unsigned)blocks : 1u;
}

#define FGCU_FOR(i, n)                                                                     \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);               \
         i += (size_t)gridDim.x * blockDim.x)

/* Sum of one double per thread of a block of BLOCK threads, in a fixed tree order; the
 * result is valid in thread 0. `sh` holds BLOCK doubles. */
template <int BLOCK> __device__ __forceinline__ double block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
#pragma unroll
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if ((int)threadIdx.x < stride)
            sh[threadIdx.x] += sh[threadIdx.x + stride];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads(); /* sh may be reused right after */
    return r;
}

/* The word a kernel stores for a bad index (fg_cuda_kernels.h, FG_CU_BAD_*). */
__device__ __forceinline__ unsigned long long bad_word(int op, size_t row, int value)
{
    return (1ull << 63) | ((unsigned long long)op << 61) |
           ((unsigned long long)(row & 0x1fffffffu) << 32) | (unsigned)value;
}

/* splitmix64's finaliser: the counter-based dropout draws of kernels/cpu/dropout.c. */
__device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Whether draw `index` of the stream keyed `key` (mix64(seed ^ ...), made on the host) is
 * kept at a 24-bit threshold: fg_cpu_keep. */
__device__ __forceinline__ bool dropout_keep(uint64_t key, uint64_t index, uint32_t threshold)
{
    return (uint32_t)(mix64(key + index * 0x9E3779B97F4A7C15ull) >> 40) >= threshold;
}

/* Warp-wide max and sum by butterfly: every lane gets the same value (a + b == b + a). */
template <typename V> __device__ __forceinline__ V warp_max(V v)
{
    for (int off = 16; off > 0; off >>= 1) {
        V o = __shfl_xor_sync(0xffffffffu, v, off);
        v = o > v ? o : v;
    }
    return v;
}

template <typename V> __device__ __forceinline__ V warp_sum(V v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

} // namespace fgcu

/* Runs BODY with T bound to the storage type of code `t` (returns cudaErrorInvalidValue
 * from the enclosing function for an unknown code). */
#define FGCU_DISPATCH(t, T, ...)                                                           \
    switch (t) {                                                                           \
    case fgcu::F32: {                                                                      \
        typedef float T;                                                                   \
        __VA_ARGS__;                                                                       \
    } break;                                                                               \
    case fgcu::F16: {                                                                      \
        typedef __half T;                                                                  \
        __VA_ARGS__;                                                                       \
    } break;                                                                               \
    case fgcu::BF16: {                                                                     \
        typedef __nv_bfloat16 T;                                                           \
        __VA_ARGS__;                                                                       \
    } break;                                                                               \
    default:                                                                               \
        return cudaErrorInvalidValue;                                                      \
    }

#endif
