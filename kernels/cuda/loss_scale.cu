/* The dynamic loss scaler's step on the device (ABI 1.10, loss_scale_update): the
 * gradients unscaled by 1 / scale as scale_k would (elementwise.cu), their sum of squares
 * (reduce.cu's sum_squares), then found_inf and the scale's growth or backoff in one thread,
 * in double as precision.fp16-mixed's host scaler (plugins/precision-fp16-mixed/scaler.c). */
#include <float.h>
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

/* x *= 1.0f / (float)scale, the scale read where the previous update left it. */
template <typename T> __global__ void unscale_k(T *x, size_t n, const fg_cu_loss_scale *sc)
{
    float inv = 1.0f / (float)sc->scale;
    if (inv == 1.0f)
        return; /* the host path skips the scale op at factor 1 */
    FGCU_FOR(i, n) { st(x, i, ld(x, i) * inv); }
}

__global__ void update_k(const float *sq, fg_cu_loss_scale_rule r, fg_cu_loss_scale *sc)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    sc->found_inf = isfinite(*sq) ? 0 : 1; /* set or cleared at every step */
    if (sc->found_inf) {
        sc->skipped_steps++;
        sc->growth_tracker = 0;
        if (sc->hysteresis_left > 1) {
            sc->hysteresis_left--;
        } else {
            double next = sc->scale * r.backoff_factor;
            sc->scale = next > r.min_scale ? next : r.min_scale;
        }
        return;
    }
    if (++sc->growth_tracker >= r.growth_interval) {
        double next = sc->scale * r.growth_factor;
        if (next <= FLT_MAX)
            sc->scale = next;
        sc->growth_tracker = 0;
        sc->hysteresis_left = r.hysteresis;
    }
}

} // namespace

cudaError_t fg_cu_loss_scale_update(cudaStream_t s, int type, void *x, size_t n,
                                    const fg_cu_loss_scale_rule *rule, float *sq,
                                    fg_cu_loss_scale *scaler, double *scratch)
{
    if (n > 0)
        FGCU_DISPATCH(type, T, FGCU_LAUNCH(grid_for(n), kThreads, 0, s, unscale_k<T>)(
                                   (T *)x, n, scaler));
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = fg_cu_sum_squares(s, type, x, n, sq, scratch);
    if (e != cudaSuccess)
        return e;
    FGCU_LAUNCH(1, 1, 0, s, update_k)(sq, *rule, scaler);
    return cudaGetLastError();
}
