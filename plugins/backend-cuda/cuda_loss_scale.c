/* The dynamic loss scaler on the device (ABI 1.10): loss_scale_update and
 * softmax_xent_backward_scaled, behind the checked trampolines: each enters the queue's
 * device, checks the dtype and enqueues kernels/cuda (loss_scale.cu, reduce.cu). Nothing
 * waits for the device. */
#include <assert.h>

#include "cuda_backend.h"
#include "cuda_checks.h"
#include "cuda_ops.h"

static_assert(sizeof(fg_cu_loss_scale) == sizeof(fg_loss_scale_dev),
              "kernels/cuda's loss-scaler state is laid out as the SDK's");

fg_status fg_cuda_op_loss_scale_update(void *state, void *queue, uint32_t dtype, void *x,
                                       size_t n, const fg_loss_scale_rule *rule, float *sq,
                                       fg_loss_scale_dev *scaler, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("loss_scale_update", dtype);
    fg_cuda_queue *q = queue;
    fg_cu_loss_scale_rule r = {rule->growth_factor, rule->backoff_factor, rule->min_scale,
                               rule->growth_interval, rule->hysteresis};
    return fg_cuda_launched(fg_cu_loss_scale_update(q->stream, (int)dtype, x, n, &r, sq,
                                                    (fg_cu_loss_scale *)scaler, q->scratch),
                            "loss_scale_update", err);
}

fg_status fg_cuda_op_softmax_xent_backward_scaled(void *state, void *queue,
                                                  uint32_t dlogits_dtype, const float *probs,
                                                  const int32_t *labels, int rows, int classes,
                                                  float scale, float divisor,
                                                  const fg_loss_scale_dev *scaler,
                                                  void *dlogits, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("softmax_xent_backward_scaled", dlogits_dtype);
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_xent_backward_scaled(q->stream, (int)dlogits_dtype, probs,
                                                       labels, rows, classes, scale, divisor,
                                                       (const fg_cu_loss_scale *)scaler,
                                                       dlogits, q->bad_dev),
                            "softmax_xent_backward_scaled", err);
}
