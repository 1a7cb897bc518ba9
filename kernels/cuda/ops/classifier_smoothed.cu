/* classifier_smoothed (ABI 1.11, [model] label_smoothing) on CUDA: one warp per row, as
 * reduce.cu's classifier: the first maximum, the exponentials' sum and (eps > 0) the
 * logits' sum in f64 across the warp, the row's loss (1 - eps) * nll + eps * (lse - mean
 * logit) and hit into scratch, the gradient (p - (1 - eps) * onehot - eps / classes) *
 * factor written by the lane that read each column (dlogits may alias the logits). Rows go
 * in chunks of FG_CU_XENT_CHUNK; each chunk's sums are added in a fixed tree. The factor
 * with the fp16 scaler is read on the device. A bad label is reported as the xent's. */
#include <math.h>

#include "cuda_checks.h"
#include "cuda_ops.h"
#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kSmoothThreads = 256;
constexpr int kIgnored = -1; /* FG_IGNORED_LABEL */

struct smooth_args {
    int ld, rows, first, classes;
    float eps, on, off, grad_scale, divisor;
    const fg_loss_scale_dev *scaler;
    double *loss, *hit;
    unsigned long long *bad;
};

/* The first maximum's index over the lane's columns then the warp (a NaN at column 0
 * wins, as the CPU's scan). */
__device__ __forceinline__ void smooth_best(float &v, int &i, float ov, int oi)
{
    if (oi < 0)
        return;
    if (i < 0) {
        v = ov;
        i = oi;
        return;
    }
    bool o_first = oi < i;
    float fv = o_first ? ov : v, sv = o_first ? v : ov;
    int fi = o_first ? oi : i, si = o_first ? i : oi;
    bool nan0 = fi == 0 && fv != fv;
    v = !nan0 && sv > fv ? sv : fv;
    i = !nan0 && sv > fv ? si : fi;
}

template <typename T>
__global__ void smooth_rows_k(const T *logits, const int32_t *__restrict__ labels, T *dlogits,
                              smooth_args a)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (warp >= a.rows)
        return;
    size_t base = (size_t)warp * (size_t)a.ld;
    int label = labels[warp];
    int valid = label >= 0 && label < a.classes;
    float at_label = valid ? ld(logits, base + label) : 0.0f;
    float bv = -INFINITY;
    int bi = -1;
    double zsum = 0.0;
    for (int j = lane; j < a.classes; j += 32) {
        float v = ld(logits, base + j);
        if (j == 0 || (bi < 0 ? v > -INFINITY : v > bv)) {
            bv = v;
            bi = j;
        }
        zsum += (double)v;
    }
    for (int off = 16; off > 0; off >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        int oi = __shfl_xor_sync(0xffffffffu, bi, off);
        smooth_best(bv, bi, ov, oi);
    }
    double sum = 0.0;
    for (int j = lane; j < a.classes; j += 32)
        sum += (double)expf(ld(logits, base + j) - bv);
    sum = warp_sum(sum);
    zsum = warp_sum(zsum);
    float inv = (float)(1.0 / sum);
    float factor = a.grad_scale;
    if (a.scaler)
        factor = a.divisor != 0.0f ? (a.grad_scale * (float)a.scaler->scale) / a.divisor : 0.0f;
    __syncwarp();
    for (int j = lane; dlogits && j < a.ld; j += 32) {
        float g = 0.0f;
        if (j < a.classes && label != kIgnored) {
            float p = expf(ld(logits, base + j) - bv) * inv;
            g = !valid ? NAN : (p - (j == label ? a.on : 0.0f) - a.off) * factor;
        }
        st(dlogits, base + j, g);
    }
    if (lane != 0)
        return;
    int row = warp;
    if (label == kIgnored) {
        a.loss[row] = 0.0;
        a.hit[row] = 0.0;
    } else if (!valid) {
        *a.bad = bad_word(FG_CU_BAD_XENT, (size_t)(a.first + row), label);
        a.loss[row] = NAN;
        a.hit[row] = 0.0;
    } else {
        double lse = (double)bv + log(sum);
        double eps = (double)a.eps;
        double smooth = eps != 0.0 ? eps * (lse - zsum / (double)a.classes) : 0.0;
        a.loss[row] = (1.0 - eps) * (lse - (double)at_label) + smooth;
        a.hit[row] = bi == label ? 1.0 : 0.0;
    }
}

/* One block: the chunk's losses and hits in a fixed tree, added to the scalars (NULL:
 * skipped). */
__global__ void smooth_sums_k(const double *loss, const double *hit, int count, float *loss_sum,
                              float *correct)
{
    __shared__ double sh[kSmoothThreads];
    double l = 0.0, h = 0.0;
    for (int i = threadIdx.x; i < count; i += kSmoothThreads) {
        l += loss[i];
        h += hit[i];
    }
    double tl = block_sum<kSmoothThreads>(l, sh);
    double th = block_sum<kSmoothThreads>(h, sh);
    if (threadIdx.x == 0) {
        if (loss_sum)
            *loss_sum = (float)((double)*loss_sum + tl);
        if (correct)
            *correct = (float)((double)*correct + th);
    }
}

cudaError_t smooth_launch(cudaStream_t s, int type, const void *logits, const int32_t *labels,
                          float *loss_sum, float *correct, void *dlogits, smooth_args a,
                          int rows, double *scratch)
{
    size_t elem = type == F32 ? 4 : 2;
    for (int first = 0; first < rows; first += FG_CU_XENT_CHUNK) {
        int count = rows - first < FG_CU_XENT_CHUNK ? rows - first : FG_CU_XENT_CHUNK;
        size_t off = (size_t)first * (size_t)a.ld * elem;
        const char *lg = (const char *)logits + off;
        char *dl = dlogits ? (char *)dlogits + off : NULL;
        a.rows = count;
        a.first = first;
        a.loss = scratch;
        a.hit = scratch + FG_CU_XENT_CHUNK;
        unsigned blocks = (unsigned)((count + 7) / 8); /* 8 warps a block */
        FGCU_DISPATCH(type, T,
                      FGCU_LAUNCH(blocks, kSmoothThreads, 0, s, smooth_rows_k<T>)(
                          (const T *)lg, labels + first, (T *)dl, a));
        FGCU_LAUNCH(1, kSmoothThreads, 0, s, smooth_sums_k)(a.loss, a.hit, count, loss_sum,
                                                             correct);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

} // namespace

extern "C" fg_status fg_cuda_op_classifier_smoothed(void *state, void *queue, uint32_t dtype,
                                                    const void *logits, int ld,
                                                    const int32_t *labels, int rows,
                                                    int classes, float smoothing,
                                                    float *loss_sum, float *correct,
                                                    float grad_scale, float divisor,
                                                    const fg_loss_scale_dev *scaler,
                                                    void *dlogits, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("classifier_smoothed", dtype);
    fg_cuda_queue *q = (fg_cuda_queue *)queue;
    smooth_args a = {};
    a.ld = ld;
    a.classes = classes;
    a.eps = smoothing;
    a.on = 1.0f - smoothing;
    a.off = smoothing / (float)classes;
    a.grad_scale = grad_scale;
    a.divisor = divisor;
    a.scaler = scaler;
    a.bad = q->bad_dev;
    return fg_cuda_launched(smooth_launch(q->stream, (int)dtype, logits, labels, loss_sum,
                                          correct, dlogits, a, rows, q->scratch),
                            "classifier_smoothed", err);
}
