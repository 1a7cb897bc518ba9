/* Embedding lookups and their gradient, as kernels/cpu/embedding.c. The ids live on the
 * device, so a bad one is flagged to the host (the queue's bad word) instead of checked
 * before the launch. The backward needs no atomics: the first position of each id owns the
 * id's table row and adds the rows of every position with that id, in position order and in
 * f32, which is the order (and the rounding) of the CPU's loop. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kEmbedThreads = 128;

template <typename Tab, typename Out>
__global__ void embed_forward_k(const int32_t *__restrict__ ids, int n, int dim, int rows,
                                const Tab *table, Out *out, int accumulate,
                                unsigned long long *bad)
{
    size_t d = (size_t)dim;
    FGCU_FOR(i, (size_t)n * d)
    {
        size_t r = i / d, c = i - r * d;
        int id = ids[r];
        if (id < 0 || id >= rows) {
            if (c == 0)
                *bad = bad_word(FG_CU_BAD_EMBEDDING, r, id);
            st(out, i, NAN);
            continue;
        }
        float v = ld(table, (size_t)id * d + c);
        st(out, i, accumulate ? ld(out, i) + v : v);
    }
}

/* One block per position r: it returns unless r is its id's first position; then it sums
 * that id's positions r.. into the id's table row, column by column. */
template <typename T, typename G>
__global__ void embed_backward_k(const int32_t *__restrict__ ids, int n, int dim, int rows,
                                 const T *dout, G *dtable, int accumulate,
                                 unsigned long long *bad)
{
    __shared__ int earlier;
    int r = blockIdx.x, id = ids[r];
    if (id < 0 || id >= rows) {
        if (threadIdx.x == 0)
            *bad = bad_word(FG_CU_BAD_EMBEDDING, (size_t)r, id);
        return;
    }
    if (threadIdx.x == 0)
        earlier = 0;
    __syncthreads();
    for (int k = threadIdx.x; k < r; k += kEmbedThreads)
        if (ids[k] == id)
            earlier = 1; /* every writer stores the same value */
    __syncthreads();
    if (earlier)
        return;
    size_t d = (size_t)dim, row = (size_t)id * d;
    for (size_t c = threadIdx.x; c < d; c += kEmbedThreads) {
        float v = accumulate ? ld(dtable, row + c) : 0.0f;
        for (int k = r; k < n; k++)
            if (ids[k] == id)
                v += ld(dout, (size_t)k * d + c);
        st(dtable, row + c, v);
    }
}

} // namespace

extern "C" {

cudaError_t fg_cu_embedding_forward(cudaStream_t s, int table_type, int out_type,
                                    const int32_t *ids, int n, int dim, int rows,
                                    const void *table, void *out, int accumulate,
                                    unsigned long long *bad)
{
    size_t count = (size_t)n * (size_t)dim;
    FGCU_DISPATCH(table_type, Tab,
                  FGCU_DISPATCH(out_type, Out,
                                FGCU_LAUNCH(grid_for(count), kThreads, 0, s,
                                            embed_forward_k<Tab, Out>)(
                                    ids, n, dim, rows, (const Tab *)table, (Out *)out,
                                    accumulate, bad)));
    return cudaGetLastError();
}

cudaError_t fg_cu_embedding_backward(cudaStream_t s, int type, int grad_type,
                                     const int32_t *ids, int n, int dim, int rows,
                                     const void *dout, void *dtable, int accumulate,
                                     unsigned long long *bad)
{
    if (!known_type(type) || !known_type(grad_type))
        return cudaErrorInvalidValue;
    if (!accumulate) {
        size_t bytes = (size_t)rows * (size_t)dim * (grad_type == F32 ? 4u : 2u);
        cudaError_t e = cudaMemsetAsync(dtable, 0, bytes, s); /* rows no id names */
        if (e != cudaSuccess)
            return e;
    }
    if (n == 0)
        return cudaSuccess;
    FGCU_DISPATCH(type, T,
                  FGCU_DISPATCH(grad_type, G,
                                FGCU_LAUNCH((unsigned)n, kEmbedThreads, 0, s,
                                            embed_backward_k<T, G>)(
                                    ids, n, dim, rows, (const T *)dout, (G *)dtable,
                                    accumulate, bad)));
    return cudaGetLastError();
}

} // extern "C"
