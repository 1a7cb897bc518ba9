/* The ops in f32, behind the vtable's entries (cpu_ops.c gives them f32 views of operands
 * of any dtype): each checks its arguments at the border (a bad call gets an error naming
 * the op and the argument, never a crash in a kernel), then runs the kernel of kernels/cpu
 * synchronously on the calling thread and the pool. */
#include "cpu_backend.h"
#include "cpu_checks.h"

/* The shape and pointer checks of gemm and gemm_bias (op names the entry). */
static fg_status fg_cpu_check_gemm(const char *op, int trans_a, int trans_b, int m, int n,
                                   int k, const float *a, int lda, const float *b, int ldb,
                                   const float *c, int ldc, fg_error *err)
{
    FG_CPU_REQUIRE(m >= 0 && n >= 0 && k >= 0, "%s: m = %d, n = %d, k = %d must be >= 0", op,
                   m, n, k);
    int a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
    FG_CPU_REQUIRE(lda >= (a_cols > 1 ? a_cols : 1),
                   "%s: lda = %d is smaller than the %d columns of A", op, lda, a_cols);
    FG_CPU_REQUIRE(ldb >= (b_cols > 1 ? b_cols : 1),
                   "%s: ldb = %d is smaller than the %d columns of B", op, ldb, b_cols);
    FG_CPU_REQUIRE(ldc >= (n > 1 ? n : 1), "%s: ldc = %d is smaller than n = %d", op, ldc, n);
    if (m == 0 || n == 0)
        return FG_OK;
    FG_CPU_REQUIRE(c != NULL, "%s: c is NULL", op);
    if (k > 0) {
        FG_CPU_REQUIRE(a != NULL, "%s: a is NULL", op);
        FG_CPU_REQUIRE(b != NULL, "%s: b is NULL", op);
    }
    return FG_OK;
}

