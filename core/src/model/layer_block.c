/* A pre-norm transformer block: y = x2 + mlp(norm_2(x2)), x2 = x + attn(norm_1(x)), with
 * causal self-attention over a fused QKV projection. Its defaults are GPT-2's: LayerNorm,
 * biases, multi-head attention, a GELU (tanh) MLP of mlp_ratio * C hidden units, positions
 * from a position_embedding layer. Llama's options: norm = rmsnorm, bias = false, kv_heads
 * (grouped-query attention: the projection gives (heads + 2 kv_heads) head_dim), position =
 * rope (q and k rotated in place in the saved qkv, so the KV cache holds rotated keys; the
 * backward rotates dq and dk back), mlp = swiglu with mlp_hidden (layer_block_mlp.c).
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
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

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
    {"eps", FG_OPT_FLOAT, "1e-5", 0, 1, NULL, "the two norms' epsilon (layernorm or rmsnorm)"},
    {"init_std", FG_OPT_FLOAT, "0", 0, 1e3, NULL,
     "0: PyTorch's Linear initialisation; > 0: weights from N(0, init_std^2) and zero biases, "
     "as GPT-2 (0.02)"},
    {"norm", FG_OPT_ENUM, "layernorm", 1, 0, "layernorm|rmsnorm",
     "the two norms: layernorm (weight, bias) or rmsnorm (weight only, as Llama)"},
    {"mlp", FG_OPT_ENUM, "gelu", 1, 0, "gelu|swiglu",
     "gelu: proj(gelu(fc(x))); swiglu: down_proj(silu(gate_proj(x)) * up_proj(x)) (Llama)"},
    {"mlp_hidden", FG_OPT_INT, "0", 0, 1 << 20, NULL,
     "the MLP's hidden units (Llama's intermediate_size); 0: mlp_ratio * C (gelu only: "
     "swiglu needs it)"},
    {"kv_heads", FG_OPT_INT, "0", 0, 4096, NULL,
     "key/value heads (grouped-query attention; 1: multi-query); they divide heads; 0: heads"},
    {"position", FG_OPT_ENUM, "learned", 1, 0, "learned|rope",
     "learned: the block adds none (a position_embedding layer does); rope: rotary "
     "embedding of q and k inside the block (Hugging Face Llama's half-split convention)"},
    {"rope_theta", FG_OPT_FLOAT, "10000", 2, 1e12, NULL,
     "rope's base: head pair i turns by position * rope_theta^(-2i/head_dim)"},
    {"bias", FG_OPT_BOOL, "true", 1, 0, NULL, "biases on every linear of the block (Llama: false)"},
    {"recompute", FG_OPT_BOOL, "false", 1, 0, NULL,
     "keep only the block's input and recompute its activations in backward (one scratch "
     "set shared by every such block: less memory, one more forward); unset: [model] "
     "recompute"},
};

/* The value of an enum key (the schema has checked it), or its default. */
static int key_is(const fg_layer *l, const fg_config *cfg, const char *key, const char *value)
{
    const char *v = fg_config_get(cfg, l->section, key);
    return v && strcmp(v, value) == 0;
}

/* A key that only means something next to another option. */
static fg_status refuse_key(const fg_layer *l, const fg_config *cfg, const char *key,
                            const char *why, fg_error *err)
{
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] %s: %s",
                        fg_config_origin(cfg, l->section, key), l->section, key, why);
}

