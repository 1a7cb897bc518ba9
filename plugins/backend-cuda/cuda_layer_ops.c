/* The layers' own-kernel ops, each once for every dtype: bias, activations, pooling, batch
 * norm, dropout, softmax cross-entropy and the pointwise losses, behind the checked
 * trampolines (fulgur/backend_checks.h). Labels live on the device, so a kernel flags a bad
 * one (the row's loss becomes NaN) and the next queue_sync reports it. */
#include "cuda_backend.h"
#include "cuda_checks.h"
#include "cuda_ops.h"

/* ---- bias ------------------------------------------------------------------------------ */

fg_status fg_cuda_op_bias_add(void *state, void *queue, uint32_t y_dtype, uint32_t bias_dtype,
                              void *y, const void *bias, int rows, int cols, int spatial,
                              fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("bias_add", y_dtype, bias_dtype);
    return fg_cuda_launched(fg_cu_bias_add(STREAM(queue), (int)y_dtype, (int)bias_dtype, y, bias,
                                           rows, cols, spatial),
                            "bias_add", err);
}

fg_status fg_cuda_op_bias_grad(void *state, void *queue, uint32_t dbias_dtype, uint32_t dy_dtype,
                               void *dbias, const void *dy, int rows, int cols, int spatial,
                               int accumulate, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("bias_grad", dbias_dtype, dy_dtype);
    return fg_cuda_launched(fg_cu_bias_grad(STREAM(queue), (int)dy_dtype, (int)dbias_dtype, dbias,
                                            dy, rows, cols, spatial, accumulate),
                            "bias_grad", err);
}

/* ---- activations --------------------------------------------------------------------------- */

fg_status fg_cuda_op_activation_forward(void *state, void *queue, uint32_t dtype, int act,
                                        const void *x, void *y, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("activation_forward", dtype);
    return fg_cuda_launched(fg_cu_act_forward(STREAM(queue), (int)dtype, act, x, y, n),
                            "activation_forward", err);
}

fg_status fg_cuda_op_activation_backward(void *state, void *queue, uint32_t dtype, int act,
                                         const void *x, const void *y, const void *dy,
                                         void *dx, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("activation_backward", dtype);
    return fg_cuda_launched(fg_cu_act_backward(STREAM(queue), (int)dtype, act, x, y, dy, dx,
                                               n),
                            "activation_backward", err);
}

/* ---- pooling ---------------------------------------------------------------------------------- */

/* The kernels' view of a checked window descriptor. */
static fg_cu_window fg_cuda_pool_window(const fg_conv2d_desc *d)
{
    return (fg_cu_window){ d->n, d->c, d->h, d->w, d->r, d->s, d->pad_h, d->pad_w,
                           d->stride_h, d->stride_w, d->out_h, d->out_w,
                           fg_conv2d_layout(d) == FG_LAYOUT_NHWC };
}

fg_status fg_cuda_op_pool2d_forward(void *state, void *queue, uint32_t dtype, int mode,
                                    const fg_conv2d_desc *d, const void *x, void *y,
                                    int32_t *argmax, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("pool2d_forward", dtype);
    fg_cu_window w = fg_cuda_pool_window(d);
    return fg_cuda_launched(fg_cu_pool_forward(STREAM(queue), (int)dtype,
                                               mode == FG_POOL_MAX, &w, x, y, argmax),
                            "pool2d_forward", err);
}

fg_status fg_cuda_op_pool2d_backward(void *state, void *queue, uint32_t dtype, int mode,
                                     const fg_conv2d_desc *d, const void *dy,
                                     const int32_t *argmax, void *dx, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("pool2d_backward", dtype);
    fg_cu_window w = fg_cuda_pool_window(d);
    return fg_cuda_launched(fg_cu_pool_backward(STREAM(queue), (int)dtype,
                                                mode == FG_POOL_MAX, &w, dy, argmax, dx),
                            "pool2d_backward", err);
}

/* ---- batch norm -------------------------------------------------------------------------------- */

fg_status fg_cuda_op_batchnorm_forward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, int training, int n, int c,
                                       int spatial, const void *x, const void *gamma,
                                       const void *beta, float *running_mean,
                                       float *running_var, float momentum, float eps,
                                       float *saved_mean, float *saved_invstd, void *y,
                                       fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("batchnorm_forward", x_dtype, param_dtype);
    return fg_cuda_launched(fg_cu_bn_forward(STREAM(queue), (int)x_dtype, (int)param_dtype,
                                             training, n, c, spatial, x, gamma, beta,
                                             running_mean, running_var, momentum, eps,
                                             saved_mean, saved_invstd, y),
                            "batchnorm_forward", err);
}

