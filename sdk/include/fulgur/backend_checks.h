/* The argument checks of every backend op, written once: shapes, descriptors, scalar ranges
 * and NULL pointers, everything a backend can check without reading device memory. A
 * backend gets them by pointing its vtable at checked trampolines:
 *
 *     #define FG_BACKEND_CHECK_WHO "backend.mine"   (the prefix of every message)
 *     FG_BACKEND_OP_PROTOTYPES(my_op_)              (its maths: my_op_gemm, ...)
 *     FG_BACKEND_CHECKED_OPS(my_op_)                (static my_op_checked_gemm, ...)
 *     static const fg_backend_vtable vt = { ..., FG_BACKEND_OP_INIT_CHECKED(my_op_) ... };
 *
 * A trampoline runs the op's check, then the maths only for a valid call with work to do: a
 * check may answer "valid, nothing to do" (a zero-sized call), and the maths never sees a
 * call that failed its check. What only the data can tell (a label outside [0, classes), an
 * embedding id outside the table) and which dtypes the backend stores stay the backend's.
 * A failure is FG_INVALID_ARGUMENT with "WHO: OP: what is wrong". */
#ifndef FULGUR_BACKEND_CHECKS_H
#define FULGUR_BACKEND_CHECKS_H

#include <stdint.h>

#include "fulgur/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif

/* A check's signature: the op's arguments without state; *skip = 1: valid, nothing to do. */
#define FG_OP_CHECK(entry)                                                                  \
    static inline fg_status fg_check_##entry(const char *who, int *skip,                    \
                                             void *queue FG_OP_SIG_##entry(FG_OP_DECL_),    \
                                             fg_error *err)

