/* Add: y = x + x2, two inputs of one shape (a residual connection: `input = a, b`).
 * Backward hands dy to both inputs; the graph sums it with whatever else reached them. */
#include "model.h"

static const fg_option add_options[] = {
    FG_LAYER_TYPE_OPTION("add"),
};

static fg_status add_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    (void)m;
    int same = l->in.rank == l->in2.rank;
    for (int i = 0; same && i < l->in.rank; i++)
        same = l->in.dims[i] == l->in2.dims[i];
    if (!same)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] adds tensors of different "
                            "shapes: %s; both inputs must have one shape",
                            l->origin, l->section, l->input_text);
    l->out = l->in;
    return FG_OK;
}

/* dst = a + b, or dst = a when b is NULL, through fill and axpy (exact for f32). */
static fg_status sum_into(const fg_layer_ctx *c, void *dst, const void *a, const void *b,
                          size_t n, fg_error *err)
{
    uint32_t t = c->dt.act;
    fg_status st = FG_OP(c, err, fill, t, dst, 0.0f, n);
    if (st == FG_OK)
        st = FG_OP(c, err, axpy, t, t, 1.0f, a, dst, n);
    if (st == FG_OK && b)
        st = FG_OP(c, err, axpy, t, t, 1.0f, b, dst, n);
    return st;
}

static fg_status add_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    size_t n = (size_t)c->batch * fg_shape_numel(&l->out);
    return sum_into(c, c->y, c->x, c->x2, n, err);
}

static fg_status add_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    size_t n = (size_t)c->batch * fg_shape_numel(&l->out);
    fg_status st = c->dx ? sum_into(c, c->dx, c->dy, NULL, n, err) : FG_OK;
    if (st == FG_OK && c->dx2)
        st = sum_into(c, c->dx2, c->dy, NULL, n, err);
    return st;
}

static void add_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                         fg_op_needs *n)
{
    (void)training;
    FG_NEED(n, l->section, FG_OP_FILL, dt->act);
    FG_NEED(n, l->section, FG_OP_AXPY, dt->act, dt->act);
}

const fg_layer_ops fg_layer_add = {
    .type = "add",
    .options = add_options,
    .option_count = sizeof add_options / sizeof add_options[0],
    .flags = FG_LAYER_TWO_INPUTS | FG_LAYER_DX_OPTIONAL,
    .plan = add_plan,
    .forward = add_forward,
    .backward = add_backward,
    .op_needs = add_op_needs,
};
