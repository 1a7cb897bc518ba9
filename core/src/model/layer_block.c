/* A pre-norm transformer block, GPT-2's: y = x2 + mlp(ln_2(x2)), x2 = x + attn(ln_1(x)),
 * with causal multi-head self-attention over a fused QKV projection and a GELU (tanh) MLP
 * of mlp_ratio * C hidden units. Input and output (T, C). Its tensors are named as
 * PyTorch's state dict of such a module: ln_1.weight, attn.qkv.weight, attn.proj.bias,
 * mlp.fc.weight, ... (a block named h.3 gives h.3.attn.qkv.weight).
 *
 * Forward keeps what backward reads in the layer's arena: ln_1 and ln_2 outputs and
 * statistics, qkv, the attention output and its log-sum-exp, x2, the MLP's pre-activation
 * and GELU output (15 T*C values and (4 + heads) T statistics per sample). Backward's
 * intermediate gradients live in the shared workspace.
 *
 * With recompute, the block keeps nothing of its own: its input is the previous layer's
 * output, which stays in the arena anyway. Forward writes the saved tensors into the
 * front of the shared workspace (one set for every block, overwritten by the next one),
 * and backward runs forward again into it up to the GELU output before going back. The
 * same ops on the same inputs give the same bits, and the attention dropout mask is keyed
 * by (seed, layer, step, sample), not drawn from a stream, so it is the same mask. Such a
 * block keeps no K and V for fulgur generate's cache (decode.c refuses it).
 *
 * Where the backend has gemm_epilogue (ABI 1.5) for the dtypes, the MLP's GELU, its backward
 * and the bias gradients ride on the gemms (cuBLASLt's epilogues on CUDA); the CPU backend's
 * op is the separate ops in the same order, so its bits do not change. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "layer_block.h"

static const fg_option block_options[] = {
    FG_LAYER_TYPE_OPTION("transformer_block"),
    {"heads", FG_OPT_INT, FG_OPT_REQUIRED, 1, 4096, NULL,
     "attention heads; they split the width C evenly"},
    {"repeat", FG_OPT_INT, "1", 1, FG_MAX_REPEAT, NULL,
     "blocks this section makes, one after the other, named NAME.0, NAME.1, ... (their "
     "tensors h.0.attn.qkv.weight, ... as PyTorch's state dict of a ModuleList)"},
    {"mlp_ratio", FG_OPT_INT, "4", 1, 64, NULL,
     "hidden units of the MLP per unit of width (GPT-2: 4)"},
    {"causal", FG_OPT_BOOL, "true", 1, 0, NULL, "position i attends to positions 0..i only"},
    {"attn_dropout", FG_OPT_FLOAT, "0", 0, 0.99, NULL,
     "dropout on the attention weights while training"},
    {"eps", FG_OPT_FLOAT, "1e-5", 0, 1, NULL, "the layer norms' epsilon"},
    {"init_std", FG_OPT_FLOAT, "0", 0, 1e3, NULL,
     "0: PyTorch's Linear initialisation; > 0: weights from N(0, init_std^2) and zero biases, "
     "as GPT-2 (0.02)"},
    {"recompute", FG_OPT_BOOL, "false", 1, 0, NULL,
     "keep only the block's input and recompute its activations in backward (one scratch "
     "set shared by every such block: less memory, one more forward); unset: [model] "
     "recompute"},
};

static fg_status block_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    int64_t ratio = 4;
    fg_status st = fg_layer_read_int(l, cfg, "heads", &l->heads, err);
    if (st == FG_OK)
        st = fg_layer_read_int(l, cfg, "mlp_ratio", &ratio, err);
    if (st == FG_OK)
        st = fg_layer_read_bool(l, cfg, "causal", &l->causal, err);
    if (st == FG_OK)
        st = fg_layer_read_float(l, cfg, "attn_dropout", &l->p, err);
    if (st == FG_OK)
        st = fg_layer_read_float(l, cfg, "eps", &l->eps, err);
    if (st == FG_OK)
        st = fg_layer_read_float(l, cfg, "init_std", &l->momentum, err); /* reused: init std */
    if (st == FG_OK && fg_config_get(cfg, l->section, "recompute")) /* else [model]'s */
        st = fg_layer_read_bool(l, cfg, "recompute", &l->recompute, err);
    l->in_units = ratio; /* reused: the MLP ratio */
    return st;
}

