/* Token embedding, as torch.nn.Embedding: int32 ids (T) -> vectors (T, C) looked up in a
 * weight of (num_embeddings, C). Its input are ids, so it must be the first layer; an id
 * outside the table fails the step naming it. Learned position embedding: (T, C) ->
 * (T, C) + weight[:T], weight (max_positions, C), as GPT-2's wpe. */
#include <inttypes.h>
#include <stdio.h>

#include "model.h"

static const fg_option embedding_options[] = {
    FG_LAYER_TYPE_OPTION("embedding"),
    {"num_embeddings", FG_OPT_INT, FG_OPT_REQUIRED, 1, 1 << 30, NULL,
     "rows of the table: the vocabulary size"},
    {"embedding_dim", FG_OPT_INT, FG_OPT_REQUIRED, 1, 1 << 20, NULL, "width of each vector"},
    {"init_std", FG_OPT_FLOAT, "1", 0, 1e3, NULL,
     "weights drawn from N(0, init_std^2): 1 as PyTorch, 0.02 as GPT-2"},
};

static const fg_option position_options[] = {
    FG_LAYER_TYPE_OPTION("position_embedding"),
    {"max_positions", FG_OPT_INT, FG_OPT_REQUIRED, 1, 1 << 24, NULL,
     "rows of the table: the longest sequence"},
    {"init_std", FG_OPT_FLOAT, "1", 0, 1e3, NULL,
     "weights drawn from N(0, init_std^2): 1 as PyTorch, 0.02 as GPT-2"},
};

static fg_status embedding_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    const fg_layer_key keys[] = {
        {"num_embeddings", .i = &l->in_units},
        {"embedding_dim", .i = &l->units},
        {"init_std", .f = &l->p},
    };
    return fg_layer_read_keys(l, cfg, keys, COUNT(keys), err);
}

static fg_status embedding_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    if (l->index != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] (embedding) reads token ids, so "
                            "it must be the first layer; %s", l->origin, l->section,
                            l->input_text);
    if (l->in.rank != 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] (embedding) reads a sequence of "
                            "token ids (T), but %s", l->origin, l->section, l->input_text);
    l->out.rank = 2;
    l->out.dims[0] = l->in.dims[0];
    l->out.dims[1] = l->units;
    int64_t shape[2] = {l->in_units, l->units};
    return fg_model_add_tensor(m, l, "weight", 0, 2, shape, FG_INIT_NORMAL, l->p, err);
}

static fg_status embedding_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    int n = c->batch * (int)l->in.dims[0];
    return FG_OP(c, err, embedding_forward, c->dt.param, c->dt.act, (const int32_t *)c->x, n,
                 (int)l->units, (int)l->in_units, c->param[0], c->y, 0);
}

static fg_status embedding_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    int n = c->batch * (int)l->in.dims[0];
    return FG_OP(c, err, embedding_backward, c->dt.act, c->dt.grad, (const int32_t *)c->x, n,
                 (int)l->units, (int)l->in_units, c->dy, c->grad[0], c->accumulate);
}

static void embedding_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                               fg_op_needs *n)
{
    FG_NEED(n, l->section, FG_OP_EMBEDDING_FORWARD, dt->param, dt->act);
    if (training)
        FG_NEED(n, l->section, FG_OP_EMBEDDING_BACKWARD, dt->act, dt->grad);
}

const fg_layer_ops fg_layer_embedding = {
    .type = "embedding",
    .options = embedding_options,
    .option_count = sizeof embedding_options / sizeof embedding_options[0],
    .flags = FG_LAYER_DX_OPTIONAL,
    .configure = embedding_configure,
    .plan = embedding_plan,
    .forward = embedding_forward,
    .backward = embedding_backward,
    .op_needs = embedding_op_needs,
};

/* ---- position embedding ---------------------------------------------------------------- */

static fg_status position_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    const fg_layer_key keys[] = {
        {"max_positions", .i = &l->in_units},
        {"init_std", .f = &l->p},
    };
    return fg_layer_read_keys(l, cfg, keys, COUNT(keys), err);
}

static fg_status position_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    if (l->in.rank != 2)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] (position_embedding) adds to a "
                            "sequence of vectors (T, C), but %s", l->origin, l->section,
                            l->input_text);
    if (l->in.dims[0] > l->in_units)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] max_positions = %" PRId64
                            " is shorter than the sequence: %s", l->origin, l->section,
                            l->in_units, l->input_text);
    l->out = l->in;
    int64_t shape[2] = {l->in_units, l->in.dims[1]};
    return fg_model_add_tensor(m, l, "weight", 0, 2, shape, FG_INIT_NORMAL, l->p, err);
}

/* y = x + weight[:T], weight[:T] as a (T*C) bias broadcast over the batch */
static fg_status position_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    size_t tc = fg_shape_numel(&l->in);
    fg_status st = FG_OP(c, err, cast, c->dt.act, c->dt.act, c->y, c->x, (size_t)c->batch * tc);
    if (st == FG_OK)
        st = FG_OP(c, err, bias_add, c->dt.act, c->dt.param, c->y, c->param[0], c->batch,
                   (int)tc, 1);
    return st;
}

static fg_status position_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    size_t tc = fg_shape_numel(&l->in), all = (size_t)l->in_units * (size_t)l->in.dims[1];
    fg_status st = FG_OP(c, err, bias_grad, c->dt.grad, c->dt.act, c->grad[0], c->dy, c->batch,
                         (int)tc, 1, c->accumulate);
    if (st == FG_OK && !c->accumulate && all > tc) /* rows past T get no gradient */
        st = FG_OP(c, err, fill, c->dt.grad,
                   (char *)c->grad[0] + tc * fg_dtype_size((fg_dtype)c->dt.grad), 0.0f,
                   all - tc);
    if (st == FG_OK && c->dx)
        st = FG_OP(c, err, cast, c->dt.act, c->dt.act, c->dx, c->dy, (size_t)c->batch * tc);
    return st;
}

/* One position: y = x + weight[pos] */
static fg_status position_decode(const fg_layer *l, const fg_layer_ctx *c, int pos,
                                 fg_error *err)
{
    int cols = (int)l->in.dims[1];
    const char *row = (const char *)c->param[0] +
                      (size_t)pos * (size_t)cols * fg_dtype_size((fg_dtype)c->dt.param);
    fg_status st = FG_OP(c, err, cast, c->dt.act, c->dt.act, c->y, c->x, (size_t)cols);
    if (st == FG_OK)
        st = FG_OP(c, err, bias_add, c->dt.act, c->dt.param, c->y, row, 1, cols, 1);
    return st;
}

static void position_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                              fg_op_needs *n)
{
    FG_NEED(n, l->section, FG_OP_CAST, dt->act, dt->act);
    FG_NEED(n, l->section, FG_OP_BIAS_ADD, dt->act, dt->param);
    if (!training)
        return;
    FG_NEED(n, l->section, FG_OP_BIAS_GRAD, dt->grad, dt->act);
    FG_NEED(n, l->section, FG_OP_FILL, dt->grad);
}

const fg_layer_ops fg_layer_position_embedding = {
    .type = "position_embedding",
    .options = position_options,
    .option_count = sizeof position_options / sizeof position_options[0],
    .flags = FG_LAYER_DX_OPTIONAL,
    .configure = position_configure,
    .plan = position_plan,
    .forward = position_forward,
    .backward = position_backward,
    .op_needs = position_op_needs,
    .decode = position_decode,
};
