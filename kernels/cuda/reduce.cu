/* Reductions: sum of squares, bias gradients, softmax cross-entropy and the pointwise losses
 * (mse, bce with logits: each value's loss, metric and gradient in the CPU's formulas, f64
 * where it uses f64). Every sum is taken in f64 over a partition that depends only on the
 * problem size, and combined in a fixed tree order: the same inputs give the same bits on
 * every run. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kReduceThreads = 256;

/* ---- sum of squares: contiguous chunks, one per block, then the chunks in order -------- */

template <typename T>
__global__ void sumsq_partial_k(const T *__restrict__ x, size_t n, size_t chunk,
                                double *partial)
{
    __shared__ double sh[kReduceThreads];
    size_t lo = (size_t)blockIdx.x * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double acc = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += kReduceThreads) {
        double v = (double)ld(x, i);
        acc += v * v;
    }
    double total = block_sum<kReduceThreads>(acc, sh);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = total;
}

/* One block: the partials in a fixed tree; out = (float) total, + (float) *add_to. */
__global__ void sum_partials_k(const double *partial, int count, float *out)
{
    __shared__ double sh[kReduceThreads];
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += kReduceThreads)
        acc += partial[i];
    double total = block_sum<kReduceThreads>(acc, sh);
    if (threadIdx.x == 0)
        *out = (float)total;
}

/* ---- bias gradient ------------------------------------------------------------------------- */

constexpr int kColTile = 32, kRowStripes = 16;

/* spatial == 1: a tile of 32 columns per block, 16 row stripes summed in stripe order. */
template <typename T>
__global__ void bias_grad_cols_k(void *dbias, int dbias_type, const T *__restrict__ dy,
                                 int rows, int cols, int accumulate)
{
    __shared__ double sh[kRowStripes][kColTile];
    int col = blockIdx.x * kColTile + threadIdx.x;
    double acc = 0.0;
    if (col < cols)
        for (int r = threadIdx.y; r < rows; r += kRowStripes)
            acc += (double)ld(dy, (size_t)r * (size_t)cols + (size_t)col);
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
        double total = 0.0;
        for (int k = 0; k < kRowStripes; k++)
            total += sh[k][threadIdx.x];
        float v = accumulate ? (float)((double)ld_dyn(dbias, dbias_type, col) + total)
                             : (float)total;
        st_dyn(dbias, dbias_type, col, v);
    }
}

/* spatial > 1: one block per column over its rows x spatial values. */
template <typename T>
__global__ void bias_grad_planes_k(void *dbias, int dbias_type, const T *__restrict__ dy,
                                   int rows, int cols, int spatial, int accumulate)
{
    __shared__ double sh[kReduceThreads];
    int col = blockIdx.x;
    size_t sp = (size_t)spatial, count = (size_t)rows * sp;
    double acc = 0.0;
    for (size_t j = threadIdx.x; j < count; j += kReduceThreads) {
        size_t r = j / sp, s = j - r * sp;
        acc += (double)ld(dy, (r * (size_t)cols + (size_t)col) * sp + s);
    }
    double total = block_sum<kReduceThreads>(acc, sh);
    if (threadIdx.x == 0) {
        float v = accumulate ? (float)((double)ld_dyn(dbias, dbias_type, col) + total)
                             : (float)total;
        st_dyn(dbias, dbias_type, col, v);
    }
}

/* ---- softmax cross-entropy ------------------------------------------------------------------ */

/* (value, index) of the first maximum: x[0] always counts (a NaN there wins, as on the
 * CPU, whose loop starts from it); later elements win only by being strictly larger. */
struct argmax_t {
    float v;
    int i;
};

__device__ __forceinline__ argmax_t argmax_join(argmax_t a, argmax_t b)
{
    if (b.i < 0)
        return a;
    if (a.i < 0)
        return b;
    argmax_t first = a.i < b.i ? a : b, second = a.i < b.i ? b : a;
    if (first.i == 0 && first.v != first.v)
        return first;
    return second.v > first.v ? second : first;
}

/* The SDK's FG_IGNORED_LABEL: a row the loss skips (no loss, no hit, a zero gradient). */
constexpr int kIgnoredLabel = -1;

