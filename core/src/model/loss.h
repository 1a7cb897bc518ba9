/* The model's loss ([model] loss): softmax cross-entropy over class scores with i32 class
 * labels, or a pointwise loss (mse, bce_with_logits) of one output per sample against an f32
 * target. Each sums the loss and a second metric on the device: argmax hits (xent), the
 * absolute error (mse: the mean absolute error once divided by the samples), or the hits of
 * x > 0 against t > 0.5 (bce_with_logits). */
#ifndef FG_LOSS_H
#define FG_LOSS_H

#include "config.h"
#include "fulgur/backend.h"
#include "fulgur/data.h"
#include "op_needs.h"

typedef enum fg_loss_kind {
    FG_LOSS_KIND_XENT = 0,
    FG_LOSS_KIND_MSE = FG_LOSS_MSE,
    FG_LOSS_KIND_BCE_LOGITS = FG_LOSS_BCE_LOGITS
} fg_loss_kind;

#define FG_LOSS_CHOICES "softmax_cross_entropy|mse|bce_with_logits"

/* [model] loss of cfg (the default when unset). */
fg_status fg_loss_read(const fg_config *cfg, fg_loss_kind *out, fg_error *err);
/* [model] ignore_index: *enabled, and the label value the loss skips (softmax
 * cross-entropy only; the message names the key's line). */
fg_status fg_loss_read_ignore(const fg_config *cfg, int *enabled, int32_t *label,
                              fg_error *err);
/* [model] label_smoothing: eps in [0, 1) (0 when unset); above 0 only with softmax
 * cross-entropy (the message names the key's line). */
fg_status fg_loss_read_smoothing(const fg_config *cfg, fg_loss_kind kind, float *eps,
                                 fg_error *err);
const char *fg_loss_name(fg_loss_kind kind);
/* The name of the second metric: "acc" or "mae". */
const char *fg_loss_metric_name(fg_loss_kind kind);
/* Whether a split's labels fit the loss; the message names the plugin (who), the split, the
 * loss and what to change. */
fg_status fg_loss_check_labels(fg_loss_kind kind, const fg_dataset_info *info, const char *who,
                               const char *split, fg_error *err);
/* Outputs per sample of the model's last layer: num_classes for xent, 1 otherwise. */
int fg_loss_outputs(fg_loss_kind kind, int num_classes);

/* Forward over (rows, cols) outputs in out_dtype: labels are i32 classes (xent) or f32
 * targets (rows of them); probs (rows, cols) f32 the softmax kept for backward (xent
 * only); loss_sum and metric_sum accumulated (per sample: the mean over cols). */
fg_status fg_loss_forward(fg_loss_kind kind, const fg_backend_vtable *be, void *bs, void *queue,
                          uint32_t out_dtype, const void *out, const void *labels, int rows,
                          int cols, float *probs, float *loss_sum, float *metric_sum,
                          fg_error *err);
/* dout (out_dtype) = d(mean loss)/d(out) * loss_scale, from the forward's out and probs;
 * xent's mean is over the `counted` rows its labels do not ignore. */
fg_status fg_loss_backward(fg_loss_kind kind, const fg_backend_vtable *be, void *bs, void *queue,
                           uint32_t out_dtype, const void *out, const float *probs,
                           const void *labels, int rows, int64_t counted, int cols,
                           float loss_scale, void *dout, fg_error *err);
void fg_loss_op_needs(fg_loss_kind kind, uint32_t out_dtype, int training, fg_op_needs *n);

#endif