static fg_status add_linear(fg_model *m, fg_layer *l, const char *name, int64_t out, int64_t in,
                            fg_error *err)
{
    char w[48], b[48];
    snprintf(w, sizeof w, "%s.weight", name);
    snprintf(b, sizeof b, "%s.bias", name);
    int64_t shape[2] = {out, in};
    double bound = 1.0 / sqrt((double)in), std = l->momentum;
    fg_status st = fg_model_add_tensor(m, l, w, 0, 2, shape, std > 0 ? FG_INIT_NORMAL
                                       : FG_INIT_UNIFORM, std > 0 ? std : bound, err);
    if (st == FG_OK)
        st = fg_model_add_tensor(m, l, b, 0, 1, &out, std > 0 ? FG_INIT_ZERO : FG_INIT_UNIFORM,
                                 bound, err);
    return st;
}

static fg_status add_norm(fg_model *m, fg_layer *l, const char *name, int64_t c, fg_error *err)
{
    char w[48], b[48];
    snprintf(w, sizeof w, "%s.weight", name);
    snprintf(b, sizeof b, "%s.bias", name);
    fg_status st = fg_model_add_tensor(m, l, w, 0, 1, &c, FG_INIT_ONE, 0, err);
    if (st == FG_OK)
        st = fg_model_add_tensor(m, l, b, 0, 1, &c, FG_INIT_ZERO, 0, err);
    return st;
}

static fg_status block_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    if (l->in.rank != 2)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] (transformer_block) needs a "
                            "sequence of vectors (T, C), but %s", l->origin, l->section,
                            l->input_text);
    if (l->in.dims[1] % l->heads != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] heads = %" PRId64 " does not "
                            "divide the width C = %" PRId64 " (%s)", l->origin, l->section,
                            l->heads, l->in.dims[1], l->input_text);
    l->out = l->in;
    block_dims d = fg_block_dims(l);
    l->aux_per_sample = l->recompute ? 0 : fg_block_saved_bytes(&d);
    int64_t c = d.C;
    fg_status st = add_norm(m, l, "ln_1", c, err);
    if (st == FG_OK)
        st = add_linear(m, l, "attn.qkv", 3 * c, c, err);
    if (st == FG_OK)
        st = add_linear(m, l, "attn.proj", c, c, err);
    if (st == FG_OK)
        st = add_norm(m, l, "ln_2", c, err);
    if (st == FG_OK)
        st = add_linear(m, l, "mlp.fc", d.F, c, err);
    if (st == FG_OK)
        st = add_linear(m, l, "mlp.proj", c, d.F, err);
    return st;
}

static fg_attention_desc attention_desc(const fg_layer *l, const fg_layer_ctx *c)
{
    block_dims d = fg_block_dims(l);
    fg_attention_desc a = {sizeof a, c->batch, d.T, d.H, d.C / d.H, l->causal, 0.0f, 0, 0};
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
 * [backward's gradients, fg_block_grad_slots T*C per sample] [the attention's own]. */
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
    return grad_scratch(l, c) + (size_t)c->batch * fg_block_grad_slots(&d) * d.n;
}

static size_t block_workspace(const fg_layer *l, const fg_backend_vtable *be, void *bs,
                              int batch)
{
    block_dims d = fg_block_dims(l);
    fg_layer_ctx c = {.batch = batch};
    fg_attention_desc a = attention_desc(l, &c);
    size_t attn = FG_BACKEND_HAS(be, attention_workspace) ? be->attention_workspace(bs, &a) : 0;
    return saved_scratch(l, batch) + (size_t)batch * fg_block_grad_slots(&d) * d.n * sizeof(float) +
           attn;
}

fg_status fg_block_linear(const fg_layer_ctx *c, int rows, int out, int in, const void *x,
                          const void *w, const void *b, void *y, fg_error *err)
{
    return fg_affine_forward(c, rows, out, in, x, w, b, y, out, err);
}

/* Whether the backend fuses gemm tails (gemm_epilogue, ABI 1.5) for these dtypes: operands
 * ab, output c, bias. Without it the separate ops run, the same maths. */
