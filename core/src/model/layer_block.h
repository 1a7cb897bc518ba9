/* What the transformer block's files share (layer_block.c: forward and backward;
 * layer_block_keys.c: its keys and tensors; layer_block_mlp.c: the MLP, GELU or SwiGLU;
 * layer_block_ops.c: its linear maps and rope step; layer_block_decode.c: one position
 * against the KV cache): the tensor order, the sizes and the layout of the saved tensors in
 * the layer's arena. */
#ifndef FG_LAYER_BLOCK_H
#define FG_LAYER_BLOCK_H

#include "model.h"

/* The block's tensors in declaration order; a block declares the ones its options have
 * (no LN*_B with norm = rmsnorm or bias = false, no *_B linear bias with bias = false, UP_* only with
 * mlp = swiglu, where FC is gate_proj and MPROJ down_proj). fg_block_params maps a
 * context's param/grad arrays onto these slots, NULL where absent. */
enum {
    LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, UP_W, UP_B,
    MPROJ_W, MPROJ_B, BLOCK_TENSORS
};

/* Whether a block with l's options has tensor slot t. */
static inline int fg_block_has(const fg_layer *l, int t)
{
    int is_bias = t % 2 == 1;
    if (t == UP_W || t == UP_B)
        return l->swiglu && (!is_bias || l->bias);
    if (t == LN1_B || t == LN2_B)
        return !l->rms && l->bias;
    return !is_bias || l->bias;
}

/* out[t] = the t-th slot's pointer among src (the layer's tensors in declaration order). */
static inline void fg_block_params(const fg_layer *l, void *const *src, void **out)
{
    int next = 0;
    for (int t = 0; t < BLOCK_TENSORS; t++)
        out[t] = fg_block_has(l, t) ? src[next++] : NULL;
}

/* Sizes in one place: T positions, C width, H query heads, KV key/value heads, D head
 * width, Q the fused projection's width (H + 2 KV) D, F hidden units of the MLP, NF its
 * saved (T, F) tensors (GELU: pre-activation and output; SwiGLU: gate, up and output). */
typedef struct block_dims {
    int T, C, H, KV, D, Q, F, NF;
    size_t n; /* T * C */
} block_dims;

static inline block_dims fg_block_dims(const fg_layer *l)
{
    block_dims d;
    d.T = (int)l->in.dims[0];
    d.C = (int)l->in.dims[1];
    d.H = (int)l->heads;
    d.KV = l->kv_heads > 0 ? (int)l->kv_heads : d.H;
    d.D = d.C / d.H;
    d.Q = (d.H + 2 * d.KV) * d.D;
    /* in_units is reused for the MLP ratio; mlp_hidden overrides it */
    d.F = l->mlp_hidden > 0 ? (int)l->mlp_hidden : (int)l->in_units * d.C;
    d.NF = l->swiglu ? 3 : 2;
    d.n = (size_t)d.T * (size_t)d.C;
    return d;
}

/* Act values per sample of what forward keeps for backward, in 4-byte slots (any act dtype
 * fits): h1, att, x2, h2 (T, C), qkv (T, Q), NF of (T, F). */
static inline size_t fg_block_saved_values(const block_dims *d)
{
    return 4 * d->n + (size_t)d->T * ((size_t)d->Q + (size_t)d->NF * (size_t)d->F);
}

/* Bytes per sample of the saved tensors, then (4 + H) T f32 statistics. */
static inline size_t fg_block_saved_bytes(const block_dims *d)
{
    return (fg_block_saved_values(d) + (size_t)(4 + d->H) * (size_t)d->T) * sizeof(float);
}

/* f32 values per sample of backward's gradients: the MLP's hidden ones (GELU: one (T, F);
 * SwiGLU: gate's and up's), then two (T, C) and one (T, Q) that overlap as backward goes
 * (layer_block.c). */
static inline size_t fg_block_grad_values(const block_dims *d)
{
    return (size_t)d->T * ((size_t)(d->NF - 1) * (size_t)d->F + 2 * (size_t)d->C + (size_t)d->Q);
}

/* The forward's saved tensors for a batch, in the layer's arena (with recompute: at the
 * front of the workspace every block shares): act values in 4-byte slots, then f32
 * statistics. qkv (batch, T, Q) is also the KV cache of fulgur generate (with rope: q and k
 * rotated). u is SwiGLU's up projection (NULL with GELU). */
typedef struct block_saved {
    void *h1, *qkv, *att, *x2, *h2, *f, *u, *g;   /* (B, T, C), (B, T, Q), ..., (B, T, F) */
    float *mean1, *rstd1, *mean2, *rstd2, *lse; /* (B, T) x 4, (B, H, T) */
} block_saved;

