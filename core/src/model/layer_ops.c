/* The backend ops as layers call them: the fp32 op when the context is all f32 (c->dt NULL),
 * its _ex variant in the context's dtypes otherwise. One place decides, so a layer's code
 * is the same in every precision. */
#include "layer.h"

#define NEED_EX(c, fn, err)                                                                  \
    do {                                                                                     \
        if (!FG_BACKEND_HAS((c)->be, fn))                                                    \
            return fg_error_set(err, FG_UNAVAILABLE,                                         \
                                "the backend does not implement %s (needed for %s "          \
                                "activations)", #fn, fg_dtype_name((fg_dtype)(c)->dt->act)); \
    } while (0)

static uint32_t role_dtype(const fg_op_dtypes *dt, fg_tensor_role r)
{
    return r == FG_ROLE_PARAM ? dt->param : r == FG_ROLE_GRAD ? dt->grad : dt->act;
}

fg_status fg_op_gemm(const fg_layer_ctx *c, int trans_a, int trans_b, int m, int n, int k,
                     float alpha, const void *a, fg_tensor_role ra, int lda, const void *b,
                     fg_tensor_role rb, int ldb, float beta, void *cm, fg_tensor_role rc,
                     int ldc, fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, gemm, err);
        return c->be->gemm(c->bs, c->queue, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                           beta, cm, ldc, err);
    }
    NEED_EX(c, gemm_ex, err);
    return c->be->gemm_ex(c->bs, c->queue, trans_a, trans_b, m, n, k, alpha, a,
                          role_dtype(c->dt, ra), lda, b, role_dtype(c->dt, rb), ldb, beta, cm,
                          role_dtype(c->dt, rc), ldc, err);
}

fg_status fg_op_bias_add(const fg_layer_ctx *c, void *y, const void *bias, int rows, int cols,
                         int spatial, fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, bias_add, err);
        return c->be->bias_add(c->bs, c->queue, y, bias, rows, cols, spatial, err);
    }
    NEED_EX(c, bias_add_ex, err);
    return c->be->bias_add_ex(c->bs, c->queue, c->dt, y, bias, rows, cols, spatial, err);
}

fg_status fg_op_bias_grad(const fg_layer_ctx *c, void *dbias, const void *dy, int rows,
                          int cols, int spatial, fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, bias_grad, err);
        return c->be->bias_grad(c->bs, c->queue, dbias, dy, rows, cols, spatial, c->accumulate,
                                err);
    }
    NEED_EX(c, bias_grad_ex, err);
    return c->be->bias_grad_ex(c->bs, c->queue, c->dt, dbias, dy, rows, cols, spatial,
                               c->accumulate, err);
}

fg_status fg_op_activation_forward(const fg_layer_ctx *c, int act, size_t n, fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, activation_forward, err);
        return c->be->activation_forward(c->bs, c->queue, act, c->x, c->y, n, err);
    }
    NEED_EX(c, activation_forward_ex, err);
    return c->be->activation_forward_ex(c->bs, c->queue, c->dt, act, c->x, c->y, n, err);
}

fg_status fg_op_activation_backward(const fg_layer_ctx *c, int act, size_t n, fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, activation_backward, err);
        return c->be->activation_backward(c->bs, c->queue, act, c->x, c->y, c->dy, c->dx, n,
                                          err);
    }
    NEED_EX(c, activation_backward_ex, err);
    return c->be->activation_backward_ex(c->bs, c->queue, c->dt, act, c->x, c->y, c->dy, c->dx,
                                         n, err);
}

fg_status fg_op_conv2d_forward(const fg_layer_ctx *c, const fg_conv2d_desc *d,
                               const void *bias, fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, conv2d_forward, err);
        return c->be->conv2d_forward(c->bs, c->queue, d, c->x, c->param[0], bias, c->y,
                                     c->workspace, err);
    }
    NEED_EX(c, conv2d_forward_ex, err);
    return c->be->conv2d_forward_ex(c->bs, c->queue, c->dt, d, c->x, c->param[0], bias, c->y,
                                    c->workspace, err);
}