static int block_fuses(const fg_layer_ctx *c, uint32_t ab, uint32_t out, uint32_t bias)
{
    const uint32_t dtypes[3] = {ab, out, bias};
    return fg_backend_can(c->be, c->bs, FG_OP_GEMM_EPILOGUE, dtypes);
}

/* dW (+)= dy^T x and db (+)= sum dy (db NULL: dW only) */
static fg_status linear_bwd_weights(const fg_layer_ctx *c, int rows, int out, int in,
                                    const void *x, const void *dy, void *dw, void *db,
                                    fg_error *err)
{
    return fg_affine_weight_grads(c, rows, out, in, x, dy, out, dw, db, err);
}

/* dx = dy W (rows, in) */
static fg_status linear_bwd_input(const fg_layer_ctx *c, int rows, int out, int in,
                                  const void *w, const void *dy, void *dx, fg_error *err)
{
    uint32_t act = c->dt.act, param = c->dt.param;
    return FG_OP(c, err, gemm, act, param, act, 0, 0, rows, in, out, 1.0f, dy, out, w, in, 0.0f,
                 dx, in);
}

/* dW (+)= dy^T x, db (+)= sum dy (db NULL: already taken), dx = dy W (dx may be NULL) */
static fg_status linear_bwd(const fg_layer_ctx *c, int rows, int out, int in, const void *x,
                            const void *w, const void *dy, void *dw, void *db, void *dx,
                            fg_error *err)
{
    fg_status st = linear_bwd_weights(c, rows, out, in, x, dy, dw, db, err);
    if (st == FG_OK && dx)
        st = linear_bwd_input(c, rows, out, in, w, dy, dx, err);
    return st;
}

/* The MLP's fc and GELU: f = h2 W^T + b kept for backward, g = gelu(f); one gemm with the
 * GELU_AUX_BIAS tail where the backend has it (its operands share a dtype). */
static fg_status block_fc_gelu(const fg_layer_ctx *c, int rows, int F, int C, const void *h2,
                               void *w, void *b, void *f, void *g, fg_error *err)
{
    uint32_t act = c->dt.act, param = c->dt.param;
    if (act == param && block_fuses(c, act, act, param))
        return FG_OP(c, err, gemm_epilogue, act, act, param, FG_EPI_GELU_AUX_BIAS, 0, 1, rows, F,
                     C, h2, C, w, C, g, F, f, F, b, 0);
    fg_status st = fg_block_linear(c, rows, F, C, h2, w, b, f, err);
    if (st == FG_OK)
        st = FG_OP(c, err, activation_forward, act, FG_ACT_GELU, f, g,
                   (size_t)rows * (size_t)F);
    return st;
}

/* The MLP's df = (dg W_proj) * gelu'(f) from dy = dg's gradient, and mlp.fc's bias gradient
 * when the backend fuses them (DGELU_BGRAD); returns whether it did (else the caller's
 * linear_bwd of mlp.fc takes it). */
static fg_status block_dgelu(const fg_layer_ctx *c, int rows, int F, int C, const void *dy,
                             const void *w_proj, const void *f, const void *g, void *df,
                             void *db_fc, int *fused, fg_error *err)
{
    uint32_t act = c->dt.act, param = c->dt.param, grad = c->dt.grad;
    *fused = act == param && block_fuses(c, act, act, grad);
    if (*fused)
        return FG_OP(c, err, gemm_epilogue, act, act, grad, FG_EPI_DGELU_BGRAD, 0, 0, rows, F, C,
                     dy, C, w_proj, F, df, F, (void *)f, F, db_fc, c->accumulate);
    fg_status st = linear_bwd_input(c, rows, C, F, w_proj, dy, df, err);
    if (st == FG_OK)
        st = FG_OP(c, err, activation_backward, act, FG_ACT_GELU, f, g, df, df,
                   (size_t)rows * (size_t)F);
    return st;
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
        return FG_OP(c, err, layernorm_residual_forward, act, param, 0, rows, cols, x, x2, x2,
                     w, b, (float)l->eps, mean, rstd, h);
    fg_status st = FG_OP(c, err, axpy, act, act, 1.0f, x, x2, (size_t)rows * (size_t)cols);
    if (st == FG_OK)
        st = FG_OP(c, err, layernorm_forward, act, param, 0, rows, cols, x2, w, b,
                   (float)l->eps, mean, rstd, h);
    return st;
}

