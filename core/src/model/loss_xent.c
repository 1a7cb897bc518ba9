/* Softmax cross-entropy, the model's loss: the mean over the batch of -log softmax(logits)
 * at the label. The sum and the number of correct argmax predictions stay on the device
 * until the trainer reads them. */
#include "layer.h"

fg_status fg_xent_forward(const fg_backend_vtable *be, void *bs, void *queue,
                          uint32_t logits_dtype, const void *logits, const int32_t *labels,
                          int rows, int classes, float *probs, float *loss_sum, float *correct,
                          fg_error *err)
{
    FG_BACKEND_NEED(be, softmax_xent_forward, err);
    return be->softmax_xent_forward(bs, queue, logits_dtype, logits, labels, rows, classes,
                                    probs, loss_sum, correct, err);
}

fg_status fg_xent_backward(const fg_backend_vtable *be, void *bs, void *queue,
                           uint32_t logits_dtype, const float *probs, const int32_t *labels,
                           int rows, int64_t counted, int classes, float loss_scale,
                           void *dlogits, fg_error *err)
{
    FG_BACKEND_NEED(be, softmax_xent_backward, err);
    /* d(mean loss)/d(logits) = (probs - onehot) / counted rows; ignored rows get 0 */
    return be->softmax_xent_backward(bs, queue, logits_dtype, probs, labels, rows, classes,
                                     counted ? loss_scale / (float)counted : 0.0f, dlogits,
                                     err);
}

fg_status fg_xent_backward_scaled(const fg_backend_vtable *be, void *bs, void *queue,
                                  uint32_t logits_dtype, const float *probs,
                                  const int32_t *labels, int rows, int64_t counted, int classes,
                                  float loss_scale, const fg_loss_scale_dev *scaler,
                                  void *dlogits, fg_error *err)
{
    FG_BACKEND_NEED(be, softmax_xent_backward_scaled, err);
    return be->softmax_xent_backward_scaled(bs, queue, logits_dtype, probs, labels, rows,
                                            classes, loss_scale, (float)counted, scaler,
                                            dlogits, err);
}

void fg_xent_op_needs(uint32_t logits_dtype, int training, fg_op_needs *n)
{
    FG_NEED(n, "the loss (softmax cross-entropy)", FG_OP_SOFTMAX_XENT_FORWARD, logits_dtype);
    if (training)
        FG_NEED(n, "the loss (softmax cross-entropy)", FG_OP_SOFTMAX_XENT_BACKWARD,
                logits_dtype);
}
