/* What the transformer block's files share (layer_block.c: forward and backward;
 * layer_block_decode.c: one position against the KV cache): the tensor order, the sizes
 * and the layout of the saved tensors in the layer's arena. */
#ifndef FG_LAYER_BLOCK_H
#define FG_LAYER_BLOCK_H

#include "model.h"

/* The block's tensors, in declaration order. */
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, MPROJ_W, MPROJ_B };

/* Sizes in one place: T positions, C width, H heads, R the MLP ratio, F = R * C hidden
 * units. */
typedef struct block_dims {
    int T, C, H, R, F;
    size_t n; /* T * C */
} block_dims;

static inline block_dims fg_block_dims(const fg_layer *l)
{
    block_dims d = {(int)l->in.dims[0], (int)l->in.dims[1], (int)l->heads,
                    (int)l->in_units /* reused: the MLP ratio */, 0, 0};
    d.F = d.R * d.C;
    d.n = (size_t)d.T * (size_t)d.C;
    return d;
}

/* Bytes per sample of what forward keeps for backward: 7 + 2R T*C act values in 4-byte
 * slots (any act dtype fits), then (4 + H) T f32 statistics. */
static inline size_t fg_block_saved_bytes(const block_dims *d)
{
    return ((size_t)(7 + 2 * d->R) * d->n + (size_t)(4 + d->H) * (size_t)d->T) *
           sizeof(float);
}

/* T*C f32 slots per sample of backward's gradients: the MLP's hidden (R), then three
 * (T, C) and one (T, 3C) that overlap as backward goes (layer_block.c). */
static inline size_t fg_block_grad_slots(const block_dims *d) { return (size_t)d->R + 5; }

/* The forward's saved tensors for a batch, in the layer's arena (with recompute: at the
 * front of the workspace every block shares): act values in 4-byte slots, then f32
 * statistics. qkv (batch, T, 3C) is also the KV cache of fulgur generate. */
typedef struct block_saved {
    void *h1, *qkv, *att, *x2, *h2, *f, *g;     /* (B, T, C), (B, T, 3C), ..., (B, T, F) x 2 */
    float *mean1, *rstd1, *mean2, *rstd2, *lse; /* (B, T) x 4, (B, H, T) */
} block_saved;

static inline block_saved fg_block_saved(const fg_layer *l, const fg_layer_ctx *c)
{
    block_dims d = fg_block_dims(l);
    size_t bn = (size_t)c->batch * d.n, rows = (size_t)c->batch * (size_t)d.T;
    float *base = l->recompute ? c->workspace : c->aux;
    block_saved s;
    s.h1 = base;
    s.qkv = base + bn;
    s.att = base + 4 * bn;
    s.x2 = base + 5 * bn;
    s.h2 = base + 6 * bn;
    s.f = base + 7 * bn;
    s.g = base + (size_t)(7 + d.R) * bn;
    float *stats = base + (size_t)(7 + 2 * d.R) * bn;
    s.mean1 = stats;
    s.rstd1 = stats + rows;
    s.mean2 = stats + 2 * rows;
    s.rstd2 = stats + 3 * rows;
    s.lse = stats + 4 * rows;
    return s;
}

/* y(rows, out) = x(rows, in) W^T + b */
fg_status fg_block_linear(const fg_layer_ctx *c, int rows, int out, int in, const void *x,
                          const void *w, const void *b, void *y, fg_error *err);

/* The attention op's workspace, after the saved tensors (recompute) and the gradients. */
void *fg_block_attention_workspace(const fg_layer *l, const fg_layer_ctx *c);

/* Position pos of one sample against the KV cache (fg_layer_ops.decode). */
fg_status fg_block_decode(const fg_layer *l, const fg_layer_ctx *c, int pos, fg_error *err);

#endif
