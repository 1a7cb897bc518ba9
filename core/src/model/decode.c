/* The incremental forward of fulgur generate (decode.h). Each layer runs one position:
 * kinds with a decode entry (transformer_block: the KV cache; position_embedding: row pos
 * of its table) run it; position-wise kinds (embedding, linear over a sequence, layer and
 * RMS norm, activations) run their own forward on a view of themselves with T = 1, so
 * every op is the backend's, in the model's dtypes; dropout is the identity. Each layer's
 * output row lands at row pos of its output in the arena. */
#include "decode.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "model_internal.h"

typedef enum decode_mode { MODE_SKIP, MODE_DECODE, MODE_VIEW } decode_mode;

struct fg_decoder {
    fg_replica *r;
    const fg_model *m;
    const fg_backend_vtable *be;
    void *bs;
    int positions, vocab;
    decode_mode *mode;  /* per layer */
    fg_layer *views;    /* per layer: the layer with T = 1 (MODE_VIEW) */
    size_t *row_bytes;  /* per layer: one position of its output */
    int32_t *ids_dev;   /* the token, then the label 0 the softmax op reads */
    int32_t ids_host[2];
};

static int position_wise(const fg_layer *l)
{
    const fg_layer_ops *k = l->ops;
    if (k == &fg_layer_embedding)
        return l->index == 0;
    if (k == &fg_layer_linear)
        return l->in.rank == 2;
    return k == &fg_layer_layernorm || k == &fg_layer_rmsnorm || k == &fg_layer_relu ||
           k == &fg_layer_gelu || k == &fg_layer_tanh || k == &fg_layer_sigmoid;
}

static fg_status plan_layer(fg_decoder *d, const fg_layer *l, fg_error *err)
{
    int T = d->positions;
    if (l->ops->flags & FG_LAYER_EVAL_IDENTITY) {
        d->mode[l->index] = MODE_SKIP;
        return FG_OK;
    }
    if (l->out.rank != 2 || l->out.dims[0] != T || l->input_count > 1 ||
        (!l->ops->decode && !position_wise(l)))
        return fg_error_set(err, FG_UNAVAILABLE, "%s: [%s] (%s) has no incremental path for "
                            "the KV cache", l->origin, l->section, l->ops->type);
    if (l->ops == &fg_layer_transformer_block && !l->causal)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: [%s] causal = false: the KV cache needs "
                            "causal attention", l->origin, l->section);
    if (l->ops == &fg_layer_transformer_block && l->recompute)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: [%s] recompute = true: the block keeps "
                            "no K and V of its own to cache (set recompute = false to generate "
                            "with the cache)", l->origin, l->section);
    d->mode[l->index] = l->ops->decode ? MODE_DECODE : MODE_VIEW;
    fg_layer *v = &d->views[l->index];
    *v = *l;
    v->in.dims[0] = 1;
    v->out.dims[0] = 1;
    size_t act = fg_dtype_size((fg_dtype)fg_replica_act_dtype(d->r));
    d->row_bytes[l->index] = (size_t)l->out.dims[1] * act;
    return FG_OK;
}

fg_status fg_decoder_create(fg_replica *r, fg_decoder **out, fg_error *err)
{
    *out = NULL;
    const fg_model *m = fg_replica_model(r);
    size_t n = m->layer_count;
    if (m->is_graph)
        return fg_error_set(err, FG_UNAVAILABLE, "the KV cache runs a chain of layers; this "
                            "model's layers name their inputs (input = ...)");
    fg_decoder *d = calloc(1, sizeof *d);
    if (!d || !(d->mode = calloc(n, sizeof *d->mode)) ||
        !(d->views = calloc(n, sizeof *d->views)) ||
        !(d->row_bytes = calloc(n, sizeof *d->row_bytes))) {
        fg_decoder_destroy(d);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory creating the KV cache");
    }
    fg_layer_ctx c;
    fg_replica_decode_ctx(r, &m->layers[0], NULL, &c);
    *d = (fg_decoder){r, m, c.be, c.bs, fg_model_positions(m), m->num_classes, d->mode,
                      d->views, d->row_bytes, NULL, {0, 0}};
    fg_status st = FG_OK;
    for (size_t i = 0; st == FG_OK && i < n; i++)
        st = plan_layer(d, &m->layers[i], err);
    if (st == FG_OK)
        st = d->be->alloc(d->bs, fg_replica_device(r), sizeof d->ids_host, (void **)&d->ids_dev,
                          err);
    return FG_CREATED(st, d, out, fg_decoder_destroy);
}

void fg_decoder_destroy(fg_decoder *d)
{
    if (!d)
        return;
    if (d->ids_dev)
        d->be->free(d->bs, fg_replica_device(d->r), d->ids_dev);
    free(d->mode);
    free(d->views);
    free(d->row_bytes);
    free(d);
}

static fg_status layer_step(fg_decoder *d, const fg_layer *l, void *queue, int pos,
                            const void **cur, fg_error *err)
{
    fg_layer_ctx c;
    fg_replica_decode_ctx(d->r, l, queue, &c);
    c.x = *cur;
    c.y = (char *)c.y + (size_t)pos * d->row_bytes[l->index];
    fg_status st = d->mode[l->index] == MODE_DECODE ? l->ops->decode(l, &c, pos, err)
                 : l->ops->forward(&d->views[l->index], &c, err);
    if (st != FG_OK) {
        char why[FG_ERROR_MESSAGE_MAX];
        snprintf(why, sizeof why, "%s", err ? err->message : "");
        return fg_error_set(err, st, "[%s] (%s) at position %d of the KV cache: %s",
                            l->section, l->ops->type, pos, why);
    }
    *cur = c.y;
    return FG_OK;
}

fg_status fg_decoder_step(fg_decoder *d, void *queue, int32_t token, int pos, fg_error *err)
{
    if (pos < 0 || pos >= d->positions)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "KV cache: position %d is outside the "
                            "model's context of %d", pos, d->positions);
    d->ids_host[0] = token;
    d->ids_host[1] = 0;
    int dev = fg_replica_device(d->r);
    fg_status st = d->be->copy(d->bs, queue, d->ids_dev, dev, d->ids_host, -1,
                               sizeof d->ids_host, err);
    const void *cur = d->ids_dev;
    for (size_t i = 0; st == FG_OK && i < d->m->layer_count; i++)
        if (d->mode[i] != MODE_SKIP)
            st = layer_step(d, &d->m->layers[i], queue, pos, &cur, err);
    float *probs = (float *)(uintptr_t)fg_replica_probs(d->r) + (size_t)pos * (size_t)d->vocab;
    if (st == FG_OK)
        st = fg_xent_forward(d->be, d->bs, queue, fg_replica_act_dtype(d->r), cur,
                             d->ids_dev + 1, 1, d->vocab, probs, NULL, NULL, err);
    return st;
}