fg_status fg_cpu_f32_gemm(void *state, void *queue, int trans_a, int trans_b, int m, int n,
                          int k, float alpha, const float *a, int lda, const float *b, int ldb,
                          float beta, float *c, int ldc, fg_error *err)
{
    FG_CPU_QUEUE("gemm");
    fg_status st = fg_cpu_check_gemm("gemm", trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
                                     err);
    if (st != FG_OK || m == 0 || n == 0)
        return st;
    fg_cpu_gemm(FG_CPU_POOL(state), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
    return FG_OK;
}

fg_status fg_cpu_f32_gemm_bias(void *state, void *queue, int trans_a, int trans_b, int m, int n,
                               int k, const float *a, int lda, const float *b, int ldb,
                               const float *bias, float *c, int ldc, fg_error *err)
{
    FG_CPU_QUEUE("gemm_bias");
    fg_status st = fg_cpu_check_gemm("gemm_bias", trans_a, trans_b, m, n, k, a, lda, b, ldb, c,
                                     ldc, err);
    if (st != FG_OK || m == 0 || n == 0)
        return st;
    fg_cpu_gemm_bias(FG_CPU_POOL(state), trans_a, trans_b, m, n, k, a, lda, b, ldb, bias, c,
                     ldc);
    return FG_OK;
}

fg_status fg_cpu_f32_bias_add(void *state, void *queue, float *y, const float *bias, int rows,
                              int cols, int spatial, fg_error *err)
{
    FG_CPU_QUEUE("bias_add");
    FG_CPU_REQUIRE(rows >= 0 && cols >= 0 && spatial >= 0,
                   "bias_add: rows = %d, cols = %d, spatial = %d must be >= 0", rows, cols,
                   spatial);
    if ((size_t)rows * (size_t)cols * (size_t)spatial == 0)
        return FG_OK;
    FG_CPU_NOT_NULL("bias_add", y);
    FG_CPU_NOT_NULL("bias_add", bias);
    fg_cpu_bias_add(FG_CPU_POOL(state), y, bias, rows, cols, spatial);
    return FG_OK;
}

fg_status fg_cpu_f32_bias_grad(void *state, void *queue, float *dbias, const float *dy,
                               int rows, int cols, int spatial, int accumulate, fg_error *err)
{
    FG_CPU_QUEUE("bias_grad");
    FG_CPU_REQUIRE(rows >= 0 && cols >= 0 && spatial >= 0,
                   "bias_grad: rows = %d, cols = %d, spatial = %d must be >= 0", rows, cols,
                   spatial);
    if (cols == 0)
        return FG_OK;
    FG_CPU_NOT_NULL("bias_grad", dbias);
    if ((size_t)rows * (size_t)spatial > 0)
        FG_CPU_NOT_NULL("bias_grad", dy);
    fg_cpu_bias_grad(FG_CPU_POOL(state), dbias, dy, rows, cols, spatial, accumulate);
    return FG_OK;
}

static fg_status fg_cpu_check_act(const char *op, int act, fg_error *err)
{
    FG_CPU_REQUIRE(act >= FG_ACT_NONE && act <= FG_ACT_SIGMOID,
                   "%s: unknown activation %d (none 0, relu 1, gelu 2, tanh 3, sigmoid 4)", op,
                   act);
    return FG_OK;
}

fg_status fg_cpu_f32_activation_forward(void *state, void *queue, int act, const float *x,
                                        float *y, size_t n, fg_error *err)
{
    FG_CPU_QUEUE("activation_forward");
    fg_status st = fg_cpu_check_act("activation_forward", act, err);
    if (st != FG_OK || n == 0)
        return st;
    FG_CPU_NOT_NULL("activation_forward", x);
    FG_CPU_NOT_NULL("activation_forward", y);
    fg_cpu_activation_forward(FG_CPU_POOL(state), act, x, y, n);
    return FG_OK;
}

fg_status fg_cpu_f32_activation_backward(void *state, void *queue, int act, const float *x,
                                         const float *y, const float *dy, float *dx, size_t n,
                                         fg_error *err)
{
    FG_CPU_QUEUE("activation_backward");
    fg_status st = fg_cpu_check_act("activation_backward", act, err);
    if (st != FG_OK || n == 0)
        return st;
    FG_CPU_NOT_NULL("activation_backward", dy);
    FG_CPU_NOT_NULL("activation_backward", dx);
    if (act == FG_ACT_RELU || act == FG_ACT_GELU)
        FG_CPU_NOT_NULL("activation_backward", x);
    if (act == FG_ACT_TANH || act == FG_ACT_SIGMOID)
        FG_CPU_NOT_NULL("activation_backward", y);
    fg_cpu_activation_backward(FG_CPU_POOL(state), act, x, y, dy, dx, n);
    return FG_OK;
}

/* ---- windows: conv and pooling ---------------------------------------------------------- */

/* Checks a window descriptor and copies it into the kernels' shape. */
static fg_status fg_cpu_window(const char *op, const fg_conv2d_desc *d, int need_k,
                               fg_cpu_conv_shape *s, fg_error *err)
{
    FG_CPU_REQUIRE(d != NULL, "%s: descriptor is NULL", op);
    FG_CPU_REQUIRE(d->struct_size >= offsetof(fg_conv2d_desc, out_w) + sizeof d->out_w,
                   "%s: descriptor struct_size %u is smaller than fg_conv2d_desc v1.0", op,
                   (unsigned)d->struct_size);
    FG_CPU_REQUIRE(d->n >= 1 && d->c >= 1 && d->h >= 1 && d->w >= 1,
                   "%s: input n = %d, c = %d, h = %d, w = %d must all be >= 1", op, d->n, d->c,
                   d->h, d->w);
    FG_CPU_REQUIRE(!need_k || d->k >= 1, "%s: output channels k = %d must be >= 1", op, d->k);
    FG_CPU_REQUIRE(d->r >= 1 && d->s >= 1, "%s: window r = %d, s = %d must be >= 1", op, d->r,
                   d->s);
    FG_CPU_REQUIRE(d->stride_h >= 1 && d->stride_w >= 1,
                   "%s: stride_h = %d, stride_w = %d must be >= 1", op, d->stride_h,
                   d->stride_w);
    FG_CPU_REQUIRE(d->pad_h >= 0 && d->pad_w >= 0, "%s: pad_h = %d, pad_w = %d must be >= 0",
                   op, d->pad_h, d->pad_w);
    int eh = d->h + 2 * d->pad_h - d->r, ew = d->w + 2 * d->pad_w - d->s;
    FG_CPU_REQUIRE(eh >= 0 && ew >= 0,
                   "%s: window %dx%d is larger than the padded input %dx%d", op, d->r, d->s,
                   d->h + 2 * d->pad_h, d->w + 2 * d->pad_w);
    int oh = eh / d->stride_h + 1, ow = ew / d->stride_w + 1;
    FG_CPU_REQUIRE(d->out_h == oh && d->out_w == ow,
                   "%s: out_h = %d, out_w = %d, but the window gives %dx%d", op, d->out_h,
                   d->out_w, oh, ow);
    *s = (fg_cpu_conv_shape){ d->n, d->c, d->h, d->w, need_k ? d->k : 0, d->r, d->s,
                              d->pad_h, d->pad_w, d->stride_h, d->stride_w, oh, ow };
    return FG_OK;
}

size_t fg_cpu_im2col_conv2d_workspace(void *state, const fg_conv2d_desc *d)
{
    (void)state;
    fg_cpu_conv_shape s;
    if (fg_cpu_window("conv2d_workspace", d, 1, &s, NULL) != FG_OK)
        return 0;
    return fg_cpu_conv2d_workspace(&s);
}

fg_status fg_cpu_f32_conv2d_forward(void *state, void *queue, const fg_conv2d_desc *d,
                                    const float *x, const float *w, const float *bias,
                                    float *y, void *workspace, fg_error *err)
{
    FG_CPU_QUEUE("conv2d_forward");
    fg_cpu_conv_shape s;
    fg_status st = fg_cpu_window("conv2d_forward", d, 1, &s, err);
    if (st != FG_OK)
        return st;
    FG_CPU_NOT_NULL("conv2d_forward", x);
    FG_CPU_NOT_NULL("conv2d_forward", w);
    FG_CPU_NOT_NULL("conv2d_forward", y);
    FG_CPU_NOT_NULL("conv2d_forward", workspace);
    fg_cpu_conv2d_forward(FG_CPU_POOL(state), &s, x, w, bias, y, workspace);
    return FG_OK;
}

fg_status fg_cpu_f32_conv2d_backward(void *state, void *queue, const fg_conv2d_desc *d,
                                     const float *x, const float *w, const float *dy,
                                     float *dx, float *dw, float *dbias, int accumulate,
                                     void *workspace, fg_error *err)
{
    FG_CPU_QUEUE("conv2d_backward");
    fg_cpu_conv_shape s;
    fg_status st = fg_cpu_window("conv2d_backward", d, 1, &s, err);
    if (st != FG_OK)
        return st;
    FG_CPU_NOT_NULL("conv2d_backward", dy);
    FG_CPU_NOT_NULL("conv2d_backward", workspace);
    if (dw)
        FG_CPU_NOT_NULL("conv2d_backward", x);
    if (dx)
        FG_CPU_NOT_NULL("conv2d_backward", w);
    fg_cpu_conv2d_backward(FG_CPU_POOL(state), &s, x, w, dy, dx, dw, dbias, accumulate,
                           workspace);
    return FG_OK;
}

static fg_status fg_cpu_check_pool_mode(const char *op, int mode, int32_t const *argmax,
                                        fg_error *err)
{
    FG_CPU_REQUIRE(mode == FG_POOL_MAX || mode == FG_POOL_AVG,
                   "%s: unknown mode %d (max 1, avg 2)", op, mode);
    FG_CPU_REQUIRE(mode != FG_POOL_MAX || argmax != NULL,
                   "%s: max pooling needs the argmax buffer", op);
    return FG_OK;
}

fg_status fg_cpu_f32_pool2d_forward(void *state, void *queue, int mode,
                                    const fg_conv2d_desc *d, const float *x, float *y,
                                    int32_t *argmax, fg_error *err)
{
    FG_CPU_QUEUE("pool2d_forward");
    fg_cpu_conv_shape s;
    fg_status st = fg_cpu_check_pool_mode("pool2d_forward", mode, argmax, err);
    if (st == FG_OK)
        st = fg_cpu_window("pool2d_forward", d, 0, &s, err);
    if (st != FG_OK)
        return st;
    FG_CPU_NOT_NULL("pool2d_forward", x);
    FG_CPU_NOT_NULL("pool2d_forward", y);
    fg_cpu_pool2d_forward(FG_CPU_POOL(state), mode == FG_POOL_MAX, &s, x, y, argmax);
    return FG_OK;
}

fg_status fg_cpu_f32_pool2d_backward(void *state, void *queue, int mode,
                                     const fg_conv2d_desc *d, const float *dy,
                                     const int32_t *argmax, float *dx, fg_error *err)
{
    FG_CPU_QUEUE("pool2d_backward");
    fg_cpu_conv_shape s;
    fg_status st = fg_cpu_check_pool_mode("pool2d_backward", mode, argmax, err);
    if (st == FG_OK)
        st = fg_cpu_window("pool2d_backward", d, 0, &s, err);
    if (st != FG_OK)
        return st;
    FG_CPU_NOT_NULL("pool2d_backward", dy);
    FG_CPU_NOT_NULL("pool2d_backward", dx);
    fg_cpu_pool2d_backward(FG_CPU_POOL(state), mode == FG_POOL_MAX, &s, dy, argmax, dx);
    return FG_OK;
}

/* ---- batch norm --------------------------------------------------------------------------- */

fg_status fg_cpu_f32_batchnorm_forward(void *state, void *queue, int training, int n, int c,
                                       int spatial, const float *x, const float *gamma,
                                       const float *beta, float *running_mean,
                                       float *running_var, float momentum, float eps,
                                       float *saved_mean, float *saved_invstd, float *y,
                                       fg_error *err)
{
    FG_CPU_QUEUE("batchnorm_forward");
    FG_CPU_REQUIRE(n >= 1 && c >= 1 && spatial >= 1,
                   "batchnorm_forward: n = %d, c = %d, spatial = %d must be >= 1", n, c,
                   spatial);
    FG_CPU_REQUIRE(eps >= 0.0f, "batchnorm_forward: eps = %g must be >= 0", (double)eps);
    FG_CPU_NOT_NULL("batchnorm_forward", x);
    FG_CPU_NOT_NULL("batchnorm_forward", y);
    if (training) {
        FG_CPU_REQUIRE((size_t)n * (size_t)spatial > 1,
                       "batchnorm_forward: training needs more than 1 value per channel "
                       "(n = %d, spatial = %d)", n, spatial);
        FG_CPU_NOT_NULL("batchnorm_forward", saved_mean);
        FG_CPU_NOT_NULL("batchnorm_forward", saved_invstd);
        FG_CPU_REQUIRE((running_mean == NULL) == (running_var == NULL),
                       "batchnorm_forward: running_mean and running_var must both be given "
                       "or both be NULL");
    } else {
        FG_CPU_NOT_NULL("batchnorm_forward", running_mean);
        FG_CPU_NOT_NULL("batchnorm_forward", running_var);
    }
    fg_cpu_batchnorm_forward(FG_CPU_POOL(state), training, n, c, spatial, x, gamma, beta,
                             running_mean, running_var, momentum, eps, saved_mean,
                             saved_invstd, y);
    return FG_OK;
}

fg_status fg_cpu_f32_batchnorm_backward(void *state, void *queue, int n, int c, int spatial,
                                        const float *x, const float *gamma,
                                        const float *saved_mean, const float *saved_invstd,
                                        const float *dy, float *dx, float *dgamma,
                                        float *dbeta, int accumulate, fg_error *err)
{
    FG_CPU_QUEUE("batchnorm_backward");
    FG_CPU_REQUIRE(n >= 1 && c >= 1 && spatial >= 1,
                   "batchnorm_backward: n = %d, c = %d, spatial = %d must be >= 1", n, c,
                   spatial);
    FG_CPU_NOT_NULL("batchnorm_backward", x);
    FG_CPU_NOT_NULL("batchnorm_backward", saved_mean);
    FG_CPU_NOT_NULL("batchnorm_backward", saved_invstd);
    FG_CPU_NOT_NULL("batchnorm_backward", dy);
    fg_cpu_batchnorm_backward(FG_CPU_POOL(state), n, c, spatial, x, gamma, saved_mean,
                              saved_invstd, dy, dx, dgamma, dbeta, accumulate);
    return FG_OK;
}

/* ---- dropout ------------------------------------------------------------------------------ */

static fg_status fg_cpu_check_p(const char *op, float p, fg_error *err)
{
    FG_CPU_REQUIRE(p >= 0.0f && p <= 1.0f, "%s: p = %g is outside [0, 1]", op, (double)p);
    return FG_OK;
}

fg_status fg_cpu_f32_dropout_forward(void *state, void *queue, float p, uint64_t seed,
                                     uint64_t offset, const float *x, float *y, uint8_t *mask,
                                     size_t n, fg_error *err)
{
    FG_CPU_QUEUE("dropout_forward");
    fg_status st = fg_cpu_check_p("dropout_forward", p, err);
    if (st != FG_OK || n == 0)
        return st;
    FG_CPU_NOT_NULL("dropout_forward", x);
    FG_CPU_NOT_NULL("dropout_forward", y);
    FG_CPU_NOT_NULL("dropout_forward", mask);
    fg_cpu_dropout_forward(FG_CPU_POOL(state), p, seed, offset, x, y, mask, n);
    return FG_OK;
}

fg_status fg_cpu_f32_dropout_backward(void *state, void *queue, float p, const uint8_t *mask,
                                      const float *dy, float *dx, size_t n, fg_error *err)
{
    FG_CPU_QUEUE("dropout_backward");
    fg_status st = fg_cpu_check_p("dropout_backward", p, err);
    if (st != FG_OK || n == 0)
        return st;
    FG_CPU_NOT_NULL("dropout_backward", mask);
    FG_CPU_NOT_NULL("dropout_backward", dy);
    FG_CPU_NOT_NULL("dropout_backward", dx);
    fg_cpu_dropout_backward(FG_CPU_POOL(state), p, mask, dy, dx, n);
    return FG_OK;
}

/* ---- softmax cross-entropy ---------------------------------------------------------------- */

static fg_status fg_cpu_check_labels(const char *op, const int32_t *labels, int rows,
                                     int classes, fg_error *err)
{
    FG_CPU_REQUIRE(rows >= 0 && classes >= 1, "%s: rows = %d must be >= 0, classes = %d >= 1",
                   op, rows, classes);
    if (rows == 0)
        return FG_OK;
    FG_CPU_NOT_NULL(op, labels);
    int64_t bad = fg_cpu_find_bad_label(labels, rows, classes, 1);
    FG_CPU_REQUIRE(bad < 0, "%s: row %lld has label %d, outside [0, %d) (-1: ignored)", op,
                   (long long)bad, bad < 0 ? 0 : labels[bad], classes);
    return FG_OK;
}

fg_status fg_cpu_f32_softmax_xent_forward(void *state, void *queue, const float *logits,
                                          const int32_t *labels, int rows, int classes,
                                          float *probs, float *loss_sum, float *correct,
                                          fg_error *err)
{
    FG_CPU_QUEUE("softmax_xent_forward");
    fg_status st = fg_cpu_check_labels("softmax_xent_forward", labels, rows, classes, err);
    if (st != FG_OK || rows == 0)
        return st;
    FG_CPU_NOT_NULL("softmax_xent_forward", logits);
    FG_CPU_NOT_NULL("softmax_xent_forward", probs);
    fg_cpu_softmax_xent_forward(FG_CPU_POOL(state), logits, labels, rows, classes, probs,
                                loss_sum, correct);
    return FG_OK;
}

fg_status fg_cpu_f32_softmax_xent_backward(void *state, void *queue, const float *probs,
                                           const int32_t *labels, int rows, int classes,
                                           float scale, float *dlogits, fg_error *err)
{
    FG_CPU_QUEUE("softmax_xent_backward");
    fg_status st = fg_cpu_check_labels("softmax_xent_backward", labels, rows, classes, err);
    if (st != FG_OK || rows == 0)
        return st;
    FG_CPU_NOT_NULL("softmax_xent_backward", probs);
    FG_CPU_NOT_NULL("softmax_xent_backward", dlogits);
    fg_cpu_softmax_xent_backward(FG_CPU_POOL(state), probs, labels, rows, classes, scale,
                                 dlogits);
    return FG_OK;
}

fg_status fg_cpu_f32_pointwise_loss(void *state, void *queue, int kind, const float *x,
                                    const float *t, size_t n, float scale, float *loss_sum,
                                    float *metric_sum, float grad_scale, float *dx,
                                    fg_error *err)
{
    FG_CPU_QUEUE("pointwise_loss");
    FG_CPU_REQUIRE(kind == FG_LOSS_MSE || kind == FG_LOSS_BCE_LOGITS,
                   "pointwise_loss: unknown loss kind %d", kind);
    if (n == 0)
        return FG_OK;
    FG_CPU_NOT_NULL("pointwise_loss", x);
    FG_CPU_NOT_NULL("pointwise_loss", t);
    fg_cpu_pointwise_loss(FG_CPU_POOL(state), kind, x, t, n, scale, loss_sum, metric_sum,
                          grad_scale, dx);
    return FG_OK;
}

/* ---- elementwise and reductions ------------------------------------------------------------ */

fg_status fg_cpu_f32_fill(void *state, void *queue, float *x, float value, size_t n,
                          fg_error *err)
{
    FG_CPU_QUEUE("fill");
    if (n == 0)
        return FG_OK;
    FG_CPU_NOT_NULL("fill", x);
    fg_cpu_fill(FG_CPU_POOL(state), x, value, n);
    return FG_OK;
}

fg_status fg_cpu_f32_scale(void *state, void *queue, float *x, float alpha, size_t n,
                           fg_error *err)
{
    FG_CPU_QUEUE("scale");
    if (n == 0)
        return FG_OK;
    FG_CPU_NOT_NULL("scale", x);
    fg_cpu_scale(FG_CPU_POOL(state), x, alpha, n);
    return FG_OK;
}

fg_status fg_cpu_f32_axpy(void *state, void *queue, float alpha, const float *x, float *y,
                          size_t n, fg_error *err)
{
    FG_CPU_QUEUE("axpy");
    if (n == 0)
        return FG_OK;
    FG_CPU_NOT_NULL("axpy", x);
    FG_CPU_NOT_NULL("axpy", y);
    fg_cpu_axpy(FG_CPU_POOL(state), alpha, x, y, n);
    return FG_OK;
}

fg_status fg_cpu_f32_clamp(void *state, void *queue, float *x, float lo, float hi, size_t n,
                           fg_error *err)
{
    FG_CPU_QUEUE("clamp");
    if (n == 0)
        return FG_OK;
    FG_CPU_NOT_NULL("clamp", x);
    fg_cpu_clamp(FG_CPU_POOL(state), x, lo, hi, n);
    return FG_OK;
}

fg_status fg_cpu_f32_sum_squares(void *state, void *queue, const float *x, size_t n,
                                 float *out, fg_error *err)
{
    FG_CPU_QUEUE("sum_squares");
    FG_CPU_NOT_NULL("sum_squares", out);
    if (n > 0)
        FG_CPU_NOT_NULL("sum_squares", x);
    *out = n ? (float)fg_cpu_sum_squares(FG_CPU_POOL(state), x, n) : 0.0f;
    return FG_OK;
}

fg_status fg_cpu_f32_sgd_update(void *state, void *queue, const fg_sgd_args *a, float *param,
                                const float *grad, float *momentum_buf, size_t n,
                                fg_error *err)
{
    FG_CPU_QUEUE("sgd_update");
    FG_CPU_REQUIRE(a != NULL && a->struct_size >= offsetof(fg_sgd_args, first_step) +
                                                       sizeof a->first_step,
                   "sgd_update: args are NULL or older than fg_sgd_args v1.0");
    FG_CPU_REQUIRE(!a->nesterov || (a->momentum > 0.0f && a->dampening == 0.0f),
                   "sgd_update: nesterov needs momentum > 0 and dampening = 0 (momentum = %g, "
                   "dampening = %g)", (double)a->momentum, (double)a->dampening);
    if (n == 0)
        return FG_OK;
    FG_CPU_NOT_NULL("sgd_update", param);
    FG_CPU_NOT_NULL("sgd_update", grad);
    if (a->momentum != 0.0f)
        FG_CPU_NOT_NULL("sgd_update", momentum_buf);
    fg_cpu_sgd s = { a->lr, a->momentum, a->dampening, a->weight_decay, a->nesterov,
                     a->first_step };
    fg_cpu_sgd_update(FG_CPU_POOL(state), &s, param, grad, momentum_buf, n);
    return FG_OK;
}

fg_status fg_cpu_f32_adamw_update(void *state, void *queue, const fg_adamw_args *a,
                                  float *param, const float *grad, float *m, float *v,
                                  size_t n, fg_error *err)
{
    FG_CPU_QUEUE("adamw_update");
    FG_CPU_REQUIRE(a != NULL && a->struct_size >= offsetof(fg_adamw_args, step) + sizeof a->step,
                   "adamw_update: args are NULL or older than fg_adamw_args v1.0");
    FG_CPU_REQUIRE(a->step >= 1, "adamw_update: step = %lld must be >= 1 (1-based)",
                   (long long)a->step);
    FG_CPU_REQUIRE(a->beta1 >= 0.0f && a->beta1 < 1.0f && a->beta2 >= 0.0f && a->beta2 < 1.0f,
                   "adamw_update: beta1 = %g, beta2 = %g must lie in [0, 1)", (double)a->beta1,
                   (double)a->beta2);
    if (n == 0)
        return FG_OK;
    FG_CPU_NOT_NULL("adamw_update", param);
    FG_CPU_NOT_NULL("adamw_update", grad);
    FG_CPU_NOT_NULL("adamw_update", m);
    FG_CPU_NOT_NULL("adamw_update", v);
    fg_cpu_adamw s = { a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->step };
    fg_cpu_adamw_update(FG_CPU_POOL(state), &s, param, grad, m, v, n);
    return FG_OK;
}
