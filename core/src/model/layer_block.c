/* A pre-norm transformer block: y = x2 + mlp(norm_2(x2)), x2 = x + attn(norm_1(x)), with
 * causal self-attention over a fused QKV projection. Its defaults are GPT-2's: LayerNorm,
 * biases, multi-head attention, a GELU (tanh) MLP of mlp_ratio * C hidden units, positions
 * from a position_embedding layer. Llama's options: norm = rmsnorm, bias = false, kv_heads
 * (grouped-query attention: the projection gives (heads + 2 kv_heads) head_dim), position =
 * rope (q and k rotated in place in the saved qkv, so the KV cache holds rotated keys; the
 * backward rotates dq and dk back), mlp = swiglu with mlp_hidden (layer_block_mlp.c).
 * Its keys and tensors are layer_block_keys.c's.
 * Input and output (T, C). Its tensors are named as PyTorch's state dict of such a module:
 * ln_1.weight, attn.qkv.weight, attn.proj.bias, mlp.fc.weight, ... and with SwiGLU
 * mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight as Hugging Face Llama (a
 * block named h.3 gives h.3.attn.qkv.weight).
 *
 * Forward keeps what backward reads in the layer's arena (layer_block.h): the norms' outputs
 * and statistics, qkv, the attention output and its log-sum-exp, x2, the MLP's hidden
 * tensors. Backward's intermediate gradients live in the shared workspace.
 *
 * With recompute, the block keeps nothing of its own: its input is the previous layer's
 * output, which stays in the arena anyway. Forward writes the saved tensors into the
 * front of the shared workspace (one set for every block, overwritten by the next one),
 * and backward runs forward again into it up to the MLP's hidden output before going back.
 * The same ops on the same inputs give the same bits, and the attention dropout mask is
 * keyed by (seed, layer, step, sample), not drawn from a stream, so it is the same mask.
 * Such a block keeps no K and V for fulgur generate's cache (decode.c refuses it). */
#include "layer_block.h"

fg_attention_desc fg_block_attention_desc(const fg_layer *l, const fg_layer_ctx *c)
{
    block_dims d = fg_block_dims(l);
    fg_attention_desc a = {sizeof a, c->batch, d.T, d.H, d.D, l->causal, 0.0f, 0, 0, d.KV};
    if (c->training && l->p > 0) {
        /* the replica's offset is (step << 32) + first sample * T * C: re-based to this
         * layer's draws, T * T per head per sample */
        uint64_t first = (c->dropout_offset & 0xffffffffull) / d.n;
        a.dropout = (float)l->p;
        a.seed = c->dropout_seed;
        a.offset = (c->dropout_offset & ~0xffffffffull) +
                   first * (uint64_t)d.H * (uint64_t)d.T * (uint64_t)d.T;
    }
    return a;
}

/* The workspace at a batch: [saved tensors, recompute only, to a 64-byte boundary]
 * [backward's gradients, fg_block_grad_values per sample] [the attention's own]. */
static size_t saved_scratch(const fg_layer *l, int batch)
{
    block_dims d = fg_block_dims(l);
    return l->recompute ? ((size_t)batch * fg_block_saved_bytes(&d) + 63) / 64 * 64 : 0;
}

static float *grad_scratch(const fg_layer *l, const fg_layer_ctx *c)
{
    return (float *)((char *)c->workspace + saved_scratch(l, c->batch));
}

void *fg_block_attention_workspace(const fg_layer *l, const fg_layer_ctx *c)
{
    block_dims d = fg_block_dims(l);
    return grad_scratch(l, c) + (size_t)c->batch * fg_block_grad_values(&d);
}

static size_t block_workspace(const fg_layer *l, const fg_backend_vtable *be, void *bs,
                              int batch)
{
    block_dims d = fg_block_dims(l);
    fg_layer_ctx c = {.batch = batch};
    fg_attention_desc a = fg_block_attention_desc(l, &c);
    size_t attn = FG_BACKEND_HAS(be, attention_workspace) ? be->attention_workspace(bs, &a) : 0;
    return saved_scratch(l, batch) + (size_t)batch * fg_block_grad_values(&d) * sizeof(float) +
           attn;
}

