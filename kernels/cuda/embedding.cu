/* Embedding lookups and their gradient, as kernels/cpu/embedding.c. The ids live on the
 * device, so a bad one is flagged to the host (the queue's bad word) instead of checked
 * before the launch. The backward's sums need no atomics: each id's table row is written by
 * one block, which adds the rows of every position with that id in position order and in
 * f32, the order (and the rounding) of the CPU's loop; only the counting sort that groups
 * the positions by id uses atomics, and its result does not depend on their order. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kEmbedThreads = 128;

/* Packs of W elements of one row (W > 1: dim a multiple of W, table and out 16-byte
 * aligned). */
template <typename Tab, typename Out>
__global__ void embed_forward_k(const int32_t *__restrict__ ids, int n, int dim, int rows,
                                const Tab *table, Out *out, int accumulate,
                                unsigned long long *bad, int vec)
{
    size_t d = (size_t)dim;
    for_vec<vec_of<Tab, Out>::value>((size_t)n * d, vec, [&](size_t i, auto w_) {
        constexpr int W = decltype(w_)::value;
        (void)w_;
        size_t r = i / d, c = i - r * d;
        int id = ids[r];
        float v[W];
        if (id < 0 || id >= rows) {
            if (c == 0)
                *bad = bad_word(FG_CU_BAD_EMBEDDING, r, id);
            for (int k = 0; k < W; k++)
                v[k] = NAN;
            st_n(out, i, v);
            return;
        }
        ld_n(table, (size_t)id * d + c, v);
        if (accumulate) {
            float o[W];
            ld_n(out, i, o);
            for (int k = 0; k < W; k++)
                v[k] = o[k] + v[k];
        }
        st_n(out, i, v);
    });
}

/* The backward groups the positions by id with a counting sort in the workspace
 * (fg_cu_embedding_workspace): 1) count each id's positions; 2) an exclusive scan of the
 * counts gives each id's segment; 3) positions are scattered into their segments (in any
 * order: atomics); 4) each segment is put in position order by ranks (a position's rank is
 * the number of its segment's positions before it); 5) one block per segment sums its rows
 * in that order into the id's table row. O(B*T + V) work plus the squares of the segments'
 * lengths, instead of the (B*T)^2 of scanning every earlier position. */
struct embed_sort {
    int *count;  /* rows: positions per id, then the scatter's cursor */
    int *start;  /* rows + 1: each id's first slot */
    int *slots;  /* n: positions grouped by id, unordered within an id */
    int *sorted; /* n: the same, in position order within an id */
};

__device__ __forceinline__ bool embed_valid(int id, int rows) { return id >= 0 && id < rows; }

__global__ void embed_count_k(const int32_t *__restrict__ ids, int n, int rows, embed_sort w,
                              unsigned long long *bad)
{
    FGCU_FOR(r, (size_t)n)
    {
        int id = ids[r];
        if (embed_valid(id, rows))
            atomicAdd(&w.count[id], 1);
        else
            *bad = bad_word(FG_CU_BAD_EMBEDDING, r, id);
    }
}

/* One block: start = exclusive prefix sum of count, each thread over a contiguous run of
 * ids; count becomes the scatter's cursor (= start). */
__global__ void embed_scan_k(int rows, embed_sort w)
{
    __shared__ int run_total[kEmbedThreads];
    int per = (rows + kEmbedThreads - 1) / kEmbedThreads, t = (int)threadIdx.x;
    int lo = t * per < rows ? t * per : rows, hi = lo + per < rows ? lo + per : rows;
    int sum = 0;
    for (int i = lo; i < hi; i++)
        sum += w.count[i];
    run_total[t] = sum;
    __syncthreads();
    if (t == 0) /* kEmbedThreads values: serial is enough */
        for (int k = 0, acc = 0; k < kEmbedThreads; k++) {
            int v = run_total[k];
            run_total[k] = acc;
            acc += v;
        }
    __syncthreads();
    int acc = run_total[t];
    for (int i = lo; i < hi; i++) {
        int c = w.count[i];
        w.start[i] = acc;
        w.count[i] = acc;
        acc += c;
    }
    if (t == kEmbedThreads - 1)
        w.start[rows] = acc;
}

__global__ void embed_scatter_k(const int32_t *__restrict__ ids, int n, int rows, embed_sort w)
{
    FGCU_FOR(r, (size_t)n)
    {
        int id = ids[r];
        if (embed_valid(id, rows))
            w.slots[atomicAdd(&w.count[id], 1)] = (int)r;
    }
}