/* The Llama-family keys, and the combinations they refuse. */
static fg_status llama_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    l->rms = key_is(l, cfg, "norm", "rmsnorm");
    l->swiglu = key_is(l, cfg, "mlp", "swiglu");
    l->rope = key_is(l, cfg, "position", "rope");
    fg_status st = fg_layer_read_int(l, cfg, "mlp_hidden", &l->mlp_hidden, err);
    if (st == FG_OK)
        st = fg_layer_read_int(l, cfg, "kv_heads", &l->kv_heads, err);
    if (st == FG_OK)
        st = fg_layer_read_float(l, cfg, "rope_theta", &l->rope_theta, err);
    if (st == FG_OK)
        st = fg_layer_read_bool(l, cfg, "bias", &l->bias, err);
    if (st != FG_OK)
        return st;
    if (l->swiglu && l->mlp_hidden == 0)
        return refuse_key(l, cfg, "mlp", "swiglu needs mlp_hidden (Llama's intermediate_size; "
                          "there is no default)", err);
    if (l->mlp_hidden > 0 && fg_config_get(cfg, l->section, "mlp_ratio"))
        return refuse_key(l, cfg, "mlp_ratio", "set mlp_hidden or mlp_ratio, not both", err);
    if (l->swiglu && fg_config_get(cfg, l->section, "mlp_ratio"))
        return refuse_key(l, cfg, "mlp_ratio", "mlp = swiglu takes mlp_hidden", err);
    if (!l->rope && fg_config_get(cfg, l->section, "rope_theta"))
        return refuse_key(l, cfg, "rope_theta", "only with position = rope", err);
    if (l->kv_heads > 0 && l->heads % l->kv_heads != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] kv_heads = %" PRId64 " does "
                            "not divide heads = %" PRId64,
                            fg_config_origin(cfg, l->section, "kv_heads"), l->section,
                            l->kv_heads, l->heads);
    return FG_OK;
}

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
    if (st == FG_OK)
        st = llama_configure(l, cfg, err);
    return st;
}

/* The tensor names of each slot (layer_block.h), GELU's and SwiGLU's MLP. */
static const char *const gelu_names[BLOCK_TENSORS] = {
    "ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
    "attn.proj.bias", "ln_2.weight", "ln_2.bias", "mlp.fc.weight", "mlp.fc.bias", NULL, NULL,
    "mlp.proj.weight", "mlp.proj.bias"};
static const char *const swiglu_names[BLOCK_TENSORS] = {
    "ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
    "attn.proj.bias", "ln_2.weight", "ln_2.bias", "mlp.gate_proj.weight", "mlp.gate_proj.bias",
    "mlp.up_proj.weight", "mlp.up_proj.bias", "mlp.down_proj.weight", "mlp.down_proj.bias"};

/* Slot t's (out, in) as a linear's weight; a norm's or a bias's length in shape[0]. */
static void slot_shape(const block_dims *d, int t, int64_t shape[2])
{
    static const int outs[] = {0, 0, 1, 1, 2, 2, 0, 0, 3, 3, 3, 3, 2, 2};
    static const int ins[] = {0, 0, 2, 2, 2, 2, 0, 0, 2, 2, 2, 2, 3, 3};
    const int64_t size[4] = {d->C, d->Q, d->C, d->F}; /* 0: norm width, 1: qkv, 2: C, 3: F */
    shape[0] = size[outs[t]];
    shape[1] = size[ins[t]];
}

/* Slot t's tensor: a norm's weight 1 and bias 0; a linear's weight and bias from
 * PyTorch's Linear initialisation, or N(0, init_std^2) and zero biases. */
