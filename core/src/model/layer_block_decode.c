/* The transformer block at one new position pos of one sample, against its KV cache: the
 * block's own saved qkv (1, T, Q) in the arena, whose rows before pos a forward (the
 * prompt) or earlier decodes wrote: with grouped-query attention it holds kv_heads keys
 * and values per row, with rope keys already rotated at their positions. The new row goes
 * through norm_1, the QKV projection (appending its K and V at row pos), rope at pos,
 * attention of its query against keys 0..pos (attention_decode; without it,
 * attention_forward over rows [0, pos]), the projection, norm_2 and the MLP: every gemm has
 * one row. Each intermediate lands at row pos of its saved tensor, where the forward would
 * have put it. */
#include "layer_block.h"

/* Row pos of a (T, width) tensor of act values. */
static void *row_of(void *base, int pos, int width, size_t act_size)
{
    return base ? (char *)base + (size_t)pos * (size_t)width * act_size : NULL;
}

static fg_status attention_row(const fg_layer *l, const fg_layer_ctx *c, const block_saved *s,
                               int pos, void *att, fg_error *err)
{
    void *ws = fg_block_attention_workspace(l, c); /* as the forward's */
    fg_layer_ctx one = *c;
    one.training = 0;
    fg_attention_desc a = fg_block_attention_desc(l, &one);
    a.causal = 1;
    if (FG_BACKEND_HAS(c->be, attention_decode))
        return c->be->attention_decode(c->bs, c->queue, c->dt.act, &a, pos, s->qkv, att, ws,
                                       err);
    a.seq = pos + 1; /* every query of rows [0, pos]; row pos is the one wanted */
    return FG_OP(c, err, attention_forward, c->dt.act, &a, s->qkv, s->att, s->lse, ws);
}

fg_status fg_block_decode(const fg_layer *l, const fg_layer_ctx *c, int pos, fg_error *err)
{
    block_dims d = fg_block_dims(l);
    block_saved s = fg_block_saved(l, c); /* c->batch is 1 */
    if (!l->causal)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: [%s] causal = false: every position "
                            "sees the later ones, so there is no incremental decoding",
                            l->origin, l->section);
    size_t sz = fg_dtype_size((fg_dtype)c->dt.act);
    uint32_t act = c->dt.act, param = c->dt.param;
    void *p[BLOCK_TENSORS];
    fg_block_params(l, c->param, p);
    void *h1 = row_of(s.h1, pos, d.C, sz), *qkv = row_of(s.qkv, pos, d.Q, sz);
    void *att = row_of(s.att, pos, d.C, sz), *x2 = row_of(s.x2, pos, d.C, sz);
    void *h2 = row_of(s.h2, pos, d.C, sz), *f = row_of(s.f, pos, d.F, sz);
    void *u = row_of(s.u, pos, d.F, sz), *g = row_of(s.g, pos, d.F, sz);
    fg_status st = FG_OP(c, err, layernorm_forward, act, param, l->rms, 1, d.C, c->x, p[LN1_W],
                         p[LN1_B], (float)l->eps, s.mean1 + pos, s.rstd1 + pos, h1);
    if (st == FG_OK)
        st = fg_block_linear(c, NULL, 1, d.Q, d.C, h1, p[QKV_W], p[QKV_B], qkv, err);
    if (st == FG_OK)
        st = fg_block_rope(l, c, 0, 1, 1, pos, qkv, err);
    if (st == FG_OK)
        st = attention_row(l, c, &s, pos, att, err);
    if (st == FG_OK)
        st = fg_block_linear(c, NULL, 1, d.C, d.C, att, p[PROJ_W], p[PROJ_B], x2, err);
    if (st == FG_OK)
        st = FG_OP(c, err, axpy, act, act, 1.0f, c->x, x2, (size_t)d.C);
    if (st == FG_OK)
        st = FG_OP(c, err, layernorm_forward, act, param, l->rms, 1, d.C, x2, p[LN2_W],
                   p[LN2_B], (float)l->eps, s.mean2 + pos, s.rstd2 + pos, h2);
    if (st == FG_OK)
        st = fg_block_mlp_hidden(l, c, 1, p, h2, f, u, g, err);
    if (st == FG_OK)
        st = fg_block_linear(c, NULL, 1, d.C, d.F, g, p[MPROJ_W], p[MPROJ_B], c->y, err);
    if (st == FG_OK)
        st = FG_OP(c, err, axpy, act, act, 1.0f, x2, c->y, (size_t)d.C);
    return st;
}
