/* cudaemu: force-included (-include cudaemu.h) when a kernels/cuda .cu file is compiled as
 * C++ by the host compiler instead of nvcc. The CUDA keywords become host C++: kernels are
 * plain functions, __shared__ variables live in one section (fgemu_shared) that holds the
 * block that runs now (blocks run one at a time), threadIdx/blockIdx/blockDim/gridDim read
 * the fiber that runs now, and the barriers, shuffles and atomics call the emulator
 * (emu_fiber.cc). FGCU_LAUNCH (kernels/cuda/fg_cuda_common.cuh) calls fgemu::launcher.
 * Test-only: never installed. */
#ifndef FGEMU_CUDAEMU_H
#define FGEMU_CUDAEMU_H

#define FGEMU 1
#define __global__
#define __device__
#define __host__
#define __shared__ static __attribute__((section("fgemu_shared"), aligned(16)))

#include <cuda_runtime_api.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_types.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "emu_api.h"

#ifdef __cplusplus
#include <tuple>
#include <utility>

extern char __start_fgemu_shared[] __attribute__((weak, visibility("hidden")));
extern char __stop_fgemu_shared[] __attribute__((weak, visibility("hidden")));

namespace fgemu {

template <class F> static void invoke_body(void *f) { (*(F *)f)(); }

/* A launch recorded while its stream captures (emu_capture.cc): the arguments kept by
 * value, launched again on the graph's stream at each replay. */
template <class... P> struct launch_record {
    const char *name;
    void (*kernel)(P...);
    dim3 grid, block;
    size_t shmem;
    std::tuple<P...> args;
    static void run(void *ctx, cudaStream_t s)
    {
        launch_record *r = (launch_record *)ctx;
        void (*k)(P...) = r->kernel;
        std::tuple<P...> &args = r->args;
        auto body = [&args, k]() { std::apply(k, args); };
        fgemu_shared_range shared = { __start_fgemu_shared, __stop_fgemu_shared };
        fgemu_launch(r->name, r->grid, r->block, r->shmem, s, &shared,
                     &invoke_body<decltype(body)>, &body);
    }
    static void drop(void *ctx) { delete (launch_record *)ctx; }
};

/* launcher(...)(args...): the arguments converted to the kernel's parameter types once,
 * then every thread of every block calls the kernel with its own copies. */
template <class... P> struct launcher {
    const char *name;
    void (*kernel)(P...);
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    launcher(const char *n, void (*k)(P...), dim3 g, dim3 b, size_t sh, cudaStream_t s)
        : name(n), kernel(k), grid(g), block(b), shmem(sh), stream(s)
    {
    }
    template <class... A> void operator()(A &&...a) const
    {
        std::tuple<P...> args(std::forward<A>(a)...);
        if (fgemu_capturing(stream)) {
            auto *r = new launch_record<P...>{ name, kernel, grid, block, shmem, args };
            fgemu_capture_add(stream, &launch_record<P...>::run, r, &launch_record<P...>::drop);
            return;
        }
        void (*k)(P...) = kernel;
        auto body = [&args, k]() { std::apply(k, args); };
        fgemu_shared_range shared = { __start_fgemu_shared, __stop_fgemu_shared };
        fgemu_launch(name, grid, block, shmem, stream, &shared, &invoke_body<decltype(body)>,
                     &body);
    }
};

template <class T> inline T shfl(unsigned mask, T v, int kind, int arg, int width)
{
    static_assert(sizeof(T) <= 16, "shuffle of a value larger than 16 bytes");
    T out;
    fgemu_shfl(mask, &v, &out, sizeof(T), kind, arg, width);
    return out;
}

} // namespace fgemu

#define threadIdx (fgemu_current()->thread_idx)
#define blockIdx (fgemu_current()->block_idx)
#define blockDim (fgemu_current()->block_dim)
#define gridDim (fgemu_current()->grid_dim)
#define warpSize 32

inline void __syncthreads() { fgemu_syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { fgemu_syncwarp(mask); }
inline void __threadfence() { fgemu_point(); }
template <class T> inline T __shfl_sync(unsigned m, T v, int src, int w = 32)
{
    return fgemu::shfl(m, v, FGEMU_SHFL_IDX, src, w);
}
template <class T> inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32)
{
    return fgemu::shfl(m, v, FGEMU_SHFL_UP, (int)d, w);
}
template <class T> inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32)
{
    return fgemu::shfl(m, v, FGEMU_SHFL_DOWN, (int)d, w);
}
template <class T> inline T __shfl_xor_sync(unsigned m, T v, int lane_mask, int w = 32)
{
    return fgemu::shfl(m, v, FGEMU_SHFL_XOR, lane_mask, w);
}
template <class T> inline T __ldg(const T *p) { return *p; }

/* A global access of `bytes` (a vector load or store: 16, 8, 4 or 2 bytes) at p: the device
 * faults on an address that is not a multiple of its size (cudaErrorMisalignedAddress, a
 * sticky error), where the host would read it quietly. */
inline void fgemu_check_aligned(const void *p, size_t bytes)
{
    if (((uintptr_t)p & (bytes - 1)) == 0)
        return;
    fprintf(stderr, "fgemu: misaligned %zu-byte access at %p\n", bytes, p);
    fgemu_set_sticky(cudaErrorMisalignedAddress);
}

/* Atomics: blocks run one at a time on one OS thread, so a read-modify-write between two
 * scheduling points is atomic; the point before it lets the random mode interleave. */
template <class T> inline T fgemu_rmw_add(T *p, T v)
{
    fgemu_point();
    T old = *p;
    *p = old + v;
    return old;
}
inline int atomicAdd(int *p, int v) { return fgemu_rmw_add(p, v); }
inline unsigned atomicAdd(unsigned *p, unsigned v) { return fgemu_rmw_add(p, v); }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return fgemu_rmw_add(p, v);
}
inline float atomicAdd(float *p, float v) { return fgemu_rmw_add(p, v); }
inline double atomicAdd(double *p, double v) { return fgemu_rmw_add(p, v); }
template <class T> inline T fgemu_rmw_max(T *p, T v, int is_max)
{
    fgemu_point();
    T old = *p;
    *p = is_max ? (v > old ? v : old) : (v < old ? v : old);
    return old;
}
inline int atomicMax(int *p, int v) { return fgemu_rmw_max(p, v, 1); }
inline unsigned atomicMax(unsigned *p, unsigned v) { return fgemu_rmw_max(p, v, 1); }
inline int atomicMin(int *p, int v) { return fgemu_rmw_max(p, v, 0); }
inline unsigned atomicMin(unsigned *p, unsigned v) { return fgemu_rmw_max(p, v, 0); }
template <class T> inline T fgemu_rmw_cas(T *p, T cmp, T v)
{
    fgemu_point();
    T old = *p;
    if (old == cmp)
        *p = v;
    return old;
}
inline int atomicCAS(int *p, int c, int v) { return fgemu_rmw_cas(p, c, v); }
inline unsigned atomicCAS(unsigned *p, unsigned c, unsigned v) { return fgemu_rmw_cas(p, c, v); }
inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long c,
                                    unsigned long long v)
{
    return fgemu_rmw_cas(p, c, v);
}
template <class T> inline T atomicExch(T *p, T v)
{
    fgemu_point();
    T old = *p;
    *p = v;
    return old;
}
#endif /* __cplusplus */
#endif