/* One warp's row of softmax cross-entropy: the maximum and its first index, then the sum of
 * exp(x - max) in double (each exponential written to probs when it is not NULL); every
 * lane returns the totals. Each lane reads packs of W columns (W > 1: the row's stride a
 * multiple of W and the logits 16-byte aligned; the columns of the last pack past
 * `classes` are padding, not read into the sums), the packs lane, lane + 32, ...: the
 * partition, and so the sums' bits, depend only on W. */
template <typename T, int W>
__device__ __forceinline__ argmax_t xent_row_stats(const T *logits, size_t base, int classes,
                                                   int lane, float *probs, double *sum_out)
{
    argmax_t best = {-INFINITY, -1};
    for (int j0 = lane * W; j0 < classes; j0 += 32 * W) {
        float v[W];
        ld_n(logits, base + j0, v);
        for (int k = 0; k < W && j0 + k < classes; k++) {
            int j = j0 + k;
            if (j == 0 || (best.i < 0 ? v[k] > -INFINITY : v[k] > best.v))
                best = argmax_t{v[k], j};
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        argmax_t o;
        o.v = __shfl_xor_sync(0xffffffffu, best.v, off);
        o.i = __shfl_xor_sync(0xffffffffu, best.i, off);
        best = argmax_join(best, o);
    }
    double sum = 0.0;
    for (int j0 = lane * W; j0 < classes; j0 += 32 * W) {
        float v[W];
        ld_n(logits, base + j0, v);
        for (int k = 0; k < W && j0 + k < classes; k++) {
            float e = expf(v[k] - best.v);
            if (probs)
                probs[base + j0 + k] = e;
            sum += (double)e;
        }
    }
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    *sum_out = sum;
    return best;
}

/* Lane 0's record of a row: its loss and hit into scratch (chunk-relative), or a bad label
 * reported with its row in the whole batch (the row's loss NaN). */
__device__ __forceinline__ void xent_row_record(int warp, int first, int label, int classes,
                                                argmax_t best, double sum, float at_label,
                                                double *loss, double *hit,
                                                unsigned long long *bad)
{
    if (label == kIgnoredLabel) {
        loss[warp] = 0.0;
        hit[warp] = 0.0;
    } else if (label < 0 || label >= classes) {
        *bad = bad_word(FG_CU_BAD_XENT, (size_t)(first + warp), label);
        loss[warp] = NAN;
        hit[warp] = 0.0;
    } else {
        loss[warp] = (double)best.v + log(sum) - (double)at_label;
        hit[warp] = best.i == label ? 1.0 : 0.0;
    }
}

/* One warp per row of a chunk that starts at row `first` of the whole batch: probs, the
 * row's loss and hit into scratch (loss[row], hit[row], chunk-relative); a bad label is
 * reported with its row in the whole batch. */
template <typename T, int W>
__global__ void xent_rows_k(const T *logits, const int32_t *__restrict__ labels, int rows,
                            int first, int classes, float *probs, double *loss, double *hit,
                            unsigned long long *bad)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (warp >= rows)
        return;
    size_t base = (size_t)warp * (size_t)classes;
    int label = labels[warp];
    int valid = label >= 0 && label < classes;
    /* read before probs, which may alias the logits (f32), is written */
    float at_label = valid ? ld(logits, base + label) : 0.0f;
    __syncwarp();
    double sum;
    argmax_t best = xent_row_stats<T, W>(logits, base, classes, lane, probs, &sum);
    float inv = (float)(1.0 / sum);
    __syncwarp();
    for (int j = lane; j < classes; j += 32)
        probs[base + j] *= inv;
    if (lane == 0)
        xent_row_record(warp, first, label, classes, best, sum, at_label, loss, hit, bad);
}

/* The fused classifier: one warp per row of a chunk, as xent_rows_k (the same loss, hit and
 * bad-label report), and with dlogits the row's gradient (softmax - onehot) * scale in the
 * logits' dtype, 0 in the padding [classes, ld): the row is read three times, no
 * probability buffer. Each lane reads and writes only its own columns, so dlogits may alias
 * the logits. */
