/* Softmax cross-entropy, the model's loss: the mean over the batch of -log softmax(logits)
 * at the label. The sum and the number of correct argmax predictions stay on the device
 * until the trainer reads them. */
#include "layer.h"

fg_status fg_xent_forward(const fg_backend_vtable *be, void *bs, void *queue,
                          const float *logits, const int32_t *labels, int rows, int classes,
                          float *probs, float *loss_sum, float *correct, fg_error *err)
{
    FG_BACKEND_NEED(be, softmax_xent_forward, err);
    return be->softmax_xent_forward(bs, queue, logits, labels, rows, classes, probs, loss_sum,
                                    correct, err);
}

fg_status fg_xent_backward(const fg_backend_vtable *be, void *bs, void *queue,
                           const float *probs, const int32_t *labels, int rows, int classes,
                           float loss_scale, float *dlogits, fg_error *err)
{
    FG_BACKEND_NEED(be, softmax_xent_backward, err);
    /* d(mean loss)/d(logits) = (probs - onehot) / rows */
    return be->softmax_xent_backward(bs, queue, probs, labels, rows, classes,
                                     loss_scale / (float)rows, dlogits, err);
}

fg_status fg_xent_forward_dt(const fg_backend_vtable *be, void *bs, void *queue,
                             const fg_op_dtypes *dt, const void *logits, const int32_t *labels,
                             int rows, int classes, float *probs, float *loss_sum,
                             float *correct, fg_error *err)
{
    if (!dt)
        return fg_xent_forward(be, bs, queue, logits, labels, rows, classes, probs, loss_sum,
                               correct, err);
    FG_BACKEND_NEED(be, softmax_xent_forward_ex, err);
    return be->softmax_xent_forward_ex(bs, queue, dt, logits, labels, rows, classes, probs,
                                       loss_sum, correct, err);
}

fg_status fg_xent_backward_dt(const fg_backend_vtable *be, void *bs, void *queue,
                              const fg_op_dtypes *dt, const float *probs,
                              const int32_t *labels, int rows, int classes, float loss_scale,
                              void *dlogits, fg_error *err)
{
    if (!dt)
        return fg_xent_backward(be, bs, queue, probs, labels, rows, classes, loss_scale,
                                dlogits, err);
    FG_BACKEND_NEED(be, softmax_xent_backward_ex, err);
    return be->softmax_xent_backward_ex(bs, queue, dt, probs, labels, rows, classes,
                                        loss_scale / (float)rows, dlogits, err);
}