static inline block_saved fg_block_saved(const fg_layer *l, const fg_layer_ctx *c)
{
    block_dims d = fg_block_dims(l);
    size_t b = (size_t)c->batch, bn = b * d.n, rows = b * (size_t)d.T;
    size_t bf = rows * (size_t)d.F;
    float *base = l->recompute ? c->workspace : c->aux;
    block_saved s;
    s.h1 = base;
    s.qkv = base + bn;
    float *after_qkv = base + bn + rows * (size_t)d.Q;
    s.att = after_qkv;
    s.x2 = after_qkv + bn;
    s.h2 = after_qkv + 2 * bn;
    s.f = after_qkv + 3 * bn;
    s.u = l->swiglu ? after_qkv + 3 * bn + bf : NULL;
    s.g = after_qkv + 3 * bn + (size_t)(d.NF - 1) * bf;
    float *stats = base + b * fg_block_saved_values(&d);
    s.mean1 = stats;
    s.rstd1 = stats + rows;
    s.mean2 = stats + 2 * rows;
    s.rstd2 = stats + 3 * rows;
    s.lse = stats + 4 * rows;
    return s;
}

/* The block's keys, configure and plan (layer_block_keys.c). */
#define FG_BLOCK_OPTION_COUNT 22
extern const fg_option fg_block_options[FG_BLOCK_OPTION_COUNT];
fg_status fg_block_configure(fg_layer *l, const fg_config *cfg, fg_error *err);
fg_status fg_block_plan(fg_layer *l, fg_model *m, fg_error *err);

/* The block's linear maps, each in fp8 under an fp8 recipe when its features are multiples
 * of 16 (l->fp8 has bit 1 << map): qkv, attn.proj, the MLP's fc (SwiGLU: gate_proj),
 * up_proj (SwiGLU only) and its down projection (GELU: mlp.proj). Each fp8 map owns six
 * buffers, in this order after the ones before it (linear_fp8.c). */
enum { BLOCK_FP8_QKV, BLOCK_FP8_PROJ, BLOCK_FP8_FC, BLOCK_FP8_UP, BLOCK_FP8_DOWN, BLOCK_FP8_MAPS };

/* Map's fp8 state in c's buffers, or an empty map (state[0] NULL) when it stays in the
 * activations' dtype. */
static inline fg_fp8_map fg_block_fp8(const fg_layer *l, const fg_layer_ctx *c, int map)
{
    fg_fp8_map none = {{NULL}};
    if (!(l->fp8 & (1 << map)))
        return none;
    int first = 0;
    for (int k = 0; k < map; k++)
        first += l->fp8 & (1 << k) ? 6 : 0;
    return fg_fp8_map_at(c, first);
}

/* y(rows, out) = x(rows, in) W^T + b (b may be NULL); in fp8 where f8 runs (NULL: never) */
fg_status fg_block_linear(const fg_layer_ctx *c, const fg_fp8_map *f8, int rows, int out,
                          int in, const void *x, const void *w, const void *b, void *y,
                          fg_error *err);
/* dW (+)= dy^T x and db (+)= sum dy (db NULL: dW only) */
fg_status fg_block_linear_bwd_weights(const fg_layer_ctx *c, const fg_fp8_map *f8, int rows,
                                      int out, int in, const void *x, const void *dy, void *dw,
                                      void *db, fg_error *err);
/* dx (rows, in) = dy W + beta dx */
fg_status fg_block_linear_bwd_input(const fg_layer_ctx *c, const fg_fp8_map *f8, int rows,
                                    int out, int in, const void *w, const void *dy, float beta,
                                    void *dx, fg_error *err);

/* q and k of qkv rows (rows, Q) at positions pos0 + r % seq rotated (position = rope;
 * backward: a gradient taken back through the rotation); nothing with learned positions. */
fg_status fg_block_rope(const fg_layer *l, const fg_layer_ctx *c, int backward, int rows,
                        int seq, int pos0, void *qkv, fg_error *err);

/* The MLP (layer_block_mlp.c) on rows of h (rows, C) with the block's parameter slots p:
 * forward keeps f, u (SwiGLU) and g, the input of the down projection; y = g W_down^T + b. */
fg_status fg_block_mlp_hidden(const fg_layer *l, const fg_layer_ctx *c, int rows,
                              void *const *p, const void *h, void *f, void *u, void *g,
                              fg_error *err);
/* From dy (rows, C): the down, gate/up (or fc) projections' parameter gradients into the
 * slots g, and dh (rows, C); hidden: backward's hidden gradient scratch (NF - 1 of (rows,
 * F)). */
fg_status fg_block_mlp_backward(const fg_layer *l, const fg_layer_ctx *c, int rows,
                                void *const *p, void *const *g, const block_saved *s,
                                const void *dy, void *hidden, void *dh, fg_error *err);

/* The attention op's descriptor at c's batch (dropout while training). */
fg_attention_desc fg_block_attention_desc(const fg_layer *l, const fg_layer_ctx *c);
/* The attention op's workspace, after the saved tensors (recompute) and the gradients. */
void *fg_block_attention_workspace(const fg_layer *l, const fg_layer_ctx *c);

/* Position pos of one sample against the KV cache (fg_layer_ops.decode). */
fg_status fg_block_decode(const fg_layer *l, const fg_layer_ctx *c, int pos, fg_error *err);

#endif
