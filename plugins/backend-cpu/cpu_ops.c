/* The dense and flat ops, one function each for every dtype, behind the checked trampolines
 * (fulgur/backend_checks.h: the arguments are valid and there is work to do): half operands
 * are converted to f32 in the queue's scratch, the kernel of kernels/cpu runs on those
 * copies, and the outputs are rounded to nearest even back into their storage. f32 operands
 * are used in place, so an op whose dtypes are all f32 is the f32 kernel, bit for bit. Every
 * op runs with any mix of f32, f16 and bf16 (fg_cpu_supports). The memory-bound ops of a
 * transformer on bf16 tensors (axpy, activations here; norms and embeddings in
 * cpu_ops_lm.c) skip the whole-tensor copies: their kernels widen blocks on the stack and
 * round back (kernels/cpu's _bf16 entry points), the same bits. */
#include <stdint.h>
#include <stdlib.h>

#include "cpu_backend.h"
#include "fulgur/backend_checks.h"
#include "cpu_stage.h"
#include "half.h"

#define POOL(state) (((fg_cpu_backend *)(state))->pool)

static int storable(uint32_t t)
{
    return t == FG_F32 || t == FG_F16 || t == FG_BF16;
}

int fg_cpu_supports(void *state, uint32_t op, const uint32_t *dtypes)
{
    (void)state;
    const fg_backend_op_desc *d = fg_backend_op_info(op);
    if (!d || !dtypes || op == FG_OP_GEMM_FP8 /* cpu_fp8.c */ ||
        op == FG_OP_TRANSPOSE_BATCHED /* cpu_nhwc.c */)
        return 0;
    for (int i = 0; i < d->dtype_count; i++)
        if (!storable(dtypes[i]))
            return 0;
    return 1;
}

static size_t scratch_size(size_t n)
{
    return (n * sizeof(float) + 63) / 64 * 64;
}

/* Makes the f32 views of the operands, growing the queue's scratch when this op needs more
 * than any before it. */
static fg_status stage(void *state, void *queue, const char *op, fg_cpu_operand *o, int count,
                       fg_error *err)
{
    if (!queue)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: %s: queue is NULL", op);
    fg_cpu_queue *q = queue;
    size_t need = 0;
    for (int i = 0; i < count; i++) {
        if (!storable(o[i].dtype))
            return fg_error_set(err, FG_UNAVAILABLE,
                                "cpu backend: %s: operand %d has dtype %s; this backend stores "
                                "f32, f16 and bf16", op, i, fg_dtype_name((fg_dtype)o[i].dtype));
        if ((o[i].in || o[i].out) && o[i].dtype != FG_F32)
            need += scratch_size(o[i].n);
    }
    if (need > q->scratch_bytes) {
        free(q->scratch);
        q->scratch_bytes = 0;
        q->scratch = aligned_alloc(64, need);
        if (!q->scratch)
            return fg_error_set(err, FG_OUT_OF_MEMORY,
                                "cpu backend: %s: no memory for %zu bytes of f32 scratch", op,
                                need);
        q->scratch_bytes = need;
    }
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        const void *p = o[i].in ? o[i].in : o[i].out;
        if (!p || o[i].dtype == FG_F32) {
            o[i].f = o[i].out ? (float *)o[i].out : (float *)(uintptr_t)o[i].in;
            continue;
        }
        o[i].f = (float *)((char *)q->scratch + off);
        off += scratch_size(o[i].n);
        if (o[i].in)
            fg_cpu_convert(POOL(state), o[i].f, FG_CPU_F32, o[i].in, (int)o[i].dtype, o[i].n);
    }
    return FG_OK;
}

/* Rounds the outputs back into their storage, after the op succeeded. */
static fg_status unstage(void *state, const fg_cpu_operand *o, int count, fg_status st)
{
    for (int i = 0; st == FG_OK && i < count; i++)
        if (o[i].out && o[i].dtype != FG_F32)
            fg_cpu_convert(POOL(state), o[i].out, (int)o[i].dtype, o[i].f, FG_CPU_F32, o[i].n);
    return st;
}

fg_status fg_cpu_stage(void *state, void *queue, const char *op, fg_cpu_operand *o, int count,
                       fg_error *err)
{
    return stage(state, queue, op, o, count, err);
}

fg_status fg_cpu_unstage(void *state, const fg_cpu_operand *o, int count, fg_status st)
{
    return unstage(state, o, count, st);
}

