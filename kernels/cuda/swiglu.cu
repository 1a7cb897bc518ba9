/* SwiGLU's gating, y = silu(gate) * up, and its backward, elementwise as kernels/cpu/swiglu.c
 * (expf, the same order of operations), over 128-bit packs when every pointer is aligned. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

#define VEC_BODY [&](size_t i, auto w_) { constexpr int W = decltype(w_)::value; (void)w_;

template <typename T>
__global__ void swiglu_forward_k(const T *gate, const T *up, T *y, size_t n, int vec)
{
    for_vec<vec_of<T>::value>(n, vec, VEC_BODY
        float g[W], u[W];
        ld_n(gate, i, g);
        ld_n(up, i, u);
        for (int k = 0; k < W; k++)
            g[k] = g[k] / (1.0f + expf(-g[k])) * u[k];
        st_n(y, i, g);
    });
}

/* dgate may alias dy: a pack is read whole before it is written. */
template <typename T>
__global__ void swiglu_backward_k(const T *gate, const T *up, const T *dy, T *dgate, T *dup,
                                  size_t n, int vec)
{
    for_vec<vec_of<T>::value>(n, vec, VEC_BODY
        float g[W], u[W], d[W], dg[W], du[W];
        ld_n(gate, i, g);
        ld_n(up, i, u);
        ld_n(dy, i, d);
        for (int k = 0; k < W; k++) {
            float sg = 1.0f / (1.0f + expf(-g[k])), silu = g[k] * sg;
            du[k] = d[k] * silu;
            dg[k] = d[k] * u[k] * sg * (1.0f + g[k] * (1.0f - sg));
        }
        st_n(dup, i, du);
        st_n(dgate, i, dg);
    });
}

} // namespace

cudaError_t fg_cu_swiglu_forward(cudaStream_t s, int type, const void *gate, const void *up,
                                 void *y, size_t n)
{
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, swiglu_forward_k<T>)(
                      (const T *)gate, (const T *)up, (T *)y, n, aligned16(gate, up, y)));
    return cudaGetLastError();
}

cudaError_t fg_cu_swiglu_backward(cudaStream_t s, int type, const void *gate, const void *up,
                                  const void *dy, void *dgate, void *dup, size_t n)
{
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, swiglu_backward_k<T>)(
                      (const T *)gate, (const T *)up, (const T *)dy, (T *)dgate, (T *)dup, n,
                      aligned16(gate, up, dy, dgate, dup)));
    return cudaGetLastError();
}