template <typename T, int W>
__global__ void classifier_rows_k(const T *logits, int ld_row, const int32_t *__restrict__ labels,
                                  int rows, int first, int classes, float scale, T *dlogits,
                                  int dvec, double *loss, double *hit, unsigned long long *bad)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (warp >= rows)
        return;
    size_t base = (size_t)warp * (size_t)ld_row;
    int label = labels[warp];
    int valid = label >= 0 && label < classes;
    float at_label = valid ? ld(logits, base + label) : 0.0f;
    __syncwarp();
    double sum;
    argmax_t best = xent_row_stats<T, W>(logits, base, classes, lane, (float *)NULL, &sum);
    float inv = (float)(1.0 / sum);
    /* each lane writes the columns it reads (dlogits may alias the logits) */
    auto grad = [&](int j, float v) {
        if (j >= classes || label == kIgnoredLabel)
            return 0.0f;
        float p = expf(v - best.v) * inv;
        return !valid ? NAN : j == label ? (p - 1.0f) * scale : p * scale;
    };
    if (dlogits && dvec && W > 1) {
        for (int j0 = lane * W; j0 < ld_row; j0 += 32 * W) {
            float v[W];
            ld_n(logits, base + j0, v);
            for (int k = 0; k < W; k++)
                v[k] = grad(j0 + k, v[k]);
            st_n(dlogits, base + j0, v);
        }
    } else {
        for (int j = lane; dlogits && j < ld_row; j += 32)
            st(dlogits, base + j, grad(j, j < classes ? ld(logits, base + j) : 0.0f));
    }
    if (lane == 0)
        xent_row_record(warp, first, label, classes, best, sum, at_label, loss, hit, bad);
}

/* One block: scale times the sums of a[count] and b[count], in a fixed tree, added to the
 * scalars (NULL: skipped). The softmax's losses and hits (scale 1: exactly the sums) and
 * the pointwise losses' chunk sums. */
__global__ void sum_pair_k(const double *a, const double *b, int count, float scale,
                           float *a_sum, float *b_sum)
{
    __shared__ double sh[kReduceThreads];
    double l = 0.0, h = 0.0;
    for (int i = threadIdx.x; i < count; i += kReduceThreads) {
        l += a[i];
        h += b[i];
    }
    double ta = block_sum<kReduceThreads>(l, sh);
    double tb = block_sum<kReduceThreads>(h, sh);
    if (threadIdx.x == 0) {
        if (a_sum)
            *a_sum = (float)((double)*a_sum + (double)scale * ta);
        if (b_sum)
            *b_sum = (float)((double)*b_sum + (double)scale * tb);
    }
}

template <typename T>
__global__ void xent_backward_k(const float *probs, const int32_t *__restrict__ labels,
                                int rows, int classes, float scale, T *dlogits,
                                unsigned long long *bad, const fg_cu_loss_scale *ls,
                                float divisor)
{
    if (ls) /* the loss scale where the device scaler left it, as the host would multiply */
        scale = divisor != 0.0f ? (scale * (float)ls->scale) / divisor : 0.0f;
    size_t n = (size_t)rows * (size_t)classes;
    FGCU_FOR(i, n)
    {
        size_t row = i / (size_t)classes;
        int j = (int)(i - row * (size_t)classes);
        int label = labels[row];
        float p = probs[i];
        if (label == kIgnoredLabel) {
            st(dlogits, i, 0.0f);
        } else if (label < 0 || label >= classes) {
            if (j == 0)
                *bad = bad_word(FG_CU_BAD_XENT, row, label);
            st(dlogits, i, NAN);
        } else {
            st(dlogits, i, j == label ? (p - 1.0f) * scale : p * scale);
        }
    }
}

/* ---- pointwise losses (mse, bce with logits), as kernels/cpu/pointwise_loss.c ------------- */

/* One value: returns its loss, sets *metric and *grad (dl/dx). */
__device__ __forceinline__ double ploss_one(int kind, float x, float t, double *metric,
                                            float *grad)
{
    if (kind == 1) {
        float d = x - t;
        *metric = fabs((double)d);
        *grad = 2.0f * d;
        return (double)d * (double)d;
    }
    double e = exp(-fabs((double)x));
    double sig = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    *metric = (x > 0) == (t > 0.5f) ? 1.0 : 0.0;
    *grad = (float)(sig - (double)t);
    return (x > 0 ? (double)x : 0.0) - (double)x * (double)t + log1p(e);
}