/* dx = the norm's dx from dh + dres (the residual stream's gradient), and the norm's
 * parameter gradients: one op when the backend fuses them (ABI 1.5), else
 * layernorm_backward then axpy (the same bits). dx NULL: the parameter gradients only. */
static fg_status block_norm_backward(const fg_layer_ctx *c, int rows, int cols, const void *x,
                                     const void *w, const float *mean, const float *rstd,
                                     const void *dh, const void *dres, void *dx, void *dw,
                                     void *db, fg_error *err)
{
    uint32_t act = c->dt.act, param = c->dt.param, grad = c->dt.grad;
    const uint32_t dtypes[3] = {act, param, grad};
    if (dx && fg_backend_can(c->be, c->bs, FG_OP_LAYERNORM_RESIDUAL_BACKWARD, dtypes))
        return FG_OP(c, err, layernorm_residual_backward, act, param, grad, 0, rows, cols, x, w,
                     mean, rstd, dh, dres, dx, dw, db, c->accumulate);
    fg_status st = FG_OP(c, err, layernorm_backward, act, param, grad, 0, rows, cols, x, w,
                         mean, rstd, dh, dx, dw, db, c->accumulate);
    if (st == FG_OK && dx)
        st = FG_OP(c, err, axpy, act, act, 1.0f, dres, dx, (size_t)rows * (size_t)cols);
    return st;
}

/* Forward up to the MLP's GELU output: every tensor backward reads, into s. */
static fg_status block_activations(const fg_layer *l, const fg_layer_ctx *c, block_saved s,
                                   fg_error *err)
{
    block_dims d = fg_block_dims(l);
    int rows = c->batch * d.T;
    uint32_t act = c->dt.act, param = c->dt.param;
    fg_attention_desc a = attention_desc(l, c);
    void *const *p = c->param;
    void *ws_attn = fg_block_attention_workspace(l, c);
    fg_status st = FG_OP(c, err, layernorm_forward, act, param, 0, rows, d.C, c->x, p[LN1_W],
                         p[LN1_B], (float)l->eps, s.mean1, s.rstd1, s.h1);
    if (st == FG_OK)
        st = fg_block_linear(c, rows, 3 * d.C, d.C, s.h1, p[QKV_W], p[QKV_B], s.qkv, err);
    if (st == FG_OK)
        st = FG_OP(c, err, attention_forward, act, &a, s.qkv, s.att, s.lse, ws_attn);
    if (st == FG_OK)
        st = fg_block_linear(c, rows, d.C, d.C, s.att, p[PROJ_W], p[PROJ_B], s.x2, err);
    if (st == FG_OK)
        st = block_residual_norm(l, c, rows, d.C, c->x, s.x2, p[LN2_W], p[LN2_B], s.mean2,
                                 s.rstd2, s.h2, err);
    if (st == FG_OK)
        st = block_fc_gelu(c, rows, d.F, d.C, s.h2, p[FC_W], p[FC_B], s.f, s.g, err);
    return st;
}

static fg_status block_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    block_dims d = fg_block_dims(l);
    block_saved s = fg_block_saved(l, c);
    int rows = c->batch * d.T;
    size_t n = (size_t)rows * (size_t)d.C;
    uint32_t act = c->dt.act;
    fg_status st = block_activations(l, c, s, err);
    if (st == FG_OK)
        st = fg_block_linear(c, rows, d.C, d.F, s.g, c->param[MPROJ_W], c->param[MPROJ_B],
                             c->y, err);
    if (st == FG_OK)
        st = FG_OP(c, err, axpy, act, act, 1.0f, s.x2, c->y, n);
    return st;
}