#define FG_CHECK_(cond, op, ...)                                                            \
    do {                                                                                    \
        if (!(cond))                                                                        \
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: %s: " __VA_ARGS__);          \
    } while (0)
/* The arguments of FG_CHECK_'s message start with who and op. */
#define FG_CHECK_MSG_(op) who, op
#define FG_CHECK_NOT_NULL_(op, ptr)                                                         \
    FG_CHECK_((ptr) != NULL, op, "%s is NULL", FG_CHECK_MSG_(op), #ptr)
/* Ops belong to a device through their queue. */
#define FG_CHECK_QUEUE_(op) FG_CHECK_NOT_NULL_(op, queue)

static inline fg_status fg_check_gemm_shape_(const char *who, const char *op, int trans_a,
                                             int trans_b, int m, int n, int k, const void *a,
                                             int lda, const void *b, int ldb, const void *c,
                                             int ldc, int *skip, fg_error *err)
{
    FG_CHECK_(m >= 0 && n >= 0 && k >= 0, op, "m = %d, n = %d, k = %d must be >= 0",
              FG_CHECK_MSG_(op), m, n, k);
    int a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
    FG_CHECK_(lda >= (a_cols > 1 ? a_cols : 1), op, "lda = %d is smaller than the %d columns of A",
              FG_CHECK_MSG_(op), lda, a_cols);
    FG_CHECK_(ldb >= (b_cols > 1 ? b_cols : 1), op, "ldb = %d is smaller than the %d columns of B",
              FG_CHECK_MSG_(op), ldb, b_cols);
    FG_CHECK_(ldc >= (n > 1 ? n : 1), op, "ldc = %d is smaller than n = %d", FG_CHECK_MSG_(op),
              ldc, n);
    if (m == 0 || n == 0) {
        *skip = 1;
        return FG_OK;
    }
    FG_CHECK_NOT_NULL_(op, c);
    if (k > 0) {
        FG_CHECK_NOT_NULL_(op, a);
        FG_CHECK_NOT_NULL_(op, b);
    }
    return FG_OK;
}

FG_OP_CHECK(gemm)
{
    FG_CHECK_QUEUE_("gemm");
    return fg_check_gemm_shape_(who, "gemm", trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
                                skip, err);
}

FG_OP_CHECK(gemm_bias)
{
    FG_CHECK_QUEUE_("gemm_bias");
    return fg_check_gemm_shape_(who, "gemm_bias", trans_a, trans_b, m, n, k, a, lda, b, ldb, c,
                                ldc, skip, err);
}

FG_OP_CHECK(gemm_epilogue)
{
    FG_CHECK_QUEUE_("gemm_epilogue");
    FG_CHECK_(epilogue >= FG_EPI_BIAS && epilogue <= FG_EPI_BGRADB, "gemm_epilogue",
              "unknown epilogue %d (bias 1, gelu_aux_bias 2, dgelu_bgrad 3, bgradb 4)",
              FG_CHECK_MSG_("gemm_epilogue"), epilogue);
    int forward = epilogue == FG_EPI_BIAS || epilogue == FG_EPI_GELU_AUX_BIAS;
    FG_CHECK_(!forward || !accumulate, "gemm_epilogue",
              "accumulate = %d with a forward epilogue (%d): C is written, not added to",
              FG_CHECK_MSG_("gemm_epilogue"), accumulate, epilogue);
    fg_status st = fg_check_gemm_shape_(who, "gemm_epilogue", trans_a, trans_b, m, n, k, a, lda,
                                        b, ldb, c, ldc, skip, err);
    if (st != FG_OK || *skip)
        return st;
    FG_CHECK_NOT_NULL_("gemm_epilogue", bias);
    if (epilogue == FG_EPI_GELU_AUX_BIAS || epilogue == FG_EPI_DGELU_BGRAD) {
        FG_CHECK_NOT_NULL_("gemm_epilogue", aux);
        FG_CHECK_(ldaux >= n, "gemm_epilogue", "ldaux = %d is smaller than n = %d",
                  FG_CHECK_MSG_("gemm_epilogue"), ldaux, n);
    }
    return FG_OK;
}

FG_OP_CHECK(bias_add)
{
    FG_CHECK_QUEUE_("bias_add");
    FG_CHECK_(rows >= 0 && cols >= 0 && spatial >= 0, "bias_add",
              "rows = %d, cols = %d, spatial = %d must be >= 0", FG_CHECK_MSG_("bias_add"), rows,
              cols, spatial);
    if ((size_t)rows * (size_t)cols * (size_t)spatial == 0) {
        *skip = 1;
        return FG_OK;
    }
    FG_CHECK_NOT_NULL_("bias_add", y);
    FG_CHECK_NOT_NULL_("bias_add", bias);
    return FG_OK;
}

FG_OP_CHECK(bias_grad)
{
    FG_CHECK_QUEUE_("bias_grad");
    FG_CHECK_(rows >= 0 && cols >= 0 && spatial >= 0, "bias_grad",
              "rows = %d, cols = %d, spatial = %d must be >= 0", FG_CHECK_MSG_("bias_grad"), rows,
              cols, spatial);
    if (cols == 0) {
        *skip = 1;
        return FG_OK;
    }
    FG_CHECK_NOT_NULL_("bias_grad", dbias);
    if ((size_t)rows * (size_t)spatial > 0)
        FG_CHECK_NOT_NULL_("bias_grad", dy);
    return FG_OK; /* no rows: dbias still becomes 0 (or stays, accumulating) */
}

static inline fg_status fg_check_act_(const char *who, const char *op, int act, fg_error *err)
{
    FG_CHECK_(act >= FG_ACT_NONE && act <= FG_ACT_SIGMOID, op,
              "unknown activation %d (none 0, relu 1, gelu 2, tanh 3, sigmoid 4)",
              FG_CHECK_MSG_(op), act);
    return FG_OK;
}

FG_OP_CHECK(activation_forward)
{
    FG_CHECK_QUEUE_("activation_forward");
    fg_status st = fg_check_act_(who, "activation_forward", act, err);
    if (st != FG_OK || n == 0) {
        *skip = 1;
        return st;
    }
    FG_CHECK_NOT_NULL_("activation_forward", x);
    FG_CHECK_NOT_NULL_("activation_forward", y);
    return FG_OK;
}

FG_OP_CHECK(activation_backward)
{
    FG_CHECK_QUEUE_("activation_backward");
    fg_status st = fg_check_act_(who, "activation_backward", act, err);
    if (st != FG_OK || n == 0) {
        *skip = 1;
        return st;
    }
    FG_CHECK_NOT_NULL_("activation_backward", dy);
    FG_CHECK_NOT_NULL_("activation_backward", dx);
    if (act == FG_ACT_RELU || act == FG_ACT_GELU)
        FG_CHECK_NOT_NULL_("activation_backward", x);
    if (act == FG_ACT_TANH || act == FG_ACT_SIGMOID)
        FG_CHECK_NOT_NULL_("activation_backward", y);
    return FG_OK;
}

/* ---- windows: conv and pooling ---------------------------------------------------------- */

/* A window descriptor (a convolution's when need_k) whose out_h and out_w the window gives. */
static inline fg_status fg_check_window(const char *who, const char *op, const fg_conv2d_desc *d,
                                        int need_k, fg_error *err)
{
    FG_CHECK_(d != NULL, op, "descriptor is NULL", FG_CHECK_MSG_(op));
    FG_CHECK_(d->struct_size >= offsetof(fg_conv2d_desc, out_w) + sizeof d->out_w, op,
              "descriptor struct_size %u is smaller than fg_conv2d_desc v1.0", FG_CHECK_MSG_(op),
              (unsigned)d->struct_size);
    FG_CHECK_(d->n >= 1 && d->c >= 1 && d->h >= 1 && d->w >= 1, op,
              "input n = %d, c = %d, h = %d, w = %d must all be >= 1", FG_CHECK_MSG_(op), d->n,
              d->c, d->h, d->w);
    FG_CHECK_(!need_k || d->k >= 1, op, "output channels k = %d must be >= 1", FG_CHECK_MSG_(op),
              d->k);
    FG_CHECK_(d->r >= 1 && d->s >= 1, op, "window r = %d, s = %d must be >= 1", FG_CHECK_MSG_(op),
              d->r, d->s);
    FG_CHECK_(d->stride_h >= 1 && d->stride_w >= 1, op,
              "stride_h = %d, stride_w = %d must be >= 1", FG_CHECK_MSG_(op), d->stride_h,
              d->stride_w);
    FG_CHECK_(d->pad_h >= 0 && d->pad_w >= 0, op, "pad_h = %d, pad_w = %d must be >= 0",
              FG_CHECK_MSG_(op), d->pad_h, d->pad_w);
    FG_CHECK_(fg_conv2d_layout(d) == FG_LAYOUT_NCHW || fg_conv2d_layout(d) == FG_LAYOUT_NHWC,
              op, "layout = %d is neither FG_LAYOUT_NCHW (0) nor FG_LAYOUT_NHWC (1)",
              FG_CHECK_MSG_(op), (int)fg_conv2d_layout(d));
    int eh = d->h + 2 * d->pad_h - d->r, ew = d->w + 2 * d->pad_w - d->s;
    FG_CHECK_(eh >= 0 && ew >= 0, op, "window %dx%d is larger than the padded input %dx%d",
              FG_CHECK_MSG_(op), d->r, d->s, d->h + 2 * d->pad_h, d->w + 2 * d->pad_w);
    int oh = eh / d->stride_h + 1, ow = ew / d->stride_w + 1;
    FG_CHECK_(d->out_h == oh && d->out_w == ow, op, "out_h = %d, out_w = %d, but the window gives %dx%d",
              FG_CHECK_MSG_(op), d->out_h, d->out_w, oh, ow);
    return FG_OK;
}

FG_OP_CHECK(conv2d_forward)
{
    FG_CHECK_QUEUE_("conv2d_forward");
    fg_status st = fg_check_window(who, "conv2d_forward", d, 1, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_("conv2d_forward", x);
    FG_CHECK_NOT_NULL_("conv2d_forward", w);
    FG_CHECK_NOT_NULL_("conv2d_forward", y);
    FG_CHECK_NOT_NULL_("conv2d_forward", workspace);
    return FG_OK;
}

FG_OP_CHECK(conv2d_backward)
{
    FG_CHECK_QUEUE_("conv2d_backward");
    fg_status st = fg_check_window(who, "conv2d_backward", d, 1, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_("conv2d_backward", dy);
    FG_CHECK_NOT_NULL_("conv2d_backward", workspace);
    if (dw)
        FG_CHECK_NOT_NULL_("conv2d_backward", x);
    if (dx)
        FG_CHECK_NOT_NULL_("conv2d_backward", w);
    return FG_OK;
}

static inline fg_status fg_check_pool_(const char *who, const char *op, int mode,
                                       const fg_conv2d_desc *d, const int32_t *argmax,
                                       fg_error *err)
{
    FG_CHECK_(mode == FG_POOL_MAX || mode == FG_POOL_AVG, op, "unknown mode %d (max 1, avg 2)",
              FG_CHECK_MSG_(op), mode);
    FG_CHECK_(mode != FG_POOL_MAX || argmax != NULL, op, "max pooling needs the argmax buffer",
              FG_CHECK_MSG_(op));
    return fg_check_window(who, op, d, 0, err);
}

FG_OP_CHECK(pool2d_forward)
{
    FG_CHECK_QUEUE_("pool2d_forward");
    fg_status st = fg_check_pool_(who, "pool2d_forward", mode, d, argmax, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_("pool2d_forward", x);
    FG_CHECK_NOT_NULL_("pool2d_forward", y);
    return FG_OK;
}

FG_OP_CHECK(pool2d_backward)
{
    FG_CHECK_QUEUE_("pool2d_backward");
    fg_status st = fg_check_pool_(who, "pool2d_backward", mode, d, argmax, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_("pool2d_backward", dy);
    FG_CHECK_NOT_NULL_("pool2d_backward", dx);
    return FG_OK;
}

/* ---- batch norm, dropout, losses ---------------------------------------------------------- */

FG_OP_CHECK(batchnorm_forward)
{
    const char *op = "batchnorm_forward";
    FG_CHECK_QUEUE_(op);
    FG_CHECK_(n >= 1 && c >= 1 && spatial >= 1, op, "n = %d, c = %d, spatial = %d must be >= 1",
              FG_CHECK_MSG_(op), n, c, spatial);
    FG_CHECK_(eps >= 0.0f, op, "eps = %g must be >= 0", FG_CHECK_MSG_(op), (double)eps);
    FG_CHECK_NOT_NULL_(op, x);
    FG_CHECK_NOT_NULL_(op, y);
    if (training) {
        FG_CHECK_((size_t)n * (size_t)spatial > 1, op,
                  "training needs more than 1 value per channel (n = %d, spatial = %d)",
                  FG_CHECK_MSG_(op), n, spatial);
        FG_CHECK_NOT_NULL_(op, saved_mean);
        FG_CHECK_NOT_NULL_(op, saved_invstd);
        FG_CHECK_((running_mean == NULL) == (running_var == NULL), op,
                  "running_mean and running_var must both be given or both be NULL",
                  FG_CHECK_MSG_(op));
    } else {
        FG_CHECK_NOT_NULL_(op, running_mean);
        FG_CHECK_NOT_NULL_(op, running_var);
    }
    return FG_OK;
}

FG_OP_CHECK(batchnorm_backward)
{
    const char *op = "batchnorm_backward";
    FG_CHECK_QUEUE_(op);
    FG_CHECK_(n >= 1 && c >= 1 && spatial >= 1, op, "n = %d, c = %d, spatial = %d must be >= 1",
              FG_CHECK_MSG_(op), n, c, spatial);
    FG_CHECK_NOT_NULL_(op, x);
    FG_CHECK_NOT_NULL_(op, saved_mean);
    FG_CHECK_NOT_NULL_(op, saved_invstd);
    FG_CHECK_NOT_NULL_(op, dy);
    return FG_OK;
}

static inline fg_status fg_check_p_(const char *who, const char *op, float p, fg_error *err)
{
    FG_CHECK_(p >= 0.0f && p <= 1.0f, op, "p = %g is outside [0, 1]", FG_CHECK_MSG_(op),
              (double)p);
    return FG_OK;
}

static inline fg_status fg_check_dropout_forward_(const char *who, const char *op, void *queue,
                                                  float p, const void *x, void *y,
                                                  uint8_t *mask, size_t n, int *skip,
                                                  fg_error *err)
{
    FG_CHECK_QUEUE_(op);
    fg_status st = fg_check_p_(who, op, p, err);
    if (st != FG_OK || n == 0) {
        *skip = 1;
        return st;
    }
    FG_CHECK_NOT_NULL_(op, x);
    FG_CHECK_NOT_NULL_(op, y);
    FG_CHECK_NOT_NULL_(op, mask);
    return FG_OK;
}

FG_OP_CHECK(dropout_forward)
{
    (void)seed;
    (void)offset;
    return fg_check_dropout_forward_(who, "dropout_forward", queue, p, x, y, mask, n, skip, err);
}

/* n == 0 skips the op, the advance included: a caller's step never draws nothing. */
FG_OP_CHECK(dropout_forward_dev)
{
    (void)seed;
    (void)offset;
    (void)advance;
    fg_status st = fg_check_dropout_forward_(who, "dropout_forward_dev", queue, p, x, y, mask, n,
                                             skip, err);
    if (st != FG_OK || *skip)
        return st;
    FG_CHECK_NOT_NULL_("dropout_forward_dev", offset_dev);
    FG_CHECK_((uintptr_t)offset_dev % sizeof *offset_dev == 0, "dropout_forward_dev",
              "offset_dev %p is not 8-byte aligned", FG_CHECK_MSG_("dropout_forward_dev"),
              (void *)offset_dev);
    return FG_OK;
}

FG_OP_CHECK(dropout_backward)
{
    FG_CHECK_QUEUE_("dropout_backward");
    fg_status st = fg_check_p_(who, "dropout_backward", p, err);
    if (st != FG_OK || n == 0) {
        *skip = 1;
        return st;
    }
    FG_CHECK_NOT_NULL_("dropout_backward", mask);
    FG_CHECK_NOT_NULL_("dropout_backward", dy);
    FG_CHECK_NOT_NULL_("dropout_backward", dx);
    return FG_OK;
}

/* rows and classes of softmax_xent_*; whether each label lies in [0, classes) is the
 * backend's to check (it reads the labels). */
static inline fg_status fg_check_xent_rows_(const char *who, const char *op, int rows,
                                            int classes, const int32_t *labels, int *skip,
                                            fg_error *err)
{
    FG_CHECK_(rows >= 0 && classes >= 1, op, "rows = %d must be >= 0, classes = %d >= 1",
              FG_CHECK_MSG_(op), rows, classes);
    if (rows == 0) {
        *skip = 1;
        return FG_OK;
    }
    FG_CHECK_NOT_NULL_(op, labels);
    return FG_OK;
}

FG_OP_CHECK(softmax_xent_forward)
{
    FG_CHECK_QUEUE_("softmax_xent_forward");
    fg_status st = fg_check_xent_rows_(who, "softmax_xent_forward", rows, classes, labels, skip,
                                       err);
    if (st != FG_OK || *skip)
        return st;
    FG_CHECK_NOT_NULL_("softmax_xent_forward", logits);
    FG_CHECK_NOT_NULL_("softmax_xent_forward", probs);
    return FG_OK;
}

FG_OP_CHECK(softmax_xent_backward)
{
    FG_CHECK_QUEUE_("softmax_xent_backward");
    fg_status st = fg_check_xent_rows_(who, "softmax_xent_backward", rows, classes, labels, skip,
                                       err);
    if (st != FG_OK || *skip)
        return st;
    FG_CHECK_NOT_NULL_("softmax_xent_backward", probs);
    FG_CHECK_NOT_NULL_("softmax_xent_backward", dlogits);
    return FG_OK;
}

FG_OP_CHECK(softmax_xent_backward_scaled)
{
    const char *op = "softmax_xent_backward_scaled";
    FG_CHECK_QUEUE_(op);
    fg_status st = fg_check_xent_rows_(who, op, rows, classes, labels, skip, err);
    if (st != FG_OK || *skip)
        return st;
    FG_CHECK_NOT_NULL_(op, probs);
    FG_CHECK_NOT_NULL_(op, scaler);
    FG_CHECK_NOT_NULL_(op, dlogits);
    FG_CHECK_(divisor >= 0.0f, op, "divisor = %g must be >= 0", FG_CHECK_MSG_(op),
              (double)divisor);
    return FG_OK;
}

FG_OP_CHECK(classifier_smoothed)
{
    const char *op = "classifier_smoothed";
    FG_CHECK_QUEUE_(op);
    FG_CHECK_(smoothing >= 0.0f && smoothing < 1.0f, op, "smoothing = %g is outside [0, 1)",
              FG_CHECK_MSG_(op), (double)smoothing);
    FG_CHECK_(divisor >= 0.0f, op, "divisor = %g must be >= 0", FG_CHECK_MSG_(op),
              (double)divisor);
    fg_status st = fg_check_xent_rows_(who, op, rows, classes, labels, skip, err);
    if (st != FG_OK || *skip)
        return st;
    FG_CHECK_(ld >= classes, op, "ld = %d is smaller than classes = %d", FG_CHECK_MSG_(op), ld,
              classes);
    FG_CHECK_NOT_NULL_(op, logits);
    return FG_OK;
}

FG_OP_CHECK(classifier)
{
    FG_CHECK_QUEUE_("classifier");
    fg_status st = fg_check_xent_rows_(who, "classifier", rows, classes, labels, skip, err);
    if (st != FG_OK || *skip)
        return st;
    FG_CHECK_(ld >= classes, "classifier", "ld = %d is smaller than classes = %d",
              FG_CHECK_MSG_("classifier"), ld, classes);
    FG_CHECK_NOT_NULL_("classifier", logits);
    return FG_OK;
}

FG_OP_CHECK(pointwise_loss)
{
    FG_CHECK_QUEUE_("pointwise_loss");
    FG_CHECK_(kind == FG_LOSS_MSE || kind == FG_LOSS_BCE_LOGITS, "pointwise_loss",
              "unknown loss kind %d", FG_CHECK_MSG_("pointwise_loss"), kind);
    if (n == 0) {
        *skip = 1;
        return FG_OK;
    }
    FG_CHECK_NOT_NULL_("pointwise_loss", x);
    FG_CHECK_NOT_NULL_("pointwise_loss", t);
    return FG_OK;
}

/* ---- flat buffers: elementwise, reductions, optimizer updates ------------------------- */

/* A flat op of n elements: n == 0 is done; otherwise ptr must be there. */
#define FG_CHECK_FLAT_(op, ptr)                                                             \
    do {                                                                                    \
        FG_CHECK_QUEUE_(op);                                                                \
        if (n == 0) {                                                                       \
            *skip = 1;                                                                      \
            return FG_OK;                                                                   \
        }                                                                                   \
        FG_CHECK_NOT_NULL_(op, ptr);                                                        \
    } while (0)

FG_OP_CHECK(fill)
{
    FG_CHECK_FLAT_("fill", x);
    return FG_OK;
}

FG_OP_CHECK(scale)
{
    FG_CHECK_FLAT_("scale", x);
    return FG_OK;
}

FG_OP_CHECK(axpy)
{
    FG_CHECK_FLAT_("axpy", x);
    FG_CHECK_NOT_NULL_("axpy", y);
    return FG_OK;
}

FG_OP_CHECK(clamp)
{
    FG_CHECK_FLAT_("clamp", x);
    return FG_OK;
}

FG_OP_CHECK(cast)
{
    FG_CHECK_FLAT_("cast", dst);
    FG_CHECK_NOT_NULL_("cast", src);
    return FG_OK;
}

FG_OP_CHECK(sum_squares)
{
    FG_CHECK_QUEUE_("sum_squares");
    FG_CHECK_NOT_NULL_("sum_squares", out);
    if (n > 0)
        FG_CHECK_NOT_NULL_("sum_squares", x);
    return FG_OK; /* n == 0 still writes 0 */
}

/* sgd_update's and sgd_fused's arguments (op names the caller). */
static inline fg_status fg_check_sgd_(const char *who, const char *op, int *skip, void *queue,
                                      const fg_sgd_args *a, void *param, const void *grad,
                                      float *momentum_buf, size_t n, fg_error *err)
{
    FG_CHECK_QUEUE_(op);
    FG_CHECK_(a != NULL && a->struct_size >= offsetof(fg_sgd_args, first_step) +
                                                  sizeof a->first_step,
              op, "args are NULL or older than fg_sgd_args v1.0", FG_CHECK_MSG_(op));
    FG_CHECK_(!a->nesterov || (a->momentum > 0.0f && a->dampening == 0.0f), op,
              "nesterov needs momentum > 0 and dampening = 0 (momentum = %g, dampening = %g)",
              FG_CHECK_MSG_(op), (double)a->momentum, (double)a->dampening);
    FG_CHECK_FLAT_(op, param);
    FG_CHECK_NOT_NULL_(op, grad);
    if (a->momentum != 0.0f)
        FG_CHECK_NOT_NULL_(op, momentum_buf);
    return FG_OK;
}

FG_OP_CHECK(sgd_update)
{
    FG_CHECK_(!a || !FG_HAS_FIELD(a, fg_sgd_args, skip_dev) || !a->skip_dev, "sgd_update",
              "skip_dev is read by sgd_fused only", FG_CHECK_MSG_("sgd_update"));
    return fg_check_sgd_(who, "sgd_update", skip, queue, a, param, grad, momentum_buf, n, err);
}

/* adamw_update's and adamw_fused's arguments (op names the caller). */
static inline fg_status fg_check_adamw_(const char *who, const char *op, int *skip,
                                        void *queue, const fg_adamw_args *a, void *param,
                                        const void *grad, float *m, float *v, size_t n,
                                        fg_error *err)
{
    FG_CHECK_QUEUE_(op);
    FG_CHECK_(a != NULL && a->struct_size >= offsetof(fg_adamw_args, step) + sizeof a->step, op,
              "args are NULL or older than fg_adamw_args v1.0", FG_CHECK_MSG_(op));
    FG_CHECK_(a->step >= 1, op, "step = %lld must be >= 1 (1-based)", FG_CHECK_MSG_(op),
              (long long)a->step);
    FG_CHECK_(a->beta1 >= 0.0f && a->beta1 < 1.0f && a->beta2 >= 0.0f && a->beta2 < 1.0f, op,
              "beta1 = %g, beta2 = %g must lie in [0, 1)", FG_CHECK_MSG_(op), (double)a->beta1,
              (double)a->beta2);
    FG_CHECK_FLAT_(op, param);
    FG_CHECK_NOT_NULL_(op, grad);
    FG_CHECK_NOT_NULL_(op, m);
    FG_CHECK_NOT_NULL_(op, v);
    return FG_OK;
}

FG_OP_CHECK(adamw_update)
{
    FG_CHECK_(!a || !FG_HAS_FIELD(a, fg_adamw_args, skip_dev) || !a->skip_dev, "adamw_update",
              "skip_dev is read by adamw_fused only", FG_CHECK_MSG_("adamw_update"));
    return fg_check_adamw_(who, "adamw_update", skip, queue, a, param, grad, m, v, n, err);
}

FG_OP_CHECK(grad_clip_coef)
{
    const char *op = "grad_clip_coef";
    FG_CHECK_QUEUE_(op);
    FG_CHECK_NOT_NULL_(op, sq);
    FG_CHECK_NOT_NULL_(op, coef);
    FG_CHECK_(max_norm > 0.0, op, "max_norm = %g must be > 0", FG_CHECK_MSG_(op), max_norm);
    if (n > 0)
        FG_CHECK_NOT_NULL_(op, x);
    return FG_OK; /* n == 0 still writes *sq = 0 and *coef */
}

/* grad_scale and work may be NULL. */
FG_OP_CHECK(sgd_fused)
{
    return fg_check_sgd_(who, "sgd_fused", skip, queue, a, param, grad, momentum_buf, n, err);
}

FG_OP_CHECK(adamw_fused)
{
    return fg_check_adamw_(who, "adamw_fused", skip, queue, a, param, grad, m, v, n, err);
}

/* ---- transformer ops ----------------------------------------------------------------------- */

static inline fg_status fg_check_norm_(const char *who, const char *op, int rms, int rows,
                                       int cols, const void *x, const float *mean,
                                       const float *rstd, fg_error *err)
{
    FG_CHECK_(rows >= 1 && cols >= 1, op, "rows = %d, cols = %d must be >= 1", FG_CHECK_MSG_(op),
              rows, cols);
    FG_CHECK_NOT_NULL_(op, x);
    FG_CHECK_NOT_NULL_(op, rstd);
    FG_CHECK_(rms || mean, op, "mean is NULL (needed unless rms)", FG_CHECK_MSG_(op));
    return FG_OK;
}

FG_OP_CHECK(layernorm_forward)
{
    FG_CHECK_QUEUE_("layernorm_forward");
    fg_status st = fg_check_norm_(who, "layernorm_forward", rms, rows, cols, x, mean, rstd, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_("layernorm_forward", y);
    FG_CHECK_(eps >= 0.0f, "layernorm_forward", "eps = %g must be >= 0",
              FG_CHECK_MSG_("layernorm_forward"), (double)eps);
    return FG_OK;
}

FG_OP_CHECK(layernorm_backward)
{
    FG_CHECK_QUEUE_("layernorm_backward");
    fg_status st = fg_check_norm_(who, "layernorm_backward", rms, rows, cols, x, mean, rstd, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_("layernorm_backward", dy);
    return FG_OK;
}

FG_OP_CHECK(layernorm_residual_forward)
{
    const char *op = "layernorm_residual_forward";
    FG_CHECK_QUEUE_(op);
    fg_status st = fg_check_norm_(who, op, rms, rows, cols, b, mean, rstd, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_(op, a);
    FG_CHECK_NOT_NULL_(op, r);
    FG_CHECK_NOT_NULL_(op, y);
    FG_CHECK_(eps >= 0.0f, op, "eps = %g must be >= 0", FG_CHECK_MSG_(op), (double)eps);
    return FG_OK;
}

FG_OP_CHECK(layernorm_residual_backward)
{
    const char *op = "layernorm_residual_backward";
    FG_CHECK_QUEUE_(op);
    fg_status st = fg_check_norm_(who, op, rms, rows, cols, x, mean, rstd, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_(op, dy);
    FG_CHECK_(!dx || dres, op, "dres is NULL (needed with dx)", FG_CHECK_MSG_(op));
    FG_CHECK_(!dx || dx != dres, op, "dx and dres are the same buffer", FG_CHECK_MSG_(op));
    return FG_OK;
}

/* n positions of dim values each, ids into a table of `rows` rows; the ids' values are the
 * backend's to check (it reads them). */
static inline fg_status fg_check_embedding_(const char *who, const char *op, const int32_t *ids,
                                            int n, int dim, int rows, fg_error *err)
{
    FG_CHECK_(n >= 0 && dim >= 1 && rows >= 1, op, "n = %d must be >= 0, dim = %d and rows = %d >= 1",
              FG_CHECK_MSG_(op), n, dim, rows);
    FG_CHECK_(n == 0 || ids, op, "ids is NULL", FG_CHECK_MSG_(op));
    return FG_OK;
}

FG_OP_CHECK(embedding_forward)
{
    FG_CHECK_QUEUE_("embedding_forward");
    fg_status st = fg_check_embedding_(who, "embedding_forward", ids, n, dim, rows, err);
    if (st != FG_OK || n == 0) {
        *skip = 1;
        return st;
    }
    FG_CHECK_NOT_NULL_("embedding_forward", table);
    FG_CHECK_NOT_NULL_("embedding_forward", out);
    return FG_OK;
}

FG_OP_CHECK(embedding_backward)
{
    FG_CHECK_QUEUE_("embedding_backward");
    fg_status st = fg_check_embedding_(who, "embedding_backward", ids, n, dim, rows, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_("embedding_backward", dtable);
    FG_CHECK_(n == 0 || dout, "embedding_backward", "dout is NULL",
              FG_CHECK_MSG_("embedding_backward"));
    return FG_OK; /* n == 0 still clears dtable (or leaves it, accumulating) */
}

/* An attention descriptor every backend accepts: sizes >= 1, dropout in [0, 1), and a qkv
 * tensor of fewer than 2^31 elements. A backend may refuse more (a head_dim limit). */
static inline int fg_attention_desc_valid(const fg_attention_desc *d)
{
    if (!d || d->struct_size < offsetof(fg_attention_desc, kv_heads) || d->batch < 1 ||
        d->seq < 1 || d->heads < 1 || d->head_dim < 1 ||
        !(d->dropout >= 0.0f && d->dropout < 1.0f))
        return 0;
    int32_t kv = fg_attention_kv_heads(d);
    if (kv < 1 || kv > d->heads || d->heads % kv != 0)
        return 0;
    return (double)d->batch * d->seq * 3.0 * d->heads * d->head_dim <= (double)INT32_MAX;
}

static inline fg_status fg_check_attention_(const char *who, const char *op,
                                            const fg_attention_desc *d, const void *qkv,
                                            const void *y, const void *workspace, fg_error *err)
{
    FG_CHECK_(fg_attention_desc_valid(d), op,
              "bad descriptor (batch, seq, heads, head_dim >= 1, kv_heads dividing heads, dropout "
              "in [0, 1), fewer than 2^31 qkv elements, struct_size >= %zu)", FG_CHECK_MSG_(op),
              offsetof(fg_attention_desc, kv_heads));
    FG_CHECK_NOT_NULL_(op, qkv);
    FG_CHECK_NOT_NULL_(op, y);
    FG_CHECK_NOT_NULL_(op, workspace);
    return FG_OK;
}

FG_OP_CHECK(attention_forward)
{
    FG_CHECK_QUEUE_("attention_forward");
    fg_status st = fg_check_attention_(who, "attention_forward", d, qkv, y, workspace, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_("attention_forward", lse);
    return FG_OK;
}

FG_OP_CHECK(attention_backward)
{
    FG_CHECK_QUEUE_("attention_backward");
    fg_status st = fg_check_attention_(who, "attention_backward", d, qkv, y, workspace, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_("attention_backward", lse);
    FG_CHECK_NOT_NULL_("attention_backward", dy);
    FG_CHECK_NOT_NULL_("attention_backward", dqkv);
    return FG_OK;
}

FG_OP_CHECK(attention_decode)
{
    FG_CHECK_QUEUE_("attention_decode");
    fg_status st = fg_check_attention_(who, "attention_decode", d, qkv, y, workspace, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_(pos >= 0 && pos < d->seq, "attention_decode", "pos = %d is outside the cache's %d rows",
              FG_CHECK_MSG_("attention_decode"), pos, d->seq);
    return FG_OK;
}

/* ---- ABI 1.6: rope and swiglu ------------------------------------------------------------ */

static inline fg_status fg_check_rope_(const char *who, const char *op, void *queue, int rows,
                                       int seq, int pos0, int heads, int head_dim, int ld,
                                       float theta, void *x, int *skip, fg_error *err)
{
    FG_CHECK_(queue != NULL, op, "queue is NULL", FG_CHECK_MSG_(op));
    FG_CHECK_(rows >= 0 && seq >= 1 && pos0 >= 0 && heads >= 1, op,
              "rows = %d, seq = %d, pos0 = %d, heads = %d: rows and pos0 must be >= 0, seq "
              "and heads >= 1", FG_CHECK_MSG_(op), rows, seq, pos0, heads);
    FG_CHECK_(head_dim >= 2 && head_dim % 2 == 0, op, "head_dim = %d must be even and >= 2",
              FG_CHECK_MSG_(op), head_dim);
    FG_CHECK_((double)ld >= (double)heads * head_dim, op,
              "ld = %d is smaller than heads * head_dim = %d", FG_CHECK_MSG_(op), ld,
              heads * head_dim);
    FG_CHECK_(theta > 1.0f, op, "theta = %g must be > 1", FG_CHECK_MSG_(op), (double)theta);
    FG_CHECK_(rows == 0 || x != NULL, op, "x is NULL", FG_CHECK_MSG_(op));
    *skip = rows == 0;
    return FG_OK;
}

FG_OP_CHECK(rope_forward)
{
    return fg_check_rope_(who, "rope_forward", queue, rows, seq, pos0, heads, head_dim, ld,
                          theta, x, skip, err);
}

FG_OP_CHECK(rope_backward)
{
    return fg_check_rope_(who, "rope_backward", queue, rows, seq, pos0, heads, head_dim, ld,
                          theta, x, skip, err);
}

/* ---- ABI 1.9: rope with a table of inverse frequencies ----------------------------------- */

static inline fg_status fg_check_rope_freq_(const char *who, const char *op, void *queue,
                                            int rows, int seq, int pos0, int heads,
                                            int head_dim, int ld, const double *inv_freq,
                                            void *x, int *skip, fg_error *err)
{
    fg_status st = fg_check_rope_(who, op, queue, rows, seq, pos0, heads, head_dim, ld, 2.0f,
                                  x, skip, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_(inv_freq != NULL, op, "inv_freq is NULL", FG_CHECK_MSG_(op));
    for (int i = 0; i < head_dim / 2; i++)
        FG_CHECK_(inv_freq[i] > 0 && inv_freq[i] < 1e300, op,
                  "inv_freq[%d] = %g must be finite and > 0", FG_CHECK_MSG_(op), i,
                  inv_freq[i]);
    return FG_OK;
}

FG_OP_CHECK(rope_freq_forward)
{
    return fg_check_rope_freq_(who, "rope_freq_forward", queue, rows, seq, pos0, heads,
                               head_dim, ld, inv_freq, x, skip, err);
}

FG_OP_CHECK(rope_freq_backward)
{
    return fg_check_rope_freq_(who, "rope_freq_backward", queue, rows, seq, pos0, heads,
                               head_dim, ld, inv_freq, x, skip, err);
}

/* ---- ABI 1.10: the NCHW <-> NHWC transpose --------------------------------------------- */

FG_OP_CHECK(transpose_batched)
{
    (void)dtype;
    FG_CHECK_QUEUE_("transpose_batched");
    FG_CHECK_(batch >= 0 && rows >= 0 && cols >= 0, "transpose_batched",
              "batch %d, rows %d, cols %d must be >= 0", FG_CHECK_MSG_("transpose_batched"),
              batch, rows, cols);
    *skip = (int64_t)batch * rows * cols == 0;
    if (*skip)
        return FG_OK;
    FG_CHECK_NOT_NULL_("transpose_batched", x);
    FG_CHECK_NOT_NULL_("transpose_batched", y);
    FG_CHECK_(x != y, "transpose_batched", "y aliases x", FG_CHECK_MSG_("transpose_batched"));
    return FG_OK;
}

/* ---- ABI 1.10: the loss scaler on the device ------------------------------------------- */

/* The scaler's rule as precision.fp16-mixed's keys allow it; the state in device memory
 * is the caller's (checked when it was written). */
FG_OP_CHECK(loss_scale_update)
{
    const char *op = "loss_scale_update";
    FG_CHECK_QUEUE_(op);
    FG_CHECK_NOT_NULL_(op, rule);
    FG_CHECK_NOT_NULL_(op, sq);
    FG_CHECK_NOT_NULL_(op, scaler);
    if (n > 0)
        FG_CHECK_NOT_NULL_(op, x);
    FG_CHECK_(rule->struct_size >= sizeof *rule, op, "rule struct_size = %u is below %zu",
              FG_CHECK_MSG_(op), rule->struct_size, sizeof *rule);
    FG_CHECK_(rule->growth_factor >= 1.0 && rule->backoff_factor > 0.0 &&
                  rule->backoff_factor <= 1.0 && rule->min_scale > 0.0,
              op, "growth_factor = %g must be >= 1, backoff_factor = %g in (0, 1] and "
              "min_scale = %g > 0", FG_CHECK_MSG_(op), rule->growth_factor,
              rule->backoff_factor, rule->min_scale);
    FG_CHECK_(rule->growth_interval >= 1 && rule->hysteresis >= 1, op, "growth_interval = "
              "%lld and hysteresis = %lld must be >= 1", FG_CHECK_MSG_(op),
              (long long)rule->growth_interval, (long long)rule->hysteresis);
    return FG_OK;
}

FG_OP_CHECK(swiglu_forward)
{
    FG_CHECK_QUEUE_("swiglu_forward");
    *skip = n == 0;
    if (n == 0)
        return FG_OK;
    FG_CHECK_NOT_NULL_("swiglu_forward", gate);
    FG_CHECK_NOT_NULL_("swiglu_forward", up);
    FG_CHECK_NOT_NULL_("swiglu_forward", y);
    FG_CHECK_(y != gate && y != up, "swiglu_forward", "y aliases an input",
              FG_CHECK_MSG_("swiglu_forward"));
    return FG_OK;
}

FG_OP_CHECK(swiglu_backward)
{
    FG_CHECK_QUEUE_("swiglu_backward");
    *skip = n == 0;
    if (n == 0)
        return FG_OK;
    FG_CHECK_NOT_NULL_("swiglu_backward", gate);
    FG_CHECK_NOT_NULL_("swiglu_backward", up);
    FG_CHECK_NOT_NULL_("swiglu_backward", dy);
    FG_CHECK_NOT_NULL_("swiglu_backward", dgate);
    FG_CHECK_NOT_NULL_("swiglu_backward", dup);
    FG_CHECK_(dup != dy && dup != dgate, "swiglu_backward", "dup aliases dy or dgate",
              FG_CHECK_MSG_("swiglu_backward"));
    return FG_OK;
}

/* ---- ABI 1.8: batch norm split for statistics across replicas --------------------------- */

static inline fg_status fg_check_bn_shape_(const char *who, const char *op, void *queue, int n,
                                           int c, int spatial, const void *x, fg_error *err)
{
    FG_CHECK_QUEUE_(op);
    FG_CHECK_(n >= 1 && c >= 1 && spatial >= 1, op, "n = %d, c = %d, spatial = %d must be >= 1",
              FG_CHECK_MSG_(op), n, c, spatial);
    FG_CHECK_NOT_NULL_(op, x);
    return FG_OK;
}

FG_OP_CHECK(batchnorm_stats)
{
    fg_status st = fg_check_bn_shape_(who, "batchnorm_stats", queue, n, c, spatial, x, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_("batchnorm_stats", stats);
    return FG_OK;
}

FG_OP_CHECK(batchnorm_apply)
{
    const char *op = "batchnorm_apply";
    fg_status st = fg_check_bn_shape_(who, op, queue, n, c, spatial, x, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_(eps >= 0.0f, op, "eps = %g must be >= 0", FG_CHECK_MSG_(op), (double)eps);
    FG_CHECK_NOT_NULL_(op, stats);
    FG_CHECK_NOT_NULL_(op, saved_mean);
    FG_CHECK_NOT_NULL_(op, saved_invstd);
    FG_CHECK_NOT_NULL_(op, y);
    FG_CHECK_((running_mean == NULL) == (running_var == NULL), op,
              "running_mean and running_var must both be given or both be NULL",
              FG_CHECK_MSG_(op));
    return FG_OK;
}

FG_OP_CHECK(batchnorm_backward_reduce)
{
    const char *op = "batchnorm_backward_reduce";
    fg_status st = fg_check_bn_shape_(who, op, queue, n, c, spatial, x, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_(op, saved_mean);
    FG_CHECK_NOT_NULL_(op, saved_invstd);
    FG_CHECK_NOT_NULL_(op, dy);
    FG_CHECK_NOT_NULL_(op, sums);
    return FG_OK;
}

FG_OP_CHECK(batchnorm_backward_apply)
{
    const char *op = "batchnorm_backward_apply";
    fg_status st = fg_check_bn_shape_(who, op, queue, n, c, spatial, x, err);
    if (st != FG_OK)
        return st;
    FG_CHECK_NOT_NULL_(op, saved_mean);
    FG_CHECK_NOT_NULL_(op, saved_invstd);
    FG_CHECK_NOT_NULL_(op, dy);
    FG_CHECK_NOT_NULL_(op, sums);
    FG_CHECK_NOT_NULL_(op, dx);
    return FG_OK;
}

static inline int fg_check_fp8_format_(uint32_t f)
{
    return f == FG_F8E4M3 || f == FG_F8E5M2;
}

FG_OP_CHECK(gemm_fp8)
{
    const char *op = "gemm_fp8";
    FG_CHECK_QUEUE_(op);
    FG_CHECK_NOT_NULL_(op, f8);
    FG_CHECK_(f8->struct_size >= sizeof(fg_fp8_gemm_args), op,
              "f8->struct_size = %u is smaller than fg_fp8_gemm_args (%zu)", FG_CHECK_MSG_(op),
              f8->struct_size, sizeof(fg_fp8_gemm_args));
    FG_CHECK_(fg_check_fp8_format_(f8->a_format) && fg_check_fp8_format_(f8->b_format), op,
              "fp8 formats %u x %u: each must be f8e4m3 (%d) or f8e5m2 (%d)", FG_CHECK_MSG_(op),
              f8->a_format, f8->b_format, FG_F8E4M3, FG_F8E5M2);
    FG_CHECK_(f8->a_format != FG_F8E5M2 || f8->b_format != FG_F8E5M2, op,
              "f8e5m2 x f8e5m2 has no fp8 gemm (one operand must be f8e4m3)", FG_CHECK_MSG_(op));
    FG_CHECK_(f8->history_len >= 1, op, "history_len = %d must be >= 1", FG_CHECK_MSG_(op),
              f8->history_len);
    FG_CHECK_(f8->amax_algo == FG_FP8_AMAX_MAX || f8->amax_algo == FG_FP8_AMAX_MOST_RECENT, op,
              "amax_algo = %d (max 0, most_recent 1)", FG_CHECK_MSG_(op), f8->amax_algo);
    FG_CHECK_NOT_NULL_(op, f8->a_scale);
    FG_CHECK_NOT_NULL_(op, f8->a_history);
    FG_CHECK_NOT_NULL_(op, f8->b_scale);
    FG_CHECK_NOT_NULL_(op, f8->b_history);
    return fg_check_gemm_shape_(who, op, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
                                skip, err);
}

/* ---- the trampolines ------------------------------------------------------------------------ */

#define FG_OP_CHECKED_(prefix, id, entry, ...)                                               \
    static fg_status prefix##checked_##entry FG_OP_PARAMS(entry)                             \
    {                                                                                        \
        int skip_ = 0;                                                                       \
        fg_status st_ = fg_check_##entry(FG_BACKEND_CHECK_WHO, &skip_,                       \
                                         queue FG_OP_SIG_##entry(FG_OP_NAME_), err);         \
        return st_ != FG_OK || skip_ ? st_ : prefix##entry FG_OP_ARGS(entry);                \
    }
/* One op's trampoline, for a backend that implements a subset: static PREFIXchecked_<entry>. */
#define FG_BACKEND_CHECKED_OP(prefix, entry) FG_OP_CHECKED_(prefix, ~, entry)
/* Defines static PREFIXchecked_<entry> for every op: the check, then PREFIX<entry>. */
#define FG_BACKEND_CHECKED_OPS(prefix) FG_BACKEND_OPS(FG_OP_CHECKED_, prefix)
#define FG_OP_INIT_CHECKED_(prefix, id, entry, ...) .entry = prefix##checked_##entry,
/* The designated initialisers of a vtable's op entries, each its checked trampoline. */
#define FG_BACKEND_OP_INIT_CHECKED(prefix) FG_BACKEND_OPS(FG_OP_INIT_CHECKED_, prefix)

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#ifdef __cplusplus
}
#endif
#endif
