/* The transformer block's linear maps (a weight, an optional bias) and its rotary step, as
 * backend ops in the context's dtypes: what layer_block.c, layer_block_mlp.c and
 * layer_block_decode.c share; a map in fp8 runs through linear_fp8.c's helper. */
#include "layer_block.h"

fg_status fg_block_linear(const fg_layer_ctx *c, const fg_fp8_map *f8, int rows, int out,
                          int in, const void *x, const void *w, const void *b, void *y,
                          fg_error *err)
{
    if (fg_fp8_runs(f8, c, rows, y))
        return fg_fp8_forward(f8, c, rows, out, in, x, w, b, y, out, err);
    return fg_affine_forward(c, rows, out, in, x, w, b, y, out, err);
}

fg_status fg_block_linear_bwd_weights(const fg_layer_ctx *c, const fg_fp8_map *f8, int rows,
                                      int out, int in, const void *x, const void *dy, void *dw,
                                      void *db, fg_error *err)
{
    if (fg_fp8_runs(f8, c, rows, dw))
        return fg_fp8_weight_grads(f8, c, rows, out, in, x, dy, out, dw, db, err);
    return fg_affine_weight_grads(c, rows, out, in, x, dy, out, dw, db, err);
}

fg_status fg_block_linear_bwd_input(const fg_layer_ctx *c, const fg_fp8_map *f8, int rows,
                                    int out, int in, const void *w, const void *dy, float beta,
                                    void *dx, fg_error *err)
{
    if (fg_fp8_runs(f8, c, rows, dx))
        return fg_fp8_input_grad(f8, c, rows, out, in, w, dy, out, beta, dx, err);
    uint32_t act = c->dt.act, param = c->dt.param;
    return FG_OP(c, err, gemm, act, param, act, 0, 0, rows, in, out, 1.0f, dy, out, w, in, beta,
                 dx, in);
}

fg_status fg_block_rope(const fg_layer *l, const fg_layer_ctx *c, int backward, int rows,
                        int seq, int pos0, void *qkv, fg_error *err)
{
    if (!l->rope)
        return FG_OK;
    block_dims d = fg_block_dims(l);
    if (l->rope_scaling && backward)
        return FG_OP(c, err, rope_freq_backward, c->dt.act, rows, seq, pos0, d.H + d.KV, d.D,
                     d.Q, l->rope_inv_freq, qkv);
    if (l->rope_scaling)
        return FG_OP(c, err, rope_freq_forward, c->dt.act, rows, seq, pos0, d.H + d.KV, d.D,
                     d.Q, l->rope_inv_freq, qkv);
    float theta = (float)l->rope_theta;
    if (backward)
        return FG_OP(c, err, rope_backward, c->dt.act, rows, seq, pos0, d.H + d.KV, d.D, d.Q,
                     theta, qkv);
    return FG_OP(c, err, rope_forward, c->dt.act, rows, seq, pos0, d.H + d.KV, d.D, d.Q, theta,
                 qkv);
}