fg_status fg_cuda_op_batchnorm_backward(void *state, void *queue, uint32_t x_dtype,
                                        uint32_t param_dtype, uint32_t grad_dtype, int n,
                                        int c, int spatial, const void *x, const void *gamma,
                                        const float *saved_mean, const float *saved_invstd,
                                        const void *dy, void *dx, void *dgamma, void *dbeta,
                                        int accumulate, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("batchnorm_backward", x_dtype, param_dtype, grad_dtype);
    return fg_cuda_launched(fg_cu_bn_backward(STREAM(queue), (int)x_dtype, (int)param_dtype,
                                              (int)grad_dtype, n, c, spatial, x, gamma,
                                              saved_mean, saved_invstd, dy, dx, dgamma, dbeta,
                                              accumulate),
                            "batchnorm_backward", err);
}

/* ---- dropout: the CPU backend's counter-based draws (kernels/cpu/dropout.c) ------------------ */

static uint64_t fg_cuda_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t fg_cuda_dropout_key(uint64_t seed)
{
    return fg_cuda_mix64(seed ^ 0x6A09E667F3BCC909ull);
}

uint32_t fg_cuda_dropout_threshold(float p)
{
    if (p <= 0.0f)
        return 0;
    if (p >= 1.0f)
        return 1u << 24;
    return (uint32_t)((double)p * 16777216.0 + 0.5);
}

static float fg_cuda_dropout_scale(float p)
{
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

fg_status fg_cuda_op_dropout_forward(void *state, void *queue, uint32_t dtype, float p,
                                     uint64_t seed, uint64_t offset, const void *x, void *y,
                                     uint8_t *mask, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("dropout_forward", dtype);
    uint64_t key = fg_cuda_dropout_key(seed);
    return fg_cuda_launched(fg_cu_dropout_forward(STREAM(queue), (int)dtype, key, offset,
                                                  fg_cuda_dropout_threshold(p),
                                                  fg_cuda_dropout_scale(p), x, y, mask, n),
                            "dropout_forward", err);
}

fg_status fg_cuda_op_dropout_forward_dev(void *state, void *queue, uint32_t dtype, float p,
                                         uint64_t seed, uint64_t offset, uint64_t *offset_dev,
                                         uint64_t advance, const void *x, void *y,
                                         uint8_t *mask, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("dropout_forward_dev", dtype);
    uint64_t key = fg_cuda_dropout_key(seed);
    return fg_cuda_launched(fg_cu_dropout_forward_dev(STREAM(queue), (int)dtype, key, offset,
                                                      offset_dev, advance,
                                                      fg_cuda_dropout_threshold(p),
                                                      fg_cuda_dropout_scale(p), x, y, mask, n),
                            "dropout_forward_dev", err);
}

fg_status fg_cuda_op_dropout_backward(void *state, void *queue, uint32_t dtype, float p,
                                      const uint8_t *mask, const void *dy, void *dx, size_t n,
                                      fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("dropout_backward", dtype);
    return fg_cuda_launched(fg_cu_dropout_backward(STREAM(queue), (int)dtype,
                                                   fg_cuda_dropout_scale(p), mask, dy, dx, n),
                            "dropout_backward", err);
}

/* ---- softmax cross-entropy ------------------------------------------------------------------- */

fg_status fg_cuda_op_softmax_xent_forward(void *state, void *queue, uint32_t logits_dtype,
                                          const void *logits, const int32_t *labels, int rows,
                                          int classes, float *probs, float *loss_sum,
                                          float *correct, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("softmax_xent_forward", logits_dtype);
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_xent_forward(q->stream, (int)logits_dtype, logits, labels, rows,
                                               classes, probs, loss_sum, correct, q->scratch,
                                               q->bad_dev),
                            "softmax_xent_forward", err);
}

fg_status fg_cuda_op_softmax_xent_backward(void *state, void *queue, uint32_t dlogits_dtype,
                                           const float *probs, const int32_t *labels, int rows,
                                           int classes, float scale, void *dlogits,
                                           fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("softmax_xent_backward", dlogits_dtype);
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_xent_backward(q->stream, (int)dlogits_dtype, probs, labels, rows,
                                                classes, scale, dlogits, q->bad_dev),
                            "softmax_xent_backward", err);
}

fg_status fg_cuda_op_classifier(void *state, void *queue, uint32_t dtype, const void *logits,
                                int ld, const int32_t *labels, int rows, int classes,
                                float *loss_sum, float *correct, float grad_scale,
                                void *dlogits, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("classifier", dtype);
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_classifier(q->stream, (int)dtype, logits, ld, labels, rows,
                                             classes, loss_sum, correct, grad_scale, dlogits,
                                             q->scratch, q->bad_dev),
                            "classifier", err);
}

/* ---- pointwise losses (mse, bce with logits) ------------------------------------------------- */

fg_status fg_cuda_op_pointwise_loss(void *state, void *queue, uint32_t x_dtype, int kind,
                                    const void *x, const float *t, size_t n, float scale,
                                    float *loss_sum, float *metric_sum, float grad_scale,
                                    void *dx, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("pointwise_loss", x_dtype);
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_pointwise_loss(q->stream, (int)x_dtype, kind, x, t, n, scale,
                                                 loss_sum, metric_sum, grad_scale, dx,
                                                 q->scratch),
                            "pointwise_loss", err);
}