/* x2 += x, then h = the norm of x2 (ln_2): one op when the backend fuses them (ABI 1.5),
 * else axpy then layernorm_forward (the same bits). */
static fg_status block_residual_norm(const fg_layer *l, const fg_layer_ctx *c, int rows,
                                     int cols, const void *x, void *x2, const void *w,
                                     const void *b, float *mean, float *rstd, void *h,
                                     fg_error *err)
{
    uint32_t act = c->dt.act, param = c->dt.param;
    const uint32_t dtypes[2] = {act, param};
    if (fg_backend_can(c->be, c->bs, FG_OP_LAYERNORM_RESIDUAL_FORWARD, dtypes))
        return FG_OP(c, err, layernorm_residual_forward, act, param, l->rms, rows, cols, x, x2,
                     x2, w, b, (float)l->eps, mean, rstd, h);
    fg_status st = FG_OP(c, err, axpy, act, act, 1.0f, x, x2, (size_t)rows * (size_t)cols);
    if (st == FG_OK)
        st = FG_OP(c, err, layernorm_forward, act, param, l->rms, rows, cols, x2, w, b,
                   (float)l->eps, mean, rstd, h);
    return st;
}

/* dx = the norm's dx from dh + dres (the residual stream's gradient), and the norm's
 * parameter gradients: one op when the backend fuses them (ABI 1.5), else
 * layernorm_backward then axpy (the same bits). dx NULL: the parameter gradients only. */
static fg_status block_norm_backward(const fg_layer *l, const fg_layer_ctx *c, int rows,
                                     int cols, const void *x, const void *w, const float *mean,
                                     const float *rstd, const void *dh, const void *dres,
                                     void *dx, void *dw, void *db, fg_error *err)
{
    uint32_t act = c->dt.act, param = c->dt.param, grad = c->dt.grad;
    const uint32_t dtypes[3] = {act, param, grad};
    if (dx && fg_backend_can(c->be, c->bs, FG_OP_LAYERNORM_RESIDUAL_BACKWARD, dtypes))
        return FG_OP(c, err, layernorm_residual_backward, act, param, grad, l->rms, rows, cols,
                     x, w, mean, rstd, dh, dres, dx, dw, db, c->accumulate);
    fg_status st = FG_OP(c, err, layernorm_backward, act, param, grad, l->rms, rows, cols, x, w,
                         mean, rstd, dh, dx, dw, db, c->accumulate);
    if (st == FG_OK && dx)
        st = FG_OP(c, err, axpy, act, act, 1.0f, dres, dx, (size_t)rows * (size_t)cols);
    return st;
}

/* Forward up to the MLP's hidden output: every tensor backward reads, into s. */
static fg_status block_activations(const fg_layer *l, const fg_layer_ctx *c, block_saved s,
                                   fg_error *err)
{
    block_dims d = fg_block_dims(l);
    int rows = c->batch * d.T;
    uint32_t act = c->dt.act, param = c->dt.param;
    if (c->training && l->p > 0 && c->dropout_offset_dev)
        return fg_error_set(err, FG_UNAVAILABLE, "[%s] attn_dropout = %g: the attention op "
                            "takes its dropout offset by value, which a CUDA graph cannot "
                            "replay", l->section, l->p);
    fg_attention_desc a = fg_block_attention_desc(l, c);
    void *p[BLOCK_TENSORS];
    fg_block_params(l, c->param, p);
    void *ws_attn = fg_block_attention_workspace(l, c);
    fg_fp8_map qkv = fg_block_fp8(l, c, BLOCK_FP8_QKV), proj = fg_block_fp8(l, c, BLOCK_FP8_PROJ);
    fg_status st = FG_OP(c, err, layernorm_forward, act, param, l->rms, rows, d.C, c->x,
                         p[LN1_W], p[LN1_B], (float)l->eps, s.mean1, s.rstd1, s.h1);
    if (st == FG_OK)
        st = fg_block_linear(c, &qkv, rows, d.Q, d.C, s.h1, p[QKV_W], p[QKV_B], s.qkv, err);
    if (st == FG_OK)
        st = fg_block_rope(l, c, 0, rows, d.T, 0, s.qkv, err);
    if (st == FG_OK)
        st = FG_OP(c, err, attention_forward, act, &a, s.qkv, s.att, s.lse, ws_attn);
    if (st == FG_OK)
        st = fg_block_linear(c, &proj, rows, d.C, d.C, s.att, p[PROJ_W], p[PROJ_B], s.x2, err);
    if (st == FG_OK)
        st = block_residual_norm(l, c, rows, d.C, c->x, s.x2, p[LN2_W], p[LN2_B], s.mean2,
                                 s.rstd2, s.h2, err);
    if (st == FG_OK)
        st = fg_block_mlp_hidden(l, c, rows, p, s.h2, s.f, s.u, s.g, err);
    return st;
}