/* ---- cast --------------------------------------------------------------------------- */

fg_status fg_cpu_op_cast(void *state, void *queue, uint32_t dst_dtype, uint32_t src_dtype,
                         void *dst, const void *src, size_t n, fg_error *err)
{
    if (!storable(dst_dtype) || !storable(src_dtype))
        return fg_error_set(err, FG_UNAVAILABLE, "cpu backend: cast from %s to %s: this backend "
                            "stores f32, f16 and bf16", fg_dtype_name((fg_dtype)src_dtype),
                            fg_dtype_name((fg_dtype)dst_dtype));
    fg_cpu_convert(POOL(state), dst, (int)dst_dtype, src, (int)src_dtype, n);
    return FG_OK;
}

/* ---- gemm --------------------------------------------------------------------------- */

/* Elements a row-major (rows, cols) matrix with leading dimension ld spans. */
static size_t span(int rows, int cols, int ld)
{
    return rows > 0 && cols > 0 ? (size_t)(rows - 1) * (size_t)ld + (size_t)cols : 0;
}

fg_status fg_cpu_op_gemm(void *state, void *queue, uint32_t a_dtype, uint32_t b_dtype,
                         uint32_t c_dtype, int trans_a, int trans_b, int m, int n, int k,
                         float alpha, const void *a, int lda, const void *b, int ldb,
                         float beta, void *c, int ldc, fg_error *err)
{
    int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    fg_cpu_bf16_args g = {"gemm", a_dtype, b_dtype, c_dtype, trans_a, trans_b, m, n, k, alpha,
                          beta, a, b, NULL, c, lda, ldb, ldc};
    fg_status st = FG_OK;
    if (a && b && fg_cpu_bf16_gemm(state, queue, &g, &st, err))
        return st;
    fg_cpu_operand o[] = {ARG_IN(a, a_dtype, span(a_rows, a_cols, lda)),
                   ARG_IN(b, b_dtype, span(b_rows, b_cols, ldb)),
                   /* a wider ldc: read C too, so the gaps between rows keep their value */
                   ARG_ACC(c, c_dtype, span(m, n, ldc), beta != 0.0f || ldc > n)};
    st = stage(state, queue, "gemm", o, NARGS(o), err);
    fg_cpu_gemm_call call = {"gemm", a_dtype, trans_a, trans_b, m, n, k, alpha, beta, o[0].f,
                             o[1].f, NULL, o[2].f, lda, ldb, ldc};
    if (st == FG_OK)
        st = fg_cpu_gemm_run(state, queue, &call, err);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_gemm_bias(void *state, void *queue, uint32_t a_dtype, uint32_t b_dtype,
                              uint32_t c_dtype, int trans_a, int trans_b, int m, int n, int k,
                              const void *a, int lda, const void *b, int ldb, const void *bias,
                              void *c, int ldc, fg_error *err)
{
    int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    fg_cpu_bf16_args g = {"gemm_bias", a_dtype, b_dtype, c_dtype, trans_a, trans_b, m, n, k,
                          1.0f, 0.0f, a, b, bias, c, lda, ldb, ldc};
    fg_status st = FG_OK;
    if (a && b && fg_cpu_bf16_gemm(state, queue, &g, &st, err))
        return st;
    /* the product and the bias meet in the f32 view of C: one rounding into C's dtype */
    fg_cpu_operand o[] = {ARG_IN(a, a_dtype, span(a_rows, a_cols, lda)),
                   ARG_IN(b, b_dtype, span(b_rows, b_cols, ldb)),
                   ARG_IN(bias, b_dtype, n > 0 ? (size_t)n : 0),
                   ARG_ACC(c, c_dtype, span(m, n, ldc), ldc > n)}; /* keep the gaps */
    st = stage(state, queue, "gemm_bias", o, NARGS(o), err);
    fg_cpu_gemm_call call = {"gemm_bias", a_dtype, trans_a, trans_b, m, n, k, 1.0f, 0.0f,
                             o[0].f, o[1].f, o[2].f, o[3].f, lda, ldb, ldc};
    if (st == FG_OK)
        st = fg_cpu_gemm_run(state, queue, &call, err);
    return unstage(state, o, NARGS(o), st);
}

/* ---- bias and activations ------------------------------------------------------------- */

static size_t volume3(int a, int b, int c)
{
    return a > 0 && b > 0 && c > 0 ? (size_t)a * (size_t)b * (size_t)c : 0;
}

fg_status fg_cpu_op_bias_add(void *state, void *queue, uint32_t y_dtype, uint32_t bias_dtype,
                             void *y, const void *bias, int rows, int cols, int spatial,
                             fg_error *err)
{
    fg_cpu_operand o[] = {ARG_INOUT(y, y_dtype, volume3(rows, cols, spatial)),
                   ARG_IN(bias, bias_dtype, cols > 0 ? (size_t)cols : 0)};
    fg_status st = stage(state, queue, "bias_add", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_bias_add(POOL(state), o[0].f, o[1].f, rows, cols, spatial);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_bias_grad(void *state, void *queue, uint32_t dbias_dtype,
                              uint32_t dy_dtype, void *dbias, const void *dy, int rows,
                              int cols, int spatial, int accumulate, fg_error *err)
{
    if (dy_dtype == FG_BF16 && spatial == 1) { /* dy read in place: no widened copy */
        fg_cpu_operand d[] = {ARG_ACC(dbias, dbias_dtype, cols > 0 ? (size_t)cols : 0,
                                      accumulate)};
        fg_status st = stage(state, queue, "bias_grad", d, NARGS(d), err);
        if (st == FG_OK)
            fg_cpu_bias_grad_bf16(POOL(state), d[0].f, dy, rows, cols, accumulate);
        return unstage(state, d, NARGS(d), st);
    }
    fg_cpu_operand o[] = {ARG_ACC(dbias, dbias_dtype, cols > 0 ? (size_t)cols : 0, accumulate),
                   ARG_IN(dy, dy_dtype, volume3(rows, cols, spatial))};
    fg_status st = stage(state, queue, "bias_grad", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_bias_grad(POOL(state), o[0].f, o[1].f, rows, cols, spatial, accumulate);
    return unstage(state, o, NARGS(o), st);
}

/* A half relu runs on the stored bits (kernels/cpu/activation.c): the emulation's values
 * without its two conversions. */
static int half_relu(uint32_t dtype, int act)
{
    return act == FG_ACT_RELU && (dtype == FG_BF16 || dtype == FG_F16);
}

static uint16_t half_inf(uint32_t dtype)
{
    return dtype == FG_BF16 ? 0x7f80 : 0x7c00;
}

fg_status fg_cpu_op_activation_forward(void *state, void *queue, uint32_t dtype, int act,
                                       const void *x, void *y, size_t n, fg_error *err)
{
    if (half_relu(dtype, act)) {
        fg_cpu_half_relu_forward(POOL(state), half_inf(dtype), x, y, n);
        return FG_OK;
    }
    if (dtype == FG_BF16) { /* bf16 storage, f32 math in blocks: the emulation's bits */
        fg_cpu_activation_forward_bf16(POOL(state), act, x, y, n);
        return FG_OK;
    }
    fg_cpu_operand o[] = {ARG_IN(x, dtype, n), ARG_OUT(y, dtype, n)};
    fg_status st = stage(state, queue, "activation_forward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_activation_forward(POOL(state), act, o[0].f, o[1].f, n);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_activation_backward(void *state, void *queue, uint32_t dtype, int act,
                                        const void *x, const void *y, const void *dy,
                                        void *dx, size_t n, fg_error *err)
{
    if (half_relu(dtype, act)) {
        fg_cpu_half_relu_backward(POOL(state), half_inf(dtype), x, dy, dx, n);
        return FG_OK;
    }
    if (dtype == FG_BF16) {
        fg_cpu_activation_backward_bf16(POOL(state), act, x, y, dy, dx, n);
        return FG_OK;
    }
    /* relu and gelu read x, tanh and sigmoid y: stage only what is read */
    int reads_x = act == FG_ACT_RELU || act == FG_ACT_GELU;
    fg_cpu_operand o[] = {ARG_IN(reads_x ? x : NULL, dtype, n), ARG_IN(reads_x ? NULL : y, dtype, n),
                   ARG_IN(dy, dtype, n), ARG_OUT(dx, dtype, n)};
    fg_status st = stage(state, queue, "activation_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_activation_backward(POOL(state), act, reads_x ? o[0].f : x,
                                   reads_x ? y : o[1].f, o[2].f, o[3].f, n);
    return unstage(state, o, NARGS(o), st);
}

/* ---- windows: conv and pooling -------------------------------------------------------- */

/* The kernels' view of a checked window descriptor. */
static fg_cpu_conv_shape window(const fg_conv2d_desc *d, int need_k)
{
    return (fg_cpu_conv_shape){ d->n, d->c, d->h, d->w, need_k ? d->k : 0, d->r, d->s,
                                d->pad_h, d->pad_w, d->stride_h, d->stride_w, d->out_h,
                                d->out_w, NULL };
}

size_t fg_cpu_im2col_conv2d_workspace(void *state, const fg_conv2d_desc *d)
{
    (void)state;
    if (fg_check_window("cpu backend", "conv2d_workspace", d, 1, NULL) != FG_OK)
        return 0;
    fg_cpu_conv_shape s = window(d, 1);
    return fg_cpu_conv2d_workspace(&s);
}

static size_t volume4(int a, int b, int c, int d)
{
    return (size_t)a * (size_t)b * (size_t)c * (size_t)d;
}

fg_status fg_cpu_im2col_conv2d_forward(void *state, void *queue, uint32_t x_dtype,
                                   uint32_t param_dtype, const fg_conv2d_desc *d,
                                   const void *x, const void *w, const void *bias, void *y,
                                   void *workspace, fg_error *err)
{
    fg_status nchw = fg_cpu_nchw_only("conv2d_forward", d, err);
    if (nchw != FG_OK)
        return nchw;
    fg_cpu_conv_shape s = window(d, 1);
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, volume4(d->n, d->c, d->h, d->w)),
                   ARG_IN(w, param_dtype, volume4(d->k, d->c, d->r, d->s)),
                   ARG_IN(bias, param_dtype, (size_t)d->k),
                   ARG_OUT(y, x_dtype, volume4(d->n, d->k, d->out_h, d->out_w))};
    fg_status st = stage(state, queue, "conv2d_forward", o, NARGS(o), err);
    fg_cpu_gemm_route route;
    s.gemm = fg_cpu_gemm_route_begin(&route, state, queue, "conv2d_forward", x_dtype, 1);
    if (st == FG_OK)
        fg_cpu_conv2d_forward(POOL(state), &s, o[0].f, o[1].f, o[2].f, o[3].f, workspace);
    st = fg_cpu_gemm_route_end(&route, st, err);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_im2col_conv2d_backward(void *state, void *queue, uint32_t x_dtype,
                                    uint32_t param_dtype, uint32_t grad_dtype,
                                    const fg_conv2d_desc *d, const void *x, const void *w,
                                    const void *dy, void *dx, void *dw, void *dbias,
                                    int accumulate, void *workspace, fg_error *err)
{
    fg_status nchw = fg_cpu_nchw_only("conv2d_backward", d, err);
    if (nchw != FG_OK)
        return nchw;
    fg_cpu_conv_shape s = window(d, 1);
    size_t xn = volume4(d->n, d->c, d->h, d->w), wn = volume4(d->k, d->c, d->r, d->s);
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, xn), ARG_IN(w, param_dtype, wn),
                   ARG_IN(dy, x_dtype, volume4(d->n, d->k, d->out_h, d->out_w)),
                   ARG_OUT(dx, x_dtype, xn), ARG_ACC(dw, grad_dtype, wn, accumulate),
                   ARG_ACC(dbias, grad_dtype, (size_t)d->k, accumulate)};
    fg_status st = stage(state, queue, "conv2d_backward", o, NARGS(o), err);
    fg_cpu_gemm_route route;
    s.gemm = fg_cpu_gemm_route_begin(&route, state, queue, "conv2d_backward", x_dtype, 1);
    if (st == FG_OK)
        fg_cpu_conv2d_backward(POOL(state), &s, o[0].f, o[1].f, o[2].f, o[3].f, o[4].f, o[5].f,
                               accumulate, workspace);
    st = fg_cpu_gemm_route_end(&route, st, err);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_pool2d_forward(void *state, void *queue, uint32_t dtype, int mode,
                                   const fg_conv2d_desc *d, const void *x, void *y,
                                   int32_t *argmax, fg_error *err)
{
    fg_status nchw = fg_cpu_nchw_only("pool2d_forward", d, err);
    if (nchw != FG_OK)
        return nchw;
    fg_cpu_conv_shape s = window(d, 0);
    fg_cpu_operand o[] = {ARG_IN(x, dtype, volume4(d->n, d->c, d->h, d->w)),
                   ARG_OUT(y, dtype, volume4(d->n, d->c, d->out_h, d->out_w))};
    fg_status st = stage(state, queue, "pool2d_forward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_pool2d_forward(POOL(state), mode == FG_POOL_MAX, &s, o[0].f, o[1].f, argmax);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_pool2d_backward(void *state, void *queue, uint32_t dtype, int mode,
                                    const fg_conv2d_desc *d, const void *dy,
                                    const int32_t *argmax, void *dx, fg_error *err)
{
    fg_status nchw = fg_cpu_nchw_only("pool2d_backward", d, err);
    if (nchw != FG_OK)
        return nchw;
    fg_cpu_conv_shape s = window(d, 0);
    fg_cpu_operand o[] = {ARG_IN(dy, dtype, volume4(d->n, d->c, d->out_h, d->out_w)),
                   ARG_OUT(dx, dtype, volume4(d->n, d->c, d->h, d->w))};
    fg_status st = stage(state, queue, "pool2d_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_pool2d_backward(POOL(state), mode == FG_POOL_MAX, &s, o[0].f, argmax, o[1].f);
    return unstage(state, o, NARGS(o), st);
}

/* ---- batch norm, dropout, loss ---------------------------------------------------------- */

fg_status fg_cpu_op_batchnorm_forward(void *state, void *queue, uint32_t x_dtype,
                                      uint32_t param_dtype, int training, int n, int c,
                                      int spatial, const void *x, const void *gamma,
                                      const void *beta, float *running_mean,
                                      float *running_var, float momentum, float eps,
                                      float *saved_mean, float *saved_invstd, void *y,
                                      fg_error *err)
{
    size_t xn = volume3(n, c, spatial), cn = c > 0 ? (size_t)c : 0;
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, xn), ARG_IN(gamma, param_dtype, cn),
                   ARG_IN(beta, param_dtype, cn), ARG_OUT(y, x_dtype, xn)};
    fg_status st = stage(state, queue, "batchnorm_forward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_batchnorm_forward(POOL(state), training, n, c, spatial, o[0].f, o[1].f, o[2].f,
                                 running_mean, running_var, momentum, eps, saved_mean,
                                 saved_invstd, o[3].f);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_batchnorm_backward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, uint32_t grad_dtype, int n, int c,
                                       int spatial, const void *x, const void *gamma,
                                       const float *saved_mean, const float *saved_invstd,
                                       const void *dy, void *dx, void *dgamma, void *dbeta,
                                       int accumulate, fg_error *err)
{
    size_t xn = volume3(n, c, spatial), cn = c > 0 ? (size_t)c : 0;
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, xn), ARG_IN(gamma, param_dtype, cn),
                   ARG_IN(dy, x_dtype, xn), ARG_OUT(dx, x_dtype, xn),
                   ARG_ACC(dgamma, grad_dtype, cn, accumulate),
                   ARG_ACC(dbeta, grad_dtype, cn, accumulate)};
    fg_status st = stage(state, queue, "batchnorm_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_batchnorm_backward(POOL(state), n, c, spatial, o[0].f, o[1].f, saved_mean,
                                  saved_invstd, o[2].f, o[3].f, o[4].f, o[5].f, accumulate);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_dropout_forward(void *state, void *queue, uint32_t dtype, float p,
                                    uint64_t seed, uint64_t offset, const void *x, void *y,
                                    uint8_t *mask, size_t n, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_IN(x, dtype, n), ARG_OUT(y, dtype, n)};
    fg_status st = stage(state, queue, "dropout_forward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_dropout_forward(POOL(state), p, seed, offset, o[0].f, o[1].f, mask, n);
    return unstage(state, o, NARGS(o), st);
}

/* The CPU runs each op when called, so the counter is read and advanced then. */
fg_status fg_cpu_op_dropout_forward_dev(void *state, void *queue, uint32_t dtype, float p,
                                        uint64_t seed, uint64_t offset, uint64_t *offset_dev,
                                        uint64_t advance, const void *x, void *y,
                                        uint8_t *mask, size_t n, fg_error *err)
{
    fg_status st = fg_cpu_op_dropout_forward(state, queue, dtype, p, seed, *offset_dev + offset,
                                             x, y, mask, n, err);
    if (st == FG_OK)
        *offset_dev += advance;
    return st;
}

fg_status fg_cpu_op_dropout_backward(void *state, void *queue, uint32_t dtype, float p,
                                     const uint8_t *mask, const void *dy, void *dx, size_t n,
                                     fg_error *err)
{
    fg_cpu_operand o[] = {ARG_IN(dy, dtype, n), ARG_OUT(dx, dtype, n)};
    fg_status st = stage(state, queue, "dropout_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_dropout_backward(POOL(state), p, mask, o[0].f, o[1].f, n);
    return unstage(state, o, NARGS(o), st);
}

/* Every label in [0, classes) or FG_IGNORED_LABEL (the values: the shapes are checked). */
static fg_status check_labels(const char *op, const int32_t *labels, int rows, int classes,
                              fg_error *err)
{
    int64_t bad = fg_cpu_find_bad_label(labels, rows, classes, 1);
    if (bad >= 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "cpu backend: %s: row %lld has label %d, outside [0, %d) (-1: "
                            "ignored)", op, (long long)bad, labels[bad], classes);
    return FG_OK;
}

fg_status fg_cpu_op_softmax_xent_forward(void *state, void *queue, uint32_t logits_dtype,
                                         const void *logits, const int32_t *labels, int rows,
                                         int classes, float *probs, float *loss_sum,
                                         float *correct, fg_error *err)
{
    fg_status st = check_labels("softmax_xent_forward", labels, rows, classes, err);
    if (st != FG_OK)
        return st;
    fg_cpu_operand o[] = {ARG_IN(logits, logits_dtype, volume3(rows, classes, 1))};
    st = stage(state, queue, "softmax_xent_forward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_softmax_xent_forward(POOL(state), o[0].f, labels, rows, classes, probs, loss_sum,
                                    correct);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_softmax_xent_backward(void *state, void *queue, uint32_t dlogits_dtype,
                                          const float *probs, const int32_t *labels, int rows,
                                          int classes, float scale, void *dlogits,
                                          fg_error *err)
{
    fg_status st = check_labels("softmax_xent_backward", labels, rows, classes, err);
    if (st != FG_OK)
        return st;
    fg_cpu_operand o[] = {ARG_OUT(dlogits, dlogits_dtype, volume3(rows, classes, 1))};
    st = stage(state, queue, "softmax_xent_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_softmax_xent_backward(POOL(state), probs, labels, rows, classes, scale, o[0].f);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_classifier(void *state, void *queue, uint32_t dtype, const void *logits,
                               int ld, const int32_t *labels, int rows, int classes,
                               float *loss_sum, float *correct, float grad_scale, void *dlogits,
                               fg_error *err)
{
    fg_status st = check_labels("classifier", labels, rows, classes, err);
    if (st != FG_OK)
        return st;
    /* dlogits may alias logits: each half copy is its own f32 view, written back after */
    size_t n = volume3(rows, ld, 1);
    fg_cpu_operand o[] = {ARG_IN(logits, dtype, n), ARG_OUT(dlogits, dtype, dlogits ? n : 0)};
    st = stage(state, queue, "classifier", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_classifier(POOL(state), o[0].f, ld, labels, rows, classes, loss_sum, correct,
                          grad_scale, dlogits ? o[1].f : NULL);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_pointwise_loss(void *state, void *queue, uint32_t x_dtype, int kind,
                                   const void *x, const float *t, size_t n, float scale,
                                   float *loss_sum, float *metric_sum, float grad_scale,
                                   void *dx, fg_error *err)
{
    /* dx may alias x: each half copy is its own f32 view, written back after the op */
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, n), ARG_OUT(dx, x_dtype, dx ? n : 0)};
    fg_status st = stage(state, queue, "pointwise_loss", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_pointwise_loss(POOL(state), kind, o[0].f, t, n, scale, loss_sum, metric_sum,
                              grad_scale, dx ? o[1].f : NULL);
    return unstage(state, o, NARGS(o), st);
}

/* ---- flat buffers: elementwise, reductions, optimizer updates ------------------------- */

fg_status fg_cpu_op_fill(void *state, void *queue, uint32_t dtype, void *x, float value,
                         size_t n, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_OUT(x, dtype, n)};
    fg_status st = stage(state, queue, "fill", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_fill(POOL(state), o[0].f, value, n);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_scale(void *state, void *queue, uint32_t dtype, void *x, float alpha,
                          size_t n, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_INOUT(x, dtype, n)};
    fg_status st = stage(state, queue, "scale", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_scale(POOL(state), o[0].f, alpha, n);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_axpy(void *state, void *queue, uint32_t x_dtype, uint32_t y_dtype,
                         float alpha, const void *x, void *y, size_t n, fg_error *err)
{
    if (x_dtype == FG_BF16 && y_dtype == FG_BF16) { /* in blocks: the emulation's bits */
        fg_cpu_axpy_bf16(POOL(state), alpha, x, y, n);
        return FG_OK;
    }
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, n), ARG_INOUT(y, y_dtype, n)};
    fg_status st = stage(state, queue, "axpy", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_axpy(POOL(state), alpha, o[0].f, o[1].f, n);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_clamp(void *state, void *queue, uint32_t dtype, void *x, float lo,
                          float hi, size_t n, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_INOUT(x, dtype, n)};
    fg_status st = stage(state, queue, "clamp", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_clamp(POOL(state), o[0].f, lo, hi, n);
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_sum_squares(void *state, void *queue, uint32_t dtype, const void *x,
                                size_t n, float *out, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_IN(x, dtype, n)};
    fg_status st = stage(state, queue, "sum_squares", o, NARGS(o), err);
    if (st == FG_OK)
        *out = n ? (float)fg_cpu_sum_squares(POOL(state), o[0].f, n) : 0.0f;
    return st;
}

fg_status fg_cpu_op_sgd_update(void *state, void *queue, uint32_t param_dtype,
                               uint32_t grad_dtype, const fg_sgd_args *a, void *param,
                               const void *grad, float *momentum_buf, size_t n, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_INOUT(param, param_dtype, n), ARG_IN(grad, grad_dtype, n)};
    fg_status st = stage(state, queue, "sgd_update", o, NARGS(o), err);
    if (st == FG_OK) {
        fg_cpu_sgd s = { a->lr, a->momentum, a->dampening, a->weight_decay, a->nesterov,
                         a->first_step, NULL };
        fg_cpu_sgd_update(POOL(state), &s, o[0].f, o[1].f, momentum_buf, n);
    }
    return unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_adamw_update(void *state, void *queue, uint32_t param_dtype,
                                 uint32_t grad_dtype, const fg_adamw_args *a, void *param,
                                 const void *grad, float *m, float *v, size_t n, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_INOUT(param, param_dtype, n), ARG_IN(grad, grad_dtype, n)};
    fg_status st = stage(state, queue, "adamw_update", o, NARGS(o), err);
    if (st == FG_OK) {
        fg_cpu_adamw s = { a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->step, NULL };
        fg_cpu_adamw_update(POOL(state), &s, o[0].f, o[1].f, m, v, n);
    }
    return unstage(state, o, NARGS(o), st);
}

/* ---- gemm with a fused tail (ABI 1.5) -------------------------------------------------- */

/* bias(m) (+)= the sums of op(A)'s rows over k, in double in k order: bias_grad's sums. */
static fg_status bgradb_sums(void *state, void *queue, uint32_t ab_dtype, uint32_t bias_dtype,
                             int trans_a, int m, int k, const void *a, int lda, void *bias,
                             int accumulate, fg_error *err)
{
    if (trans_a && lda == m) /* A (k, m) packed: a linear's dy, bias_grad over its rows */
        return fg_cpu_op_bias_grad(state, queue, bias_dtype, ab_dtype, bias, a, k, m, 1,
                                   accumulate, err);
    fg_cpu_operand o[] = {ARG_IN(a, ab_dtype, span(trans_a ? k : m, trans_a ? m : k, lda)),
                          ARG_ACC(bias, bias_dtype, (size_t)m, accumulate)};
    fg_status st = stage(state, queue, "gemm_epilogue", o, NARGS(o), err);
    for (int i = 0; st == FG_OK && i < m; i++) {
        double acc = 0.0;
        for (int p = 0; p < k; p++)
            acc += (double)o[0].f[trans_a ? (size_t)p * (size_t)lda + (size_t)i
                                          : (size_t)i * (size_t)lda + (size_t)p];
        o[1].f[i] = accumulate ? (float)((double)o[1].f[i] + acc) : (float)acc;
    }
    return unstage(state, o, NARGS(o), st);
}

/* All f32 and packed under gemm = openblas: the fc's bias and GELU in one pass
 * (kernels/cpu/gelu_fused.c), the same bits as gemm_bias's product, its bias pass and the
 * GELU below (oneDNN's gemm_bias adds the bias inside the matmul: not split there). */
static int f32_bias_gelu_fusable(void *state, uint32_t ab_dtype, uint32_t c_dtype,
                                 uint32_t bias_dtype, int m, int n, int ldc, int ldaux)
{
    return ab_dtype == FG_F32 && c_dtype == FG_F32 && bias_dtype == FG_F32 && ldc == n &&
           ldaux == n && m > 0 && n > 0 &&
           ((fg_cpu_backend *)state)->gemm_mode == FG_CPU_GEMM_OPENBLAS;
}

/* The separate ops in the order the model ran them before this op, so a model that
 * switches to it computes the same bits: gemm_bias then activation_forward; gemm,
 * activation_backward then bias_grad over C; gemm then bias_grad over A. The pointwise
 * passes take packed rows (ldc == n, ldaux == n); other strides run row by row. */
fg_status fg_cpu_op_gemm_epilogue(void *state, void *queue, uint32_t ab_dtype,
                                  uint32_t c_dtype, uint32_t bias_dtype, int epilogue,
                                  int trans_a, int trans_b, int m, int n, int k, const void *a,
                                  int lda, const void *b, int ldb, void *c, int ldc, void *aux,
                                  int ldaux, void *bias, int accumulate, fg_error *err)
{
    size_t es = c_dtype == FG_F32 ? 4 : 2;
    int packed = ldc == n && ldaux == n;
    int rows = packed ? 1 : m;
    size_t len = packed ? (size_t)m * (size_t)n : (size_t)n;
    fg_status st = FG_OK;
    if (epilogue == FG_EPI_BIAS || epilogue == FG_EPI_GELU_AUX_BIAS) {
        if (bias_dtype != ab_dtype)
            return fg_error_set(err, FG_UNAVAILABLE, "cpu backend: gemm_epilogue: a %s bias "
                                "with %s operands (the bias takes the operands' dtype here)",
                                fg_dtype_name((fg_dtype)bias_dtype),
                                fg_dtype_name((fg_dtype)ab_dtype));
        int gelu = epilogue == FG_EPI_GELU_AUX_BIAS;
        if (gelu && f32_bias_gelu_fusable(state, ab_dtype, c_dtype, bias_dtype, m, n, ldc, ldaux)) {
            st = fg_cpu_op_gemm(state, queue, ab_dtype, ab_dtype, c_dtype, trans_a, trans_b, m,
                                n, k, 1.0f, a, lda, b, ldb, 0.0f, aux, ldaux, err);
            if (st == FG_OK)
                fg_cpu_bias_gelu_forward(POOL(state), m, n, bias, aux, c);
            return st;
        }
        st = fg_cpu_op_gemm_bias(state, queue, ab_dtype, ab_dtype, c_dtype, trans_a, trans_b, m,
                                 n, k, a, lda, b, ldb, bias, gelu ? aux : c, gelu ? ldaux : ldc,
                                 err);
        for (int r = 0; gelu && st == FG_OK && r < rows; r++)
            st = fg_cpu_op_activation_forward(state, queue, c_dtype, FG_ACT_GELU,
                                              (char *)aux + (size_t)r * (size_t)ldaux * es,
                                              (char *)c + (size_t)r * (size_t)ldc * es, len,
                                              err);
        return st;
    }
    if (epilogue == FG_EPI_DGELU_BGRAD) {
        st = fg_cpu_op_gemm(state, queue, ab_dtype, ab_dtype, c_dtype, trans_a, trans_b, m, n, k,
                            1.0f, a, lda, b, ldb, 0.0f, c, ldc, err);
        for (int r = 0; st == FG_OK && r < rows; r++) {
            void *cr = (char *)c + (size_t)r * (size_t)ldc * es;
            st = fg_cpu_op_activation_backward(state, queue, c_dtype, FG_ACT_GELU,
                                               (char *)aux + (size_t)r * (size_t)ldaux * es,
                                               NULL, cr, cr, len, err);
        }
        if (st == FG_OK && ldc == n)
            return fg_cpu_op_bias_grad(state, queue, bias_dtype, c_dtype, bias, c, m, n, 1,
                                       accumulate, err);
        /* the columns of C with ldc > n: C^T's rows, as BGRADB's sums over a transposed A */
        return st == FG_OK ? bgradb_sums(state, queue, c_dtype, bias_dtype, 1, n, m, c, ldc,
                                         bias, accumulate, err)
                           : st;
    }
    st = fg_cpu_op_gemm(state, queue, ab_dtype, ab_dtype, c_dtype, trans_a, trans_b, m, n, k,
                        1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc, err);
    return st == FG_OK ? bgradb_sums(state, queue, ab_dtype, bias_dtype, trans_a, m, k, a, lda,
                                     bias, accumulate, err)
                       : st;
}