/* The block of slot i does the work of i's segment when i is its first slot. */
__device__ __forceinline__ bool embed_segment(const int32_t *ids, const embed_sort &w, int i,
                                             int n_valid, int *lo, int *hi)
{
    if (i >= n_valid)
        return false;
    int id = ids[w.slots[i]];
    *lo = w.start[id];
    *hi = w.start[id + 1];
    return i == *lo;
}

__global__ void embed_order_k(const int32_t *__restrict__ ids, embed_sort w, const int *n_valid)
{
    int lo, hi;
    if (!embed_segment(ids, w, (int)blockIdx.x, *n_valid, &lo, &hi))
        return;
    for (int a = lo + (int)threadIdx.x; a < hi; a += kEmbedThreads) {
        int pos = w.slots[a], rank = 0;
        for (int b = lo; b < hi; b++)
            rank += w.slots[b] < pos;
        w.sorted[lo + rank] = pos;
    }
}

/* W columns a thread (W > 1: dim a multiple of W, dout and dtable 16-byte aligned). */
template <typename T, typename G, int W>
__global__ void embed_sum_k(const int32_t *__restrict__ ids, int dim, embed_sort w,
                            const int *n_valid, const T *dout, G *dtable, int accumulate)
{
    int lo, hi;
    if (!embed_segment(ids, w, (int)blockIdx.x, *n_valid, &lo, &hi))
        return;
    size_t d = (size_t)dim, row = (size_t)ids[w.slots[lo]] * d;
    for (size_t c = threadIdx.x * (size_t)W; c < d; c += (size_t)kEmbedThreads * W) {
        float v[W], o[W];
        if (accumulate)
            ld_n(dtable, row + c, v);
        else
            for (int k = 0; k < W; k++)
                v[k] = 0.0f;
        for (int k = lo; k < hi; k++) {
            ld_n(dout, (size_t)w.sorted[k] * d + c, o);
            for (int j = 0; j < W; j++)
                v[j] += o[j];
        }
        st_n(dtable, row + c, v);
    }
}

template <typename T, typename G>
void embed_sum(cudaStream_t s, const int32_t *ids, int n, int dim, embed_sort w,
               const int *n_valid, const T *dout, G *dtable, int accumulate)
{
    constexpr int V = vec_of<T, G>::value;
    if (aligned16(dout, dtable) && dim % V == 0)
        FGCU_LAUNCH((unsigned)n, kEmbedThreads, 0, s, embed_sum_k<T, G, V>)(
            ids, dim, w, n_valid, dout, dtable, accumulate);
    else
        FGCU_LAUNCH((unsigned)n, kEmbedThreads, 0, s, embed_sum_k<T, G, 1>)(
            ids, dim, w, n_valid, dout, dtable, accumulate);
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
                                    accumulate, bad,
                                    aligned16(table, out) &&
                                        dim % vec_of<Tab, Out>::value == 0)));
    return cudaGetLastError();
}

size_t fg_cu_embedding_workspace(int n, int rows)
{
    return ((size_t)rows * 2 + 1 + (size_t)n * 2) * sizeof(int);
}

cudaError_t fg_cu_embedding_backward(cudaStream_t s, int type, int grad_type,
                                     const int32_t *ids, int n, int dim, int rows,
                                     const void *dout, void *dtable, int accumulate,
                                     void *workspace, unsigned long long *bad)
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
    int *base = (int *)workspace;
    embed_sort w = { base, base + rows, base + 2 * (size_t)rows + 1,
                     base + 2 * (size_t)rows + 1 + n };
    cudaError_t e = cudaMemsetAsync(w.count, 0, (size_t)rows * sizeof(int), s);
    if (e != cudaSuccess)
        return e;
    FGCU_LAUNCH(grid_for((size_t)n), kThreads, 0, s, embed_count_k)(ids, n, rows, w, bad);
    FGCU_LAUNCH(1, kEmbedThreads, 0, s, embed_scan_k)(rows, w);
    FGCU_LAUNCH(grid_for((size_t)n), kThreads, 0, s, embed_scatter_k)(ids, n, rows, w);
    const int *n_valid = w.start + rows; /* slots past it: bad ids, not scattered */
    FGCU_LAUNCH((unsigned)n, kEmbedThreads, 0, s, embed_order_k)(ids, w, n_valid);
    FGCU_DISPATCH(type, T,
                  FGCU_DISPATCH(grad_type, G,
                                embed_sum<T, G>(s, ids, n, dim, w, n_valid, (const T *)dout,
                                                (G *)dtable, accumulate)));
    return cudaGetLastError();
}

} // extern "C"
