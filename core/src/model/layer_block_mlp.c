/* The transformer block's MLP, forward and backward: GPT-2's GELU (tanh) MLP,
 * proj(gelu(fc(h))), or Llama's SwiGLU, down(silu(gate(h)) * up(h)). Where the backend has
 * gemm_epilogue (ABI 1.5) for the dtypes and the linears have biases, the GELU, its
 * backward and fc's bias gradient ride on the gemms (cuBLASLt's epilogues on CUDA); the
 * CPU backend's op is the separate ops in the same order, so its bits do not change. A
 * projection in fp8 (layer_block.h's maps) runs unfused: gemm_fp8, then the tail's ops. */
#include "layer_block.h"

/* Whether the backend fuses gemm tails (gemm_epilogue, ABI 1.5) for these dtypes: operands
 * ab, output c, bias. Without it the separate ops run, the same maths. */
static int block_fuses(const fg_layer_ctx *c, uint32_t ab, uint32_t out, uint32_t bias)
{
    const uint32_t dtypes[3] = {ab, out, bias};
    return fg_backend_can(c->be, c->bs, FG_OP_GEMM_EPILOGUE, dtypes);
}

/* f = h W^T + b kept for backward, g = gelu(f); one gemm with the GELU_AUX_BIAS tail where
 * the backend has it (its operands share a dtype, and the bias is there). */
static fg_status fc_gelu(const fg_layer_ctx *c, const fg_fp8_map *f8, int rows, int F, int C,
                         const void *h, void *w, void *b, void *f, void *g, fg_error *err)
{
    uint32_t act = c->dt.act, param = c->dt.param;
    if (b && act == param && !fg_fp8_runs(f8, c, rows, f) && block_fuses(c, act, act, param))
        return FG_OP(c, err, gemm_epilogue, act, act, param, FG_EPI_GELU_AUX_BIAS, 0, 1, rows, F,
                     C, h, C, w, C, g, F, f, F, b, 0);
    fg_status st = fg_block_linear(c, f8, rows, F, C, h, w, b, f, err);
    if (st == FG_OK)
        st = FG_OP(c, err, activation_forward, act, FG_ACT_GELU, f, g,
                   (size_t)rows * (size_t)F);
    return st;
}

/* gate f = h Wg^T (+ b), up u = h Wu^T (+ b), g = silu(f) * u */
static fg_status gate_up(const fg_layer *l, const fg_layer_ctx *c, int rows, int F, int C,
                         void *const *p, const void *h, void *f, void *u, void *g, fg_error *err)
{
    fg_fp8_map gate = fg_block_fp8(l, c, BLOCK_FP8_FC), up = fg_block_fp8(l, c, BLOCK_FP8_UP);
    fg_status st = fg_block_linear(c, &gate, rows, F, C, h, p[FC_W], p[FC_B], f, err);
    if (st == FG_OK)
        st = fg_block_linear(c, &up, rows, F, C, h, p[UP_W], p[UP_B], u, err);
    if (st == FG_OK)
        st = FG_OP(c, err, swiglu_forward, c->dt.act, f, u, g, (size_t)rows * (size_t)F);
    return st;
}

fg_status fg_block_mlp_hidden(const fg_layer *l, const fg_layer_ctx *c, int rows,
                              void *const *p, const void *h, void *f, void *u, void *g,
                              fg_error *err)
{
    block_dims d = fg_block_dims(l);
    if (l->swiglu)
        return gate_up(l, c, rows, d.F, d.C, p, h, f, u, g, err);
    fg_fp8_map fc = fg_block_fp8(l, c, BLOCK_FP8_FC);
    return fc_gelu(c, &fc, rows, d.F, d.C, h, p[FC_W], p[FC_B], f, g, err);
}

/* df = (dy W_proj) * gelu'(f) and fc's bias gradient when the backend fuses them
 * (DGELU_BGRAD); *fused says whether it did (else the caller takes fc's bias gradient). */
