/* The affine map of linear layers and the transformer block's projections:
 * y(rows, out) = x(rows, in) W(out, in)^T + b(out), rows of y ldy apart (out, or an output
 * layer's padded logits). With the backend's gemm_bias (ABI 1.2)
 * for these dtypes the bias is added to the product's f32 accumulator and y rounded once,
 * as PyTorch's autocast addmm; otherwise gemm writes y and bias_add adds to it (for a half
 * y: rounded, then the bias added and rounded again). In f32 both are the same sum.
 * Backward's weight gradients likewise: the backend's gemm_epilogue with the BGRADB tail
 * (ABI 1.5: the bias gradient from the gemm's dy operand) or gemm then bias_grad. */
#include "model.h"

fg_status fg_affine_forward(const fg_layer_ctx *c, int rows, int out, int in, const void *x,
                            const void *w, const void *b, void *y, int ldy, fg_error *err)
{
    uint32_t act = c->dt.act, param = c->dt.param;
    const uint32_t dtypes[3] = {act, param, act};
    if (b && fg_backend_can(c->be, c->bs, FG_OP_GEMM_BIAS, dtypes))
        return FG_OP(c, err, gemm_bias, act, param, act, 0, 1, rows, out, in, x, in, w, in, b,
                     y, ldy);
    if (b && ldy != out) /* bias_add takes packed rows; the model refuses this beforehand */
        return fg_error_set(err, FG_UNAVAILABLE, "a bias on padded rows needs gemm_bias");
    fg_status st = FG_OP(c, err, gemm, act, param, act, 0, 1, rows, out, in, 1.0f, x, in, w,
                         in, 0.0f, y, ldy);
    if (st == FG_OK && b)
        st = FG_OP(c, err, bias_add, act, param, y, b, rows, out, 1);
    return st;
}

fg_status fg_affine_weight_grads(const fg_layer_ctx *c, int rows, int out, int in,
                                 const void *x, const void *dy, int ldy, void *dw, void *db,
                                 fg_error *err)
{
    uint32_t act = c->dt.act, grad = c->dt.grad;
    const uint32_t dtypes[3] = {act, grad, grad};
    if (db && fg_backend_can(c->be, c->bs, FG_OP_GEMM_EPILOGUE, dtypes))
        return FG_OP(c, err, gemm_epilogue, act, grad, grad, FG_EPI_BGRADB, 1, 0, out, in, rows,
                     dy, ldy, x, in, dw, in, NULL, 0, db, c->accumulate);
    float beta = c->accumulate ? 1.0f : 0.0f;
    fg_status st = FG_OP(c, err, gemm, act, act, grad, 1, 0, out, in, rows, 1.0f, dy, ldy, x,
                         in, beta, dw, in);
    if (st == FG_OK && db)
        st = FG_OP(c, err, bias_grad, grad, act, db, dy, rows, out, 1, c->accumulate);
    return st;
}