template <typename T>
__global__ void ploss_partial_k(int kind, const T *x, const float *__restrict__ t, size_t n,
                                size_t chunk, float grad_scale, T *dx, double *loss,
                                double *metric)
{
    __shared__ double sh[kReduceThreads];
    size_t lo = (size_t)blockIdx.x * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double l = 0.0, m = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += kReduceThreads) {
        double mi;
        float g;
        l += ploss_one(kind, ld(x, i), t[i], &mi, &g);
        m += mi;
        if (dx)
            st(dx, i, g * grad_scale); /* after reading x[i]: dx may alias x */
    }
    double tl = block_sum<kReduceThreads>(l, sh);
    double tm = block_sum<kReduceThreads>(m, sh);
    if (threadIdx.x == 0) {
        loss[blockIdx.x] = tl;
        metric[blockIdx.x] = tm;
    }
}

/* The row kernels read packs of 16 bytes when the row stride is a multiple of them and the
 * logits are 16-byte aligned; softmax_xent's rows and the classifier's then sum in the same
 * order (the classifier's bits are softmax_xent's when ld == classes). */
template <typename T>
void xent_rows(cudaStream_t s, unsigned blocks, const T *lg, const int32_t *labels, int count,
               int first, int classes, float *probs, double *loss, double *hit,
               unsigned long long *bad)
{
    constexpr int V = vec_of<T>::value;
    if (aligned16(lg) && classes % V == 0)
        FGCU_LAUNCH(blocks, 256, 0, s, xent_rows_k<T, V>)(lg, labels, count, first, classes,
                                                          probs, loss, hit, bad);
    else
        FGCU_LAUNCH(blocks, 256, 0, s, xent_rows_k<T, 1>)(lg, labels, count, first, classes,
                                                          probs, loss, hit, bad);
}

template <typename T>
void classifier_rows(cudaStream_t s, unsigned blocks, const T *lg, int ld_row,
                     const int32_t *labels, int count, int first, int classes, float scale,
                     T *dl, double *loss, double *hit, unsigned long long *bad)
{
    constexpr int V = vec_of<T>::value;
    int dvec = aligned16(dl);
    if (aligned16(lg) && ld_row % V == 0)
        FGCU_LAUNCH(blocks, 256, 0, s, classifier_rows_k<T, V>)(
            lg, ld_row, labels, count, first, classes, scale, dl, dvec, loss, hit, bad);
    else
        FGCU_LAUNCH(blocks, 256, 0, s, classifier_rows_k<T, 1>)(
            lg, ld_row, labels, count, first, classes, scale, dl, dvec, loss, hit, bad);
}

} // namespace

extern "C" {

cudaError_t fg_cu_sum_squares(cudaStream_t s, int type, const void *x, size_t n, float *out,
                              double *scratch)
{
    if (!known_type(type))
        return cudaErrorInvalidValue;
    if (n == 0)
        return cudaMemsetAsync(out, 0, sizeof *out, s);
    size_t chunk = (n + FG_CU_REDUCE_BLOCKS - 1) / FG_CU_REDUCE_BLOCKS;
    if (chunk < 8192)
        chunk = 8192;
    unsigned blocks = (unsigned)((n + chunk - 1) / chunk);
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(blocks, kReduceThreads, 0, s, sumsq_partial_k<T>)(
                      (const T *)x, n, chunk, scratch));
    FGCU_LAUNCH(1, kReduceThreads, 0, s, sum_partials_k)(scratch, (int)blocks, out);
    return cudaGetLastError();
}

cudaError_t fg_cu_bias_grad(cudaStream_t s, int type, int dbias_type, void *dbias,
                            const void *dy, int rows, int cols, int spatial, int accumulate)
{
    if (!known_type(dbias_type))
        return cudaErrorInvalidValue;
    if (spatial == 1) {
        dim3 block(kColTile, kRowStripes);
        unsigned grid = (unsigned)((cols + kColTile - 1) / kColTile);
        FGCU_DISPATCH(type, T,
                      FGCU_LAUNCH(grid, block, 0, s, bias_grad_cols_k<T>)(dbias, dbias_type,
                                                                 (const T *)dy, rows, cols,
                                                                 accumulate));
    } else {
        FGCU_DISPATCH(type, T,
                      FGCU_LAUNCH((unsigned)cols, kReduceThreads, 0, s, bias_grad_planes_k<T>)(
                          dbias, dbias_type, (const T *)dy, rows, cols, spatial, accumulate));
    }
    return cudaGetLastError();
}

