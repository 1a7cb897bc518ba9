/* The dynamic loss scaler's ops (ABI 1.10) as the host path runs them: loss_scale_update
 * is the scale op by 1.0f / (float)scale (skipped at 1), sum_squares, then found_inf and the
 * scale's growth or backoff in double as precision.fp16-mixed's scaler; the scaled
 * softmax_xent_backward is softmax_xent_backward with (scale * loss scale) / divisor. The
 * queue is synchronous, so the "device" state is read and written where it lies. */
#include <float.h>
#include <math.h>

#include "cpu_backend.h"

static void scaler_step(fg_loss_scale_dev *sc, const fg_loss_scale_rule *r, int found_inf)
{
    sc->found_inf = found_inf; /* set or cleared at every step */
    if (found_inf) {
        sc->skipped_steps++;
        sc->growth_tracker = 0;
        if (sc->hysteresis_left > 1) {
            sc->hysteresis_left--;
        } else {
            double next = sc->scale * r->backoff_factor;
            sc->scale = next > r->min_scale ? next : r->min_scale;
        }
        return;
    }
    if (++sc->growth_tracker >= r->growth_interval) {
        double next = sc->scale * r->growth_factor;
        if (next <= FLT_MAX)
            sc->scale = next;
        sc->growth_tracker = 0;
        sc->hysteresis_left = r->hysteresis;
    }
}

fg_status fg_cpu_op_loss_scale_update(void *state, void *queue, uint32_t dtype, void *x,
                                      size_t n, const fg_loss_scale_rule *rule, float *sq,
                                      fg_loss_scale_dev *scaler, fg_error *err)
{
    float inv = 1.0f / (float)scaler->scale;
    fg_status st = inv != 1.0f ? fg_cpu_op_scale(state, queue, dtype, x, inv, n, err) : FG_OK;
    if (st == FG_OK) st = fg_cpu_op_sum_squares(state, queue, dtype, x, n, sq, err);
    if (st == FG_OK) scaler_step(scaler, rule, !isfinite(*sq));
    return st;
}

fg_status fg_cpu_op_softmax_xent_backward_scaled(void *state, void *queue,
                                                 uint32_t dlogits_dtype, const float *probs,
                                                 const int32_t *labels, int rows, int classes,
                                                 float scale, float divisor,
                                                 const fg_loss_scale_dev *scaler,
                                                 void *dlogits, fg_error *err)
{
    float s = divisor != 0.0f ? (scale * (float)scaler->scale) / divisor : 0.0f;
    return fg_cpu_op_softmax_xent_backward(state, queue, dlogits_dtype, probs, labels, rows,
                                           classes, s, dlogits, err);
}
