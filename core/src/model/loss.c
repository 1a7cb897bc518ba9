/* The model's loss: softmax cross-entropy (loss_xent.c) or a pointwise loss through the
 * backend's pointwise_loss entry. See loss.h. */
#include "loss.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"
#include "model.h"

static const char *const loss_names[] = {"softmax_cross_entropy", "mse", "bce_with_logits"};

fg_status fg_loss_read(const fg_config *cfg, fg_loss_kind *out, fg_error *err)
{
    size_t n;
    const fg_option *opts = fg_model_schema(&n);
    const char *origin = NULL;
    const char *v = fg_section_value(cfg, "model", opts, n, "loss", &origin);
    *out = FG_LOSS_KIND_XENT;
    if (!v || strcmp(v, loss_names[0]) == 0)
        return FG_OK;
    if (strcmp(v, loss_names[1]) == 0) {
        *out = FG_LOSS_KIND_MSE;
        return FG_OK;
    }
    if (strcmp(v, loss_names[2]) == 0) {
        *out = FG_LOSS_KIND_BCE_LOGITS;
        return FG_OK;
    }
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] loss = %s: not one of %s",
                        origin ? origin : "[model]", v, FG_LOSS_CHOICES);
}

fg_status fg_loss_read_ignore(const fg_config *cfg, int *enabled, int32_t *label,
                              fg_error *err)
{
    size_t n;
    const fg_option *opts = fg_model_schema(&n);
    const char *origin = NULL;
    const char *v = fg_section_value(cfg, "model", opts, n, "ignore_index", &origin);
    *enabled = 0;
    *label = 0;
    if (!v || strcmp(v, "none") == 0)
        return FG_OK;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < INT32_MIN || x > INT32_MAX)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] ignore_index = %s: not "
                            "none or a 32-bit integer label", origin ? origin : "[model]", v);
    fg_loss_kind kind;
    fg_status st = fg_loss_read(cfg, &kind, err);
    if (st != FG_OK)
        return st;
    if (kind != FG_LOSS_KIND_XENT)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] ignore_index applies to "
                            "softmax_cross_entropy, not loss = %s", origin ? origin : "[model]",
                            fg_loss_name(kind));
    *enabled = 1;
    *label = (int32_t)x;
    return FG_OK;
}

fg_status fg_loss_read_smoothing(const fg_config *cfg, fg_loss_kind kind, float *eps,
                                 fg_error *err)
{
    size_t n;
    const fg_option *opts = fg_model_schema(&n);
    double v = 0.0;
    *eps = 0.0f;
    fg_status st = fg_section_read_float(cfg, "model", opts, n, "label_smoothing", &v, err);
    if (st != FG_OK)
        return st;
    const char *origin = fg_config_origin(cfg, "model", "label_smoothing");
    if (!(v >= 0.0 && v < 1.0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] label_smoothing = %g: "
                            "must be in [0, 1) (torch.nn.CrossEntropyLoss's label_smoothing)",
                            origin ? origin : "[model]", v);
    if (v > 0.0 && kind != FG_LOSS_KIND_XENT)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] label_smoothing applies to "
                            "softmax_cross_entropy, not loss = %s", origin ? origin : "[model]",
                            fg_loss_name(kind));
    *eps = (float)v;
    return FG_OK;
}

const char *fg_loss_name(fg_loss_kind kind)
{
    return loss_names[kind == FG_LOSS_KIND_MSE ? 1 : kind == FG_LOSS_KIND_BCE_LOGITS ? 2 : 0];
}

const char *fg_loss_metric_name(fg_loss_kind kind)
{
    return kind == FG_LOSS_KIND_MSE ? "mae" : "acc";
}

fg_status fg_loss_check_labels(fg_loss_kind kind, const fg_dataset_info *info, const char *who,
                               const char *split, fg_error *err)
{
    if (kind == FG_LOSS_KIND_XENT) {
        if (info->label_elems == 1 && info->label_dtype == FG_F32)
            return fg_error_set(err, FG_INCOMPATIBLE, "[data] %s: the %s split has f32 "
                                "regression targets; they train with [model] loss = mse (or "
                                "bce_with_logits for 0/1 targets), not softmax_cross_entropy",
                                who, split);
        if (info->num_classes < 1 || info->label_elems < 1 || info->label_dtype != FG_I32)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "[data] %s: the %s split has no "
                                "labels (num_classes %d, %d label(s) of %s per sample); "
                                "classification needs i32 classes (one per sample, or one per "
                                "position of a sequence)", who, split,
                                info->num_classes, info->label_elems,
                                fg_dtype_name((fg_dtype)info->label_dtype));
        return FG_OK;
    }
    if (info->label_elems != 1 || info->label_dtype != FG_F32)
        return fg_error_set(err, FG_INCOMPATIBLE, "[data] %s: the %s split gives %d label(s) "
                            "of %s per sample; [model] loss = %s takes one f32 target per "
                            "sample (the csv plugin's regression = true)", who, split,
                            info->label_elems, fg_dtype_name((fg_dtype)info->label_dtype),
                            fg_loss_name(kind));
    return FG_OK;
}

int fg_loss_outputs(fg_loss_kind kind, int num_classes)
{
    return kind == FG_LOSS_KIND_XENT ? num_classes : 1;
}

fg_status fg_loss_forward(fg_loss_kind kind, const fg_backend_vtable *be, void *bs, void *queue,
                          uint32_t out_dtype, const void *out, const void *labels, int rows,
                          int cols, float *probs, float *loss_sum, float *metric_sum,
                          fg_error *err)
{
    if (kind == FG_LOSS_KIND_XENT)
        return fg_xent_forward(be, bs, queue, out_dtype, out, labels, rows, cols, probs,
                               loss_sum, metric_sum, err);
    FG_BACKEND_NEED(be, pointwise_loss, err);
    size_t n = (size_t)rows * (size_t)cols;
    return be->pointwise_loss(bs, queue, out_dtype, (int)kind, out, labels, n,
                              1.0f / (float)cols, loss_sum, metric_sum, 0.0f, NULL, err);
}

fg_status fg_loss_backward(fg_loss_kind kind, const fg_backend_vtable *be, void *bs, void *queue,
                           uint32_t out_dtype, const void *out, const float *probs,
                           const void *labels, int rows, int64_t counted, int cols,
                           float loss_scale, void *dout, fg_error *err)
{
    if (kind == FG_LOSS_KIND_XENT)
        return fg_xent_backward(be, bs, queue, out_dtype, probs, labels, rows, counted, cols,
                                loss_scale, dout, err);
    FG_BACKEND_NEED(be, pointwise_loss, err);
    size_t n = (size_t)rows * (size_t)cols;
    /* the mean over every output of the batch, as torch's reduction = 'mean' */
    return be->pointwise_loss(bs, queue, out_dtype, (int)kind, out, labels, n, 1.0f, NULL, NULL,
                              loss_scale / (float)n, dout, err);
}

void fg_loss_op_needs(fg_loss_kind kind, uint32_t out_dtype, int training, fg_op_needs *n)
{
    if (kind == FG_LOSS_KIND_XENT) {
        fg_xent_op_needs(out_dtype, training, n);
        return;
    }
    FG_NEED(n, kind == FG_LOSS_KIND_MSE ? "the loss (mse)" : "the loss (bce_with_logits)",
            FG_OP_POINTWISE_LOSS, out_dtype);
}