static fg_status add_slot(fg_model *m, fg_layer *l, const block_dims *d, int t, fg_error *err)
{
    const char *name = (l->swiglu ? swiglu_names : gelu_names)[t];
    int64_t shape[2];
    slot_shape(d, t, shape);
    int is_bias = t % 2 == 1;
    if (t == LN1_W || t == LN1_B || t == LN2_W || t == LN2_B)
        return fg_model_add_tensor(m, l, name, 0, 1, shape, is_bias ? FG_INIT_ZERO : FG_INIT_ONE,
                                   0, err);
    double bound = 1.0 / sqrt((double)shape[1]), std = l->momentum; /* reused: init std */
    if (is_bias)
        return fg_model_add_tensor(m, l, name, 0, 1, shape, std > 0 ? FG_INIT_ZERO
                                   : FG_INIT_UNIFORM, bound, err);
    return fg_model_add_tensor(m, l, name, 0, 2, shape, std > 0 ? FG_INIT_NORMAL
                               : FG_INIT_UNIFORM, std > 0 ? std : bound, err);
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
    if (l->rope && (l->in.dims[1] / l->heads) % 2 != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] position = rope needs an even "
                            "head_dim, but C / heads = %" PRId64 " / %" PRId64 " = %" PRId64,
                            l->origin, l->section, l->in.dims[1], l->heads,
                            l->in.dims[1] / l->heads);
    l->out = l->in;
    block_dims d = fg_block_dims(l);
    l->aux_per_sample = l->recompute ? 0 : fg_block_saved_bytes(&d);
    fg_status st = FG_OK;
    for (int t = 0; st == FG_OK && t < BLOCK_TENSORS; t++)
        if (fg_block_has(l, t))
            st = add_slot(m, l, &d, t, err);
    return st;
}

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
    fg_attention_desc a = fg_block_attention_desc(l, c);
    void *p[BLOCK_TENSORS];
    fg_block_params(l, c->param, p);
    void *ws_attn = fg_block_attention_workspace(l, c);
    fg_status st = FG_OP(c, err, layernorm_forward, act, param, l->rms, rows, d.C, c->x,
                         p[LN1_W], p[LN1_B], (float)l->eps, s.mean1, s.rstd1, s.h1);
    if (st == FG_OK)
        st = fg_block_linear(c, rows, d.Q, d.C, s.h1, p[QKV_W], p[QKV_B], s.qkv, err);
    if (st == FG_OK)
        st = fg_block_rope(l, c, 0, rows, d.T, 0, s.qkv, err);
    if (st == FG_OK)
        st = FG_OP(c, err, attention_forward, act, &a, s.qkv, s.att, s.lse, ws_attn);
    if (st == FG_OK)
        st = fg_block_linear(c, rows, d.C, d.C, s.att, p[PROJ_W], p[PROJ_B], s.x2, err);
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
    fg_status st = block_activations(l, c, s, err);
    if (st == FG_OK)
        st = fg_block_linear(c, rows, d.C, d.F, s.g, p[MPROJ_W], p[MPROJ_B], c->y, err);
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
        st = fg_block_linear_bwd_weights(c, rows, d.C, d.C, s.att, dC, g[PROJ_W], g[PROJ_B],
                                         err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_input(c, rows, d.C, d.C, p[PROJ_W], dC, 0.0f, dB, err);
    if (st == FG_OK)
        st = FG_OP(c, err, attention_backward, act, &a, s.qkv, s.att, s.lse, dB, dD, ws_attn);
    if (st == FG_OK)
        st = fg_block_rope(l, c, 1, rows, d.T, 0, dD, err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_weights(c, rows, d.Q, d.C, s.h1, dD, g[QKV_W], g[QKV_B], err);
    if (st == FG_OK)
        st = fg_block_linear_bwd_input(c, rows, d.Q, d.C, p[QKV_W], dD, 0.0f, dB, err);
    /* dx = ln_1'(dh1) + dx2 */
    if (st == FG_OK)
        st = block_norm_backward(l, c, rows, d.C, c->x, p[LN1_W], s.mean1, s.rstd1, dB, dC,
                                 c->dx, g[LN1_W], g[LN1_B], err);
    return st;
}

static void block_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                           fg_op_needs *n)
{
    const char *who = l->section;
    FG_NEED(n, who, FG_OP_LAYERNORM_FORWARD, dt->act, dt->param);
    FG_NEED(n, who, FG_OP_GEMM, dt->act, dt->param, dt->act);
    if (l->bias)
        FG_NEED(n, who, FG_OP_BIAS_ADD, dt->act, dt->param);
    FG_NEED(n, who, FG_OP_ATTENTION_FORWARD, dt->act);
    FG_NEED(n, who, FG_OP_AXPY, dt->act, dt->act);
    if (l->swiglu)
        FG_NEED(n, who, FG_OP_SWIGLU_FORWARD, dt->act);
    else
        FG_NEED(n, who, FG_OP_ACTIVATION_FORWARD, dt->act);
    if (l->rope)
        FG_NEED(n, who, FG_OP_ROPE_FORWARD, dt->act);
    if (!training)
        return;
    FG_NEED(n, who, FG_OP_GEMM, dt->act, dt->act, dt->grad);
    if (l->bias)
        FG_NEED(n, who, FG_OP_BIAS_GRAD, dt->grad, dt->act);
    if (l->swiglu)
        FG_NEED(n, who, FG_OP_SWIGLU_BACKWARD, dt->act);
    else
        FG_NEED(n, who, FG_OP_ACTIVATION_BACKWARD, dt->act);
    if (l->rope)
        FG_NEED(n, who, FG_OP_ROPE_BACKWARD, dt->act);
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
