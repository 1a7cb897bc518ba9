/* Layer normalisation over the last dimension, as torch.nn.LayerNorm(C) (weight and bias),
 * and RMS normalisation, as torch.nn.RMSNorm(C) (weight only). Any input rank: the rows
 * are every position before the last dimension. */
#include <stdio.h>

#include "model.h"

static const fg_option layernorm_options[] = {
    FG_LAYER_TYPE_OPTION("layernorm"),
    {"eps", FG_OPT_FLOAT, "1e-5", 0, 1, NULL, "added to the variance before the square root"},
    {"bias", FG_OPT_BOOL, "true", 1, 0, NULL, "add a learned bias (beta)"},
};

static const fg_option rmsnorm_options[] = {
    FG_LAYER_TYPE_OPTION("rmsnorm"),
    {"eps", FG_OPT_FLOAT, "1e-6", 0, 1, NULL, "added to the mean square before the square root"},
};

static int norm_cols(const fg_layer *l) { return (int)l->in.dims[l->in.rank - 1]; }
static int norm_rows(const fg_layer *l) { return (int)(fg_shape_numel(&l->in) / norm_cols(l)); }

static fg_status norm_configure(fg_layer *l, const fg_config *cfg, int rms, fg_error *err)
{
    l->rms = rms;
    l->bias = !rms;
    fg_status st = fg_layer_read_float(l, cfg, "eps", &l->eps, err);
    if (st == FG_OK && !rms)
        st = fg_layer_read_bool(l, cfg, "bias", &l->bias, err);
    if (st == FG_OK && !(l->eps > 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] eps must be positive",
                            fg_config_origin(cfg, l->section, "eps"), l->section);
    return st;
}

static fg_status layernorm_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    return norm_configure(l, cfg, 0, err);
}

static fg_status rmsnorm_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    return norm_configure(l, cfg, 1, err);
}

static fg_status norm_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    if (l->in.rank < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] needs an input, but %s",
                            l->origin, l->section, l->input_text);
    l->out = l->in;
    int64_t c = l->in.dims[l->in.rank - 1];
    l->aux_per_sample = 2 * (fg_shape_numel(&l->in) / (size_t)c) * sizeof(float);
    fg_status st = fg_model_add_tensor(m, l, "weight", 0, 1, &c, FG_INIT_ONE, 0, err);
    if (st == FG_OK && l->bias)
        st = fg_model_add_tensor(m, l, "bias", 0, 1, &c, FG_INIT_ZERO, 0, err);
    return st;
}

/* aux: (batch * rows) means, then as many 1/std */
static fg_status norm_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    int rows = c->batch * norm_rows(l);
    float *mean = c->aux, *rstd = mean + rows;
    return FG_OP(c, err, layernorm_forward, c->dt.act, c->dt.param, l->rms, rows, norm_cols(l),
                 c->x, c->param[0], l->bias ? c->param[1] : NULL, (float)l->eps, mean, rstd,
                 c->y);
}

static fg_status norm_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    int rows = c->batch * norm_rows(l);
    const float *mean = c->aux, *rstd = mean + rows;
    return FG_OP(c, err, layernorm_backward, c->dt.act, c->dt.param, c->dt.grad, l->rms, rows,
                 norm_cols(l), c->x, c->param[0], mean, rstd, c->dy, c->dx, c->grad[0],
                 l->bias ? c->grad[1] : NULL, c->accumulate);
}

static void norm_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                          fg_op_needs *n)
{
    FG_NEED(n, l->section, FG_OP_LAYERNORM_FORWARD, dt->act, dt->param);
    if (training)
        FG_NEED(n, l->section, FG_OP_LAYERNORM_BACKWARD, dt->act, dt->param, dt->grad);
}

const fg_layer_ops fg_layer_layernorm = {
    .type = "layernorm",
    .options = layernorm_options,
    .option_count = sizeof layernorm_options / sizeof layernorm_options[0],
    .flags = FG_LAYER_DX_OPTIONAL,
    .configure = layernorm_configure,
    .plan = norm_plan,
    .forward = norm_forward,
    .backward = norm_backward,
    .op_needs = norm_op_needs,
};

const fg_layer_ops fg_layer_rmsnorm = {
    .type = "rmsnorm",
    .options = rmsnorm_options,
    .option_count = sizeof rmsnorm_options / sizeof rmsnorm_options[0],
    .flags = FG_LAYER_DX_OPTIONAL,
    .configure = rmsnorm_configure,
    .plan = norm_plan,
    .forward = norm_forward,
    .backward = norm_backward,
    .op_needs = norm_op_needs,
};
