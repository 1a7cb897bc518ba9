/* Dropout: zeroes each value with probability p and scales the rest by 1/(1-p) while
 * training; the identity otherwise (the replica then passes the input through). The mask
 * depends only on (seed, layer, step): a run is reproducible. */
#include <stdio.h>

#include "model.h"

static const fg_option dropout_options[] = {
    FG_LAYER_TYPE_OPTION("dropout"),
    {"p", FG_OPT_FLOAT, "0.5", 0, 1, NULL, "probability of zeroing a value, in [0, 1)"},
};

static fg_status dropout_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    fg_status st = fg_layer_read_float(l, cfg, "p", &l->p, err);
    if (st == FG_OK && !(l->p >= 0 && l->p < 1))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] p = %g is outside [0, 1)",
                            fg_config_origin(cfg, l->section, "p"), l->section, l->p);
    return st;
}

static fg_status dropout_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    l->out = l->in;
    l->aux_per_sample = fg_shape_numel(&l->in); /* the keep mask, one byte a value */
    (void)m;
    (void)err;
    return FG_OK;
}

static fg_status dropout_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    size_t n = (size_t)c->batch * fg_shape_numel(&l->in);
    if (c->dropout_offset_dev) /* the next step's draws are 2^32 on (replica.c) */
        return FG_OP(c, err, dropout_forward_dev, c->dt.act, (float)l->p, c->dropout_seed,
                     c->dropout_offset, c->dropout_offset_dev, 1ull << 32, c->x, c->y, c->aux,
                     n);
    return FG_OP(c, err, dropout_forward, c->dt.act, (float)l->p, c->dropout_seed,
                 c->dropout_offset, c->x, c->y, c->aux, n);
}

static fg_status dropout_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    size_t n = (size_t)c->batch * fg_shape_numel(&l->in);
    return FG_OP(c, err, dropout_backward, c->dt.act, (float)l->p, c->aux, c->dy, c->dx, n);
}

static void dropout_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                             fg_op_needs *n)
{
    if (!training) /* evaluation skips the layer: its output is its input */
        return;
    FG_NEED(n, l->section, FG_OP_DROPOUT_FORWARD, dt->act); /* _dev: graph setup asks */
    FG_NEED(n, l->section, FG_OP_DROPOUT_BACKWARD, dt->act);
}

const fg_layer_ops fg_layer_dropout = {
    .type = "dropout",
    .options = dropout_options,
    .option_count = sizeof dropout_options / sizeof dropout_options[0],
    .flags = FG_LAYER_EVAL_IDENTITY,
    .configure = dropout_configure,
    .plan = dropout_plan,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .op_needs = dropout_op_needs,
};
