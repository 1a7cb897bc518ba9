/* Batch normalisation per channel: after a conv (c, h, w) over n*h*w values per channel,
 * after a linear (f) over n values per feature, as torch.nn.BatchNorm2d / BatchNorm1d.
 * weight (gamma) and bias (beta) are trained; running_mean and running_var are buffers. */
#include <stdio.h>

#include "model.h"

static const fg_option batchnorm_options[] = {
    FG_LAYER_TYPE_OPTION("batchnorm"),
    {"momentum", FG_OPT_FLOAT, "0.1", 0, 1, NULL,
     "weight of the new batch in the running statistics"},
    {"eps", FG_OPT_FLOAT, "1e-5", 0, 1, NULL, "added to the variance before the square root"},
};

static int bn_channels(const fg_layer *l) { return (int)l->in.dims[0]; }
static int bn_spatial(const fg_layer *l)
{
    return (int)(fg_shape_numel(&l->in) / (size_t)l->in.dims[0]);
}

static fg_status batchnorm_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    fg_status st = fg_layer_read_float(l, cfg, "momentum", &l->momentum, err);
    if (st == FG_OK)
        st = fg_layer_read_float(l, cfg, "eps", &l->eps, err);
    if (st == FG_OK && !(l->eps > 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] eps must be positive",
                            fg_config_origin(cfg, l->section, "eps"), l->section);
    return st;
}

static fg_status batchnorm_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    if (l->in.rank != 1 && l->in.rank != 3)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] (batchnorm) normalises features (f) or channels (c, h, w), "
                            "but %s",
                            l->origin, l->section, l->input_text);
    l->out = l->in;
    int64_t c = l->in.dims[0];
    l->aux_fixed = 2 * (size_t)c * sizeof(float); /* saved mean and 1/std, per channel */
    fg_status st = fg_model_add_tensor(m, l, "weight", 0, 1, &c, FG_INIT_ONE, 0, err);
    if (st == FG_OK)
        st = fg_model_add_tensor(m, l, "bias", 0, 1, &c, FG_INIT_ZERO, 0, err);
    if (st == FG_OK)
        st = fg_model_add_tensor(m, l, "running_mean", 1, 1, &c, FG_INIT_ZERO, 0, err);
    if (st == FG_OK)
        st = fg_model_add_tensor(m, l, "running_var", 1, 1, &c, FG_INIT_ONE, 0, err);
    return st;
}

static fg_status batchnorm_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    int ch = bn_channels(l), sp = bn_spatial(l);
    if (c->training && c->batch * sp < 2)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "training needs more than one value per channel, got batch %d x %d",
                            c->batch, sp);
    float *saved = c->aux; /* (2, c): mean, invstd */
    return FG_OP(c, err, batchnorm_forward, c->dt.act, c->dt.param, c->training, c->batch, ch,
                 sp, c->x, c->param[0], c->param[1], c->buffer[0], c->buffer[1],
                 (float)l->momentum, (float)l->eps, saved, saved + ch, c->y);
}

static fg_status batchnorm_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    int ch = bn_channels(l), sp = bn_spatial(l);
    const float *saved = c->aux; /* (2, c): mean, invstd */
    return FG_OP(c, err, batchnorm_backward, c->dt.act, c->dt.param, c->dt.grad, c->batch, ch,
                 sp, c->x, c->param[0], saved, saved + ch, c->dy, c->dx, c->grad[0],
                 c->grad[1], c->accumulate);
}

static void batchnorm_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                               fg_op_needs *n)
{
    FG_NEED(n, l->section, FG_OP_BATCHNORM_FORWARD, dt->act, dt->param);
    if (training)
        FG_NEED(n, l->section, FG_OP_BATCHNORM_BACKWARD, dt->act, dt->param, dt->grad);
}

const fg_layer_ops fg_layer_batchnorm = {
    .type = "batchnorm",
    .options = batchnorm_options,
    .option_count = sizeof batchnorm_options / sizeof batchnorm_options[0],
    .configure = batchnorm_configure,
    .plan = batchnorm_plan,
    .forward = batchnorm_forward,
    .backward = batchnorm_backward,
    .op_needs = batchnorm_op_needs,
};