static fg_status dgelu(const fg_layer_ctx *c, const fg_fp8_map *down, int rows, int F, int C,
                       const void *dy, const void *w_proj, const void *f, const void *g,
                       void *df, void *db_fc, int *fused, fg_error *err)
{
    uint32_t act = c->dt.act, param = c->dt.param, grad = c->dt.grad;
    *fused = db_fc && act == param && !fg_fp8_runs(down, c, rows, df) &&
             block_fuses(c, act, act, grad);
    if (*fused)
        return FG_OP(c, err, gemm_epilogue, act, act, grad, FG_EPI_DGELU_BGRAD, 0, 0, rows, F, C,
                     dy, C, w_proj, F, df, F, (void *)f, F, db_fc, c->accumulate);
    fg_status st = fg_block_linear_bwd_input(c, down, rows, C, F, w_proj, dy, 0.0f, df, err);
    if (st == FG_OK)
        st = FG_OP(c, err, activation_backward, act, FG_ACT_GELU, f, g, df, df,
                   (size_t)rows * (size_t)F);
    return st;
}

static fg_status gelu_backward(const fg_layer *l, const block_dims *d, const fg_layer_ctx *c,
                               int rows, void *const *p, void *const *g, const block_saved *s,
                               const void *dy, void *df, void *dh, fg_error *err)
{
    int fused = 0;
    fg_fp8_map fc = fg_block_fp8(l, c, BLOCK_FP8_FC), down = fg_block_fp8(l, c, BLOCK_FP8_DOWN);
    fg_status st = dgelu(c, &down, rows, d->F, d->C, dy, p[MPROJ_W], s->f, s->g, df, g[FC_B],
                         &fused, err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_weights(c, &fc, rows, d->F, d->C, s->h2, df, g[FC_W],
                                          fused ? NULL : g[FC_B], err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_input(c, &fc, rows, d->F, d->C, p[FC_W], df, 0.0f, dh, err);
    return st;
}

/* dg = dy W_down; (dgate, dup) from it (dgate over dg); the gate and up projections'
 * parameter gradients; dh = dgate W_gate + dup W_up. */
static fg_status swiglu_backward(const fg_layer *l, const block_dims *d, const fg_layer_ctx *c,
                                 int rows, void *const *p, void *const *g, const block_saved *s,
                                 const void *dy, void *hidden, void *dh, fg_error *err)
{
    size_t n = (size_t)rows * (size_t)d->F;
    void *dgate = hidden, *dup = (float *)hidden + n;
    fg_fp8_map gate = fg_block_fp8(l, c, BLOCK_FP8_FC), up = fg_block_fp8(l, c, BLOCK_FP8_UP);
    fg_fp8_map down = fg_block_fp8(l, c, BLOCK_FP8_DOWN);
    fg_status st = fg_block_linear_bwd_input(c, &down, rows, d->C, d->F, p[MPROJ_W], dy, 0.0f,
                                             dgate, err);
    if (st == FG_OK)
        st = FG_OP(c, err, swiglu_backward, c->dt.act, s->f, s->u, dgate, dgate, dup, n);
    if (st == FG_OK)
        st = fg_block_linear_bwd_weights(c, &gate, rows, d->F, d->C, s->h2, dgate, g[FC_W],
                                          g[FC_B], err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_weights(c, &up, rows, d->F, d->C, s->h2, dup, g[UP_W], g[UP_B],
                                          err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_input(c, &gate, rows, d->F, d->C, p[FC_W], dgate, 0.0f, dh, err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_input(c, &up, rows, d->F, d->C, p[UP_W], dup, 1.0f, dh, err);
    return st;
}

fg_status fg_block_mlp_backward(const fg_layer *l, const fg_layer_ctx *c, int rows,
                                void *const *p, void *const *g, const block_saved *s,
                                const void *dy, void *hidden, void *dh, fg_error *err)
{
    block_dims d = fg_block_dims(l);
    fg_fp8_map down = fg_block_fp8(l, c, BLOCK_FP8_DOWN);
    fg_status st = fg_block_linear_bwd_weights(c, &down, rows, d.C, d.F, s->g, dy, g[MPROJ_W],
                                               g[MPROJ_B], err);
    if (st != FG_OK)
        return st;
    if (l->swiglu)
        return swiglu_backward(l, &d, c, rows, p, g, s, dy, hidden, dh, err);
    return gelu_backward(l, &d, c, rows, p, g, s, dy, hidden, dh, err);
}