static fg_status block_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    block_dims d = fg_block_dims(l);
    block_saved s = fg_block_saved(l, c);
    int rows = c->batch * d.T;
    size_t n = (size_t)rows * (size_t)d.C;
    uint32_t act = c->dt.act;
    void *p[BLOCK_TENSORS];
    fg_block_params(l, c->param, p);
    fg_fp8_map down = fg_block_fp8(l, c, BLOCK_FP8_DOWN);
    fg_status st = block_activations(l, c, s, err);
    if (st == FG_OK)
        st = fg_block_linear(c, &down, rows, d.C, d.F, s.g, p[MPROJ_W], p[MPROJ_B], c->y, err);
    if (st == FG_OK)
        st = FG_OP(c, err, axpy, act, act, 1.0f, s.x2, c->y, n);
    return st;
}

/* The gradient scratch, per the batch: [the MLP's hidden: NF - 1 of (T, F)] [dB (T, C)]
 * [dC (T, C)] [dD (T, Q)]; dB holds dh2, then datt, then dh1; dC dx2; dD dqkv. */
static fg_status block_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    block_dims d = fg_block_dims(l);
    block_saved s = fg_block_saved(l, c);
    int rows = c->batch * d.T;
    uint32_t act = c->dt.act;
    fg_attention_desc a = fg_block_attention_desc(l, c);
    void *p[BLOCK_TENSORS], *g[BLOCK_TENSORS];
    fg_block_params(l, c->param, p);
    fg_block_params(l, c->grad, g);
    float *ws = grad_scratch(l, c);
    size_t bn = (size_t)c->batch * d.n;
    size_t hidden = (size_t)(d.NF - 1) * (size_t)rows * (size_t)d.F;
    void *dA = ws, *dB = ws + hidden, *dC = ws + hidden + bn, *dD = ws + hidden + 2 * bn;
    void *ws_attn = fg_block_attention_workspace(l, c);
    fg_fp8_map qkv = fg_block_fp8(l, c, BLOCK_FP8_QKV), proj = fg_block_fp8(l, c, BLOCK_FP8_PROJ);
    fg_status st = l->recompute ? block_activations(l, c, s, err) : FG_OK;
    /* MLP: dy -> dh2 */
    if (st == FG_OK)
        st = fg_block_mlp_backward(l, c, rows, p, g, &s, c->dy, dA, dB, err);
    /* dx2 = ln_2'(dh2) + dy */
    if (st == FG_OK)
        st = block_norm_backward(l, c, rows, d.C, s.x2, p[LN2_W], s.mean2, s.rstd2, dB, c->dy,
                                 dC, g[LN2_W], g[LN2_B], err);
    /* attention: dx2 -> datt -> dqkv -> dh1 */
    if (st == FG_OK)
        st = fg_block_linear_bwd_weights(c, &proj, rows, d.C, d.C, s.att, dC, g[PROJ_W],
                                         g[PROJ_B], err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_input(c, &proj, rows, d.C, d.C, p[PROJ_W], dC, 0.0f, dB, err);
    if (st == FG_OK)
        st = FG_OP(c, err, attention_backward, act, &a, s.qkv, s.att, s.lse, dB, dD, ws_attn);
    if (st == FG_OK)
        st = fg_block_rope(l, c, 1, rows, d.T, 0, dD, err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_weights(c, &qkv, rows, d.Q, d.C, s.h1, dD, g[QKV_W], g[QKV_B],
                                         err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_input(c, &qkv, rows, d.Q, d.C, p[QKV_W], dD, 0.0f, dB, err);
    /* dx = ln_1'(dh1) + dx2 */
    if (st == FG_OK)
        st = block_norm_backward(l, c, rows, d.C, c->x, p[LN1_W], s.mean1, s.rstd1, dB, dC,
                                 c->dx, g[LN1_W], g[LN1_B], err);
    return st;
}

/* The ops of the block's choices, forward (0) or backward (1): the MLP's activation
 * (SwiGLU or the activation op) and, with rope, its kind (scaled frequencies or not). */
static void choice_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int backward,
                            fg_op_needs *n)
{
    static const uint32_t mlp[2][2] = {{FG_OP_ACTIVATION_FORWARD, FG_OP_ACTIVATION_BACKWARD},
                                       {FG_OP_SWIGLU_FORWARD, FG_OP_SWIGLU_BACKWARD}};
    static const uint32_t rope[2][2] = {{FG_OP_ROPE_FORWARD, FG_OP_ROPE_BACKWARD},
                                        {FG_OP_ROPE_FREQ_FORWARD, FG_OP_ROPE_FREQ_BACKWARD}};
    FG_NEED(n, l->section, mlp[l->swiglu != 0][backward], dt->act);
    if (l->rope)
        FG_NEED(n, l->section, rope[l->rope_scaling != FG_ROPE_SCALING_NONE][backward], dt->act);
}

static void block_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                           fg_op_needs *n)
{
    const char *who = l->section;
    FG_NEED(n, who, FG_OP_LAYERNORM_FORWARD, dt->act, dt->param);
    FG_NEED(n, who, FG_OP_GEMM, dt->act, dt->param, dt->act);
    if (l->fp8) /* and the gemms above for rows that are not a multiple of 16 */
        FG_NEED(n, who, FG_OP_GEMM_FP8, dt->act, dt->act);
    if (l->fp8 && training)
        FG_NEED(n, who, FG_OP_GEMM_FP8, dt->act, dt->grad);
    if (l->bias)
        FG_NEED(n, who, FG_OP_BIAS_ADD, dt->act, dt->param);
    FG_NEED(n, who, FG_OP_ATTENTION_FORWARD, dt->act);
    FG_NEED(n, who, FG_OP_AXPY, dt->act, dt->act);
    choice_op_needs(l, dt, 0, n);
    if (!training)
        return;
    FG_NEED(n, who, FG_OP_GEMM, dt->act, dt->act, dt->grad);
    if (l->bias)
        FG_NEED(n, who, FG_OP_BIAS_GRAD, dt->grad, dt->act);
    choice_op_needs(l, dt, 1, n);
    FG_NEED(n, who, FG_OP_LAYERNORM_BACKWARD, dt->act, dt->param, dt->grad);
    FG_NEED(n, who, FG_OP_ATTENTION_BACKWARD, dt->act);
}

/* per position: the qkv, proj and two (SwiGLU: three) MLP products, and attention's scores
 * and weighted sum over the keys it sees (causal: (T + 1) / 2 on average) */
static int64_t block_flops(const fg_layer *l)
{
    block_dims d = fg_block_dims(l);
    int64_t C = d.C, keys = l->causal ? (d.T + 1) / 2 : d.T, mats = l->swiglu ? 3 : 2;
    return (int64_t)d.T * (2 * (C * d.Q + C * C + mats * C * d.F) + 4 * keys * C);
}

const fg_layer_ops fg_layer_transformer_block = {
    .type = "transformer_block",
    .options = fg_block_options,
    .option_count = FG_BLOCK_OPTION_COUNT,
    .flags = FG_LAYER_DX_OPTIONAL,
    .configure = fg_block_configure,
    .plan = fg_block_plan,
    .workspace_bytes = block_workspace,
    .forward = block_forward,
    .backward = block_backward,
    .op_needs = block_op_needs,
    .flops = block_flops,
    .decode = fg_block_decode,
};