static fg_status block_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    block_dims d = fg_block_dims(l);
    block_saved s = fg_block_saved(l, c);
    int rows = c->batch * d.T;
    uint32_t act = c->dt.act;
    fg_attention_desc a = attention_desc(l, c);
    void *const *p = c->param, *const *g = c->grad;
    float *ws = grad_scratch(l, c);
    size_t bn = (size_t)c->batch * d.n;
    size_t r = (size_t)d.R;
    void *dA = ws, *dB = ws + r * bn, *dC = ws + (r + 1) * bn, *dD = ws + (r + 2) * bn;
    void *ws_attn = fg_block_attention_workspace(l, c);
    fg_status st = l->recompute ? block_activations(l, c, s, err) : FG_OK;
    /* MLP: dy -> dg -> df -> dh2 */
    int fused = 0;
    if (st == FG_OK)
        st = linear_bwd_weights(c, rows, d.C, d.F, s.g, c->dy, g[MPROJ_W], g[MPROJ_B], err);
    if (st == FG_OK)
        st = block_dgelu(c, rows, d.F, d.C, c->dy, p[MPROJ_W], s.f, s.g, dA, g[FC_B], &fused,
                         err);
    if (st == FG_OK)
        st = linear_bwd(c, rows, d.F, d.C, s.h2, p[FC_W], dA, g[FC_W], fused ? NULL : g[FC_B],
                        dB, err);
    /* dx2 = ln_2'(dh2) + dy */
    if (st == FG_OK)
        st = block_norm_backward(c, rows, d.C, s.x2, p[LN2_W], s.mean2, s.rstd2, dB, c->dy, dC,
                                 g[LN2_W], g[LN2_B], err);
    /* attention: dx2 -> datt -> dqkv -> dh1 */
    if (st == FG_OK)
        st = linear_bwd(c, rows, d.C, d.C, s.att, p[PROJ_W], dC, g[PROJ_W], g[PROJ_B], dB, err);
    if (st == FG_OK)
        st = FG_OP(c, err, attention_backward, act, &a, s.qkv, s.att, s.lse, dB, dD, ws_attn);
    if (st == FG_OK)
        st = linear_bwd(c, rows, 3 * d.C, d.C, s.h1, p[QKV_W], dD, g[QKV_W], g[QKV_B], dB, err);
    /* dx = ln_1'(dh1) + dx2 */
    if (st == FG_OK)
        st = block_norm_backward(c, rows, d.C, c->x, p[LN1_W], s.mean1, s.rstd1, dB, dC, c->dx,
                                 g[LN1_W], g[LN1_B], err);
    return st;
}

static void block_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                           fg_op_needs *n)
{
    const char *who = l->section;
    FG_NEED(n, who, FG_OP_LAYERNORM_FORWARD, dt->act, dt->param);
    FG_NEED(n, who, FG_OP_GEMM, dt->act, dt->param, dt->act);
    FG_NEED(n, who, FG_OP_BIAS_ADD, dt->act, dt->param);
    FG_NEED(n, who, FG_OP_ATTENTION_FORWARD, dt->act);
    FG_NEED(n, who, FG_OP_AXPY, dt->act, dt->act);
    FG_NEED(n, who, FG_OP_ACTIVATION_FORWARD, dt->act);
    if (!training)
        return;
    FG_NEED(n, who, FG_OP_GEMM, dt->act, dt->act, dt->grad);
    FG_NEED(n, who, FG_OP_BIAS_GRAD, dt->grad, dt->act);
    FG_NEED(n, who, FG_OP_ACTIVATION_BACKWARD, dt->act);
    FG_NEED(n, who, FG_OP_LAYERNORM_BACKWARD, dt->act, dt->param, dt->grad);
    FG_NEED(n, who, FG_OP_ATTENTION_BACKWARD, dt->act);
}

/* per position: the qkv, proj and two MLP products, and attention's scores and weighted
 * sum over the keys it sees (causal: (T + 1) / 2 on average) */
static int64_t block_flops(const fg_layer *l)
{
    block_dims d = fg_block_dims(l);
    int64_t C = d.C, keys = l->causal ? (d.T + 1) / 2 : d.T;
    return (int64_t)d.T * (2 * (4 * C * C + 2 * C * d.F) + 4 * keys * C);
}

const fg_layer_ops fg_layer_transformer_block = {
    .type = "transformer_block",
    .options = block_options,
    .option_count = sizeof block_options / sizeof block_options[0],
    .flags = FG_LAYER_DX_OPTIONAL,
    .configure = block_configure,
    .plan = block_plan,
    .workspace_bytes = block_workspace,
    .forward = block_forward,
    .backward = block_backward,
    .op_needs = block_op_needs,
    .flops = block_flops,
    .decode = fg_block_decode,
};