fg_status fg_op_conv2d_backward(const fg_layer_ctx *c, const fg_conv2d_desc *d, void *dbias,
                                fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, conv2d_backward, err);
        return c->be->conv2d_backward(c->bs, c->queue, d, c->x, c->param[0], c->dy, c->dx,
                                      c->grad[0], dbias, c->accumulate, c->workspace, err);
    }
    NEED_EX(c, conv2d_backward_ex, err);
    return c->be->conv2d_backward_ex(c->bs, c->queue, c->dt, d, c->x, c->param[0], c->dy, c->dx,
                                     c->grad[0], dbias, c->accumulate, c->workspace, err);
}

fg_status fg_op_pool2d_forward(const fg_layer_ctx *c, int mode, const fg_conv2d_desc *d,
                               int32_t *argmax, fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, pool2d_forward, err);
        return c->be->pool2d_forward(c->bs, c->queue, mode, d, c->x, c->y, argmax, err);
    }
    NEED_EX(c, pool2d_forward_ex, err);
    return c->be->pool2d_forward_ex(c->bs, c->queue, c->dt, mode, d, c->x, c->y, argmax, err);
}

fg_status fg_op_pool2d_backward(const fg_layer_ctx *c, int mode, const fg_conv2d_desc *d,
                                const int32_t *argmax, fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, pool2d_backward, err);
        return c->be->pool2d_backward(c->bs, c->queue, mode, d, c->dy, argmax, c->dx, err);
    }
    NEED_EX(c, pool2d_backward_ex, err);
    return c->be->pool2d_backward_ex(c->bs, c->queue, c->dt, mode, d, c->dy, argmax, c->dx,
                                     err);
}

fg_status fg_op_batchnorm_forward(const fg_layer_ctx *c, int n, int ch, int spatial,
                                  float momentum, float eps, float *saved_mean,
                                  float *saved_invstd, fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, batchnorm_forward, err);
        return c->be->batchnorm_forward(c->bs, c->queue, c->training, n, ch, spatial, c->x,
                                        c->param[0], c->param[1], c->buffer[0], c->buffer[1],
                                        momentum, eps, saved_mean, saved_invstd, c->y, err);
    }
    NEED_EX(c, batchnorm_forward_ex, err);
    return c->be->batchnorm_forward_ex(c->bs, c->queue, c->dt, c->training, n, ch, spatial,
                                       c->x, c->param[0], c->param[1], c->buffer[0],
                                       c->buffer[1], momentum, eps, saved_mean, saved_invstd,
                                       c->y, err);
}

fg_status fg_op_batchnorm_backward(const fg_layer_ctx *c, int n, int ch, int spatial,
                                   const float *saved_mean, const float *saved_invstd,
                                   fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, batchnorm_backward, err);
        return c->be->batchnorm_backward(c->bs, c->queue, n, ch, spatial, c->x, c->param[0],
                                         saved_mean, saved_invstd, c->dy, c->dx, c->grad[0],
                                         c->grad[1], c->accumulate, err);
    }
    NEED_EX(c, batchnorm_backward_ex, err);
    return c->be->batchnorm_backward_ex(c->bs, c->queue, c->dt, n, ch, spatial, c->x,
                                        c->param[0], saved_mean, saved_invstd, c->dy, c->dx,
                                        c->grad[0], c->grad[1], c->accumulate, err);
}

fg_status fg_op_dropout_forward(const fg_layer_ctx *c, float p, uint8_t *mask, size_t n,
                                fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, dropout_forward, err);
        return c->be->dropout_forward(c->bs, c->queue, p, c->dropout_seed, c->dropout_offset,
                                      c->x, c->y, mask, n, err);
    }
    NEED_EX(c, dropout_forward_ex, err);
    return c->be->dropout_forward_ex(c->bs, c->queue, c->dt, p, c->dropout_seed,
                                     c->dropout_offset, c->x, c->y, mask, n, err);
}

fg_status fg_op_dropout_backward(const fg_layer_ctx *c, float p, const uint8_t *mask, size_t n,
                                 fg_error *err)
{
    if (!c->dt) {
        FG_BACKEND_NEED(c->be, dropout_backward, err);
        return c->be->dropout_backward(c->bs, c->queue, p, mask, c->dy, c->dx, n, err);
    }
    NEED_EX(c, dropout_backward_ex, err);
    return c->be->dropout_backward_ex(c->bs, c->queue, c->dt, p, mask, c->dy, c->dx, n, err);
}