cudaError_t fg_cu_xent_forward(cudaStream_t s, int type, const void *logits,
                               const int32_t *labels, int rows, int classes, float *probs,
                               float *loss_sum, float *correct, double *scratch,
                               unsigned long long *bad)
{
    size_t elem = type == F32 ? 4 : 2;
    for (int first = 0; first < rows; first += FG_CU_XENT_CHUNK) {
        int count = rows - first < FG_CU_XENT_CHUNK ? rows - first : FG_CU_XENT_CHUNK;
        size_t off = (size_t)first * (size_t)classes;
        const char *lg = (const char *)logits + off * elem;
        unsigned blocks = (unsigned)((count + 7) / 8); /* 8 warps a block */
        double *loss = scratch, *hit = scratch + FG_CU_XENT_CHUNK;
        FGCU_DISPATCH(type, T,
                      xent_rows<T>(s, blocks, (const T *)lg, labels + first, count, first,
                                   classes, probs + off, loss, hit, bad));
        FGCU_LAUNCH(1, kReduceThreads, 0, s, sum_pair_k)(loss, hit, count, 1.0f, loss_sum,
                                                          correct);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

cudaError_t fg_cu_classifier(cudaStream_t s, int type, const void *logits, int ld_row,
                             const int32_t *labels, int rows, int classes, float *loss_sum,
                             float *correct, float scale, void *dlogits, double *scratch,
                             unsigned long long *bad)
{
    size_t elem = type == F32 ? 4 : 2;
    for (int first = 0; first < rows; first += FG_CU_XENT_CHUNK) {
        int count = rows - first < FG_CU_XENT_CHUNK ? rows - first : FG_CU_XENT_CHUNK;
        size_t off = (size_t)first * (size_t)ld_row * elem;
        const char *lg = (const char *)logits + off;
        char *dl = dlogits ? (char *)dlogits + off : NULL;
        unsigned blocks = (unsigned)((count + 7) / 8); /* 8 warps a block */
        double *loss = scratch, *hit = scratch + FG_CU_XENT_CHUNK;
        FGCU_DISPATCH(type, T,
                      classifier_rows<T>(s, blocks, (const T *)lg, ld_row, labels + first,
                                         count, first, classes, scale, (T *)dl, loss, hit,
                                         bad));
        FGCU_LAUNCH(1, kReduceThreads, 0, s, sum_pair_k)(loss, hit, count, 1.0f, loss_sum,
                                                          correct);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

cudaError_t fg_cu_xent_backward(cudaStream_t s, int type, const float *probs,
                                const int32_t *labels, int rows, int classes, float scale,
                                void *dlogits, unsigned long long *bad)
{
    return fg_cu_xent_backward_scaled(s, type, probs, labels, rows, classes, scale, 0.0f, NULL,
                                      dlogits, bad);
}

cudaError_t fg_cu_xent_backward_scaled(cudaStream_t s, int type, const float *probs,
                                       const int32_t *labels, int rows, int classes,
                                       float scale, float divisor,
                                       const fg_cu_loss_scale *ls, void *dlogits,
                                       unsigned long long *bad)
{
    size_t n = (size_t)rows * (size_t)classes;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, xent_backward_k<T>)(
                      probs, labels, rows, classes, scale, (T *)dlogits, bad, ls, divisor));
    return cudaGetLastError();
}

cudaError_t fg_cu_pointwise_loss(cudaStream_t s, int type, int kind, const void *x,
                                 const float *t, size_t n, float scale, float *loss_sum,
                                 float *metric_sum, float grad_scale, void *dx,
                                 double *scratch)
{
    size_t chunk = (n + FG_CU_REDUCE_BLOCKS - 1) / FG_CU_REDUCE_BLOCKS;
    if (chunk < 2048)
        chunk = 2048;
    unsigned blocks = (unsigned)((n + chunk - 1) / chunk);
    double *loss = scratch, *metric = scratch + FG_CU_REDUCE_BLOCKS;
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(blocks, kReduceThreads, 0, s, ploss_partial_k<T>)(
                      kind, (const T *)x, t, n, chunk, grad_scale, (T *)dx, loss, metric));
    FGCU_LAUNCH(1, kReduceThreads, 0, s, sum_pair_k)(loss, metric, (int)blocks, scale, loss_sum,
                                                      metric_sum);
    return cudaGetLastError();
}

} // extern "C"
