/* [model] batch_groups: the layers' checks and their passes group by group. See
 * batch_groups.h. */
#include "batch_groups.h"

#include "model_internal.h"

static const char *unsupported(const fg_model *m, const fg_layer *l)
{
    int drops = l->ops == &fg_layer_dropout || l->ops == &fg_layer_transformer_block;
    if (drops && l->p > 0) /* p: the dropout's, the block's attn_dropout */
        return "draws its dropout masks from one stream over the batch, where each rank of "
               "ddp draws from its own";
    if (l->nhwc)
        return "is channels-last ([model] memory_format)";
    if (l->param_count == 0 && !l->tied)
        return NULL; /* sample by sample */
    if (l->ops == &fg_layer_batchnorm)
        return NULL; /* runs its groups itself */
    if (l->tied || l->weight_shared)
        return "shares its weight with another layer (tie), whose gradients add in another "
               "order";
    if (l->fp8)
        return "runs fp8 gemms, whose scales come from the whole batch";
    if (l->aux_per_sample && l->aux_fixed)
        return "keeps state per sample after state of its own, which its groups would share";
    if (l->input_count > 1)
        return "has two inputs";
    return m->pad_vocab_to > 1 ? "writes padded logits ([model] pad_vocab_to)" : NULL;
}

fg_status fg_batch_groups_check(const fg_model *m, const fg_config *cfg, fg_error *err)
{
    if (m->batch_groups <= 1)
        return FG_OK;
    for (size_t i = 0; i < m->layer_count; i++) {
        const fg_layer *l = &m->layers[i];
        const char *why = unsupported(m, l);
        if (why)
            return fg_error_set(err, FG_UNAVAILABLE,
                                "%s: [model] batch_groups = %lld: [%s] (%s, %s) %s; batch "
                                "groups cannot reproduce the ranks' sums with it",
                                fg_config_origin(cfg, "model", "batch_groups"),
                                (long long)m->batch_groups, l->section, l->ops->type,
                                l->origin, why);
    }
    return FG_OK;
}

/* The bytes from a layer's first gradient to the end of its last. */
static size_t grad_span(const fg_model *m, const fg_layer *l, size_t grad_size)
{
    if (l->param_count == 0 || l->tied)
        return 0;
    const fg_tensor_info *first = &m->tensors[l->param_tensor[0]];
    const fg_tensor_info *last = &m->tensors[l->param_tensor[l->param_count - 1]];
    return (last->offset + last->numel - first->offset) * grad_size;
}

size_t fg_batch_groups_grad_bytes(const fg_model *m, size_t first, size_t end,
                                  size_t grad_size)
{
    size_t most = 0;
    for (size_t i = first; m->batch_groups > 1 && i < end; i++) {
        size_t b = grad_span(m, &m->layers[i], grad_size);
        most = b > most ? b : most;
    }
    return most;
}

size_t fg_batch_groups_host_doubles(const fg_model *m, size_t first, size_t end)
{
    size_t most = 0;
    for (size_t i = first; m->batch_groups > 1 && i < end; i++) {
        const fg_layer *l = &m->layers[i];
        size_t n = l->ops == &fg_layer_batchnorm
                       ? (size_t)m->batch_groups * (2 * (size_t)l->in.dims[0] + 1)
                       : 0;
        most = n > most ? n : most;
    }
    return most;
}

void *fg_group_grad(const fg_layer_ctx *c, int j)
{
    return (char *)c->group_grads + ((char *)c->grad[j] - (char *)c->grad[0]);
}

fg_status fg_group_grad_add(const fg_layer_ctx *c, int j, size_t count, fg_error *err)
{
    return c->be->axpy(c->bs, c->queue, c->dt.grad, c->dt.grad, 1.0f, fg_group_grad(c, j),
                       c->grad[j], count, err);
}

fg_status fg_group_sums_add(const fg_layer_ctx *c, double *sums, size_t count, int groups,
                            fg_error *err)
{
    double *h = c->group_host;
    size_t bytes = count * sizeof(double);
    fg_status st = c->be->copy(c->bs, c->queue, h, -1, sums, c->device, bytes * (size_t)groups,
                               err);
    if (st == FG_OK)
        st = c->be->queue_sync(c->bs, c->queue, err);
    if (st != FG_OK)
        return st;
    for (size_t i = 0; i < count; i++)
        for (int g = 1; g < groups; g++)
            h[i] += h[(size_t)g * count + i];
    st = c->be->copy(c->bs, c->queue, sums, c->device, h, -1, bytes, err);
    /* the host source must stay as it is until the copy is done; the next layer reuses it */
    return st == FG_OK ? c->be->queue_sync(c->bs, c->queue, err) : st;
}

static int groups_run(const fg_layer *l, const fg_layer_ctx *c)
{
    return c->groups > 1 && l->param_count > 0 && l->ops != &fg_layer_batchnorm;
}

fg_status fg_group_batch_check(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    if (c->batch % c->groups == 0)
        return FG_OK;
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "[%s]: batch %d does not split into [model] batch_groups = %d equal "
                        "groups", l->section, c->batch, c->groups);
}

static const void *rows_at(const void *p, size_t bytes)
{
    return p ? (const char *)p + bytes : NULL;
}

/* Group g's view of the pass: its rows of x, y, dy and dx, and its own part of the layer's
 * per-sample arena bytes (laid out by the layer for a batch of the group's size). */
static fg_layer_ctx group_ctx(const fg_layer *l, const fg_layer_ctx *c, int g)
{
    fg_layer_ctx s = *c;
    size_t act = fg_dtype_size((fg_dtype)c->dt.act);
    size_t x_size = l->ops == &fg_layer_embedding ? sizeof(int32_t) : act; /* token ids */
    size_t rows = (size_t)g * (size_t)(c->batch / c->groups);
    size_t in = rows * fg_shape_numel(&l->in), out = rows * fg_shape_numel(&l->out) * act;
    s.batch = c->batch / c->groups;
    s.groups = 1;
    s.x = rows_at(c->x, in * x_size);
    s.y = (void *)(uintptr_t)rows_at(c->y, out);
    s.dy = rows_at(c->dy, out);
    s.dx = (void *)(uintptr_t)rows_at(c->dx, in * act);
    if (l->aux_per_sample)
        s.aux = (char *)c->aux + rows * l->aux_per_sample;
    return s;
}

fg_status fg_layer_forward_grouped(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    if (!groups_run(l, c))
        return l->ops->forward(l, c, err);
    fg_status st = fg_group_batch_check(l, c, err);
    for (int g = 0; st == FG_OK && g < c->groups; g++) {
        fg_layer_ctx s = group_ctx(l, c, g);
        st = l->ops->forward(l, &s, err);
    }
    return st;
}

fg_status fg_layer_backward_grouped(const fg_model *m, const fg_layer *l,
                                    const fg_layer_ctx *c, fg_error *err)
{
    if (!groups_run(l, c))
        return l->ops->backward(l, c, err);
    fg_status st = fg_group_batch_check(l, c, err);
    for (int g = 0; st == FG_OK && g < c->groups; g++) {
        fg_layer_ctx s = group_ctx(l, c, g);
        if (g > 0) { /* its own gradients, then added to the groups' before it */
            for (int j = 0; j < l->param_count; j++)
                s.grad[j] = fg_group_grad(c, j);
            s.accumulate = 0;
        }
        st = l->ops->backward(l, &s, err);
        for (int j = 0; g > 0 && st == FG_OK && j < l->param_count; j++)
            st = fg_group_grad_add(c, j, m->tensors[l->param_tensor[j]].numel, err);
    }
    return st;
}
