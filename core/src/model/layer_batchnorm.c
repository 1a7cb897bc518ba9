/* Batch normalisation per channel: after a conv (c, h, w) over n*h*w values per channel,
 * after a linear (f) over n values per feature, as torch.nn.BatchNorm2d / BatchNorm1d.
 * weight (gamma) and bias (beta) are trained; running_mean and running_var are buffers.
 * Under [model] sync_batchnorm training runs the split ops instead of the fused ones, with
 * the replica all-reduce between them: the statistics (sum, sum of squares, count) in
 * forward and the two sums of backward are those of the whole batch across the replicas.
 * Channels-last (NHWC, layout.h): the same ops over (n*h*w, c, 1), per channel over rows. */
#include <stdio.h>

#include "batch_groups.h"
#include "layout.h"
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
/* The ops' (n, spatial): (batch, h*w) over NCHW, (batch*h*w, 1) over NHWC. */
static int bn_rows(const fg_layer *l, const fg_layer_ctx *c)
{
    return l->nhwc ? c->batch * bn_spatial(l) : c->batch;
}
static int bn_op_spatial(const fg_layer *l) { return l->nhwc ? 1 : bn_spatial(l); }

/* The f64 sums of the split ops: (2c + 1) after the saved statistics, 8-byte aligned (the
 * arena's regions are 64-byte aligned). */
static size_t bn_sums_count(int64_t c) { return 2 * (size_t)c + 1; }
static size_t bn_sums_offset(int64_t c) { return (2 * (size_t)c * sizeof(float) + 7) & ~(size_t)7; }
static double *bn_sums(const fg_layer *l, const fg_layer_ctx *c)
{
    return (double *)(void *)((char *)c->aux + bn_sums_offset(l->in.dims[0]));
}

/* The replica all-reduce of the layer's sums; nothing to do on the only replica. */
static fg_status bn_allreduce(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    if (!c->replica_allreduce)
        return FG_OK;
    return c->replica_allreduce(c->replica_allreduce_user, c->queue, bn_sums(l, c),
                                (int64_t)bn_sums_count(l->in.dims[0]), err);
}

static fg_status batchnorm_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    const fg_layer_key keys[] = {
        {"momentum", .f = &l->momentum},
        {"eps", .f = &l->eps},
    };
    fg_status st = fg_layer_read_keys(l, cfg, keys, COUNT(keys), err);
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
    l->sync_stats = fg_model_sync_batchnorm(m);
    if (l->sync_stats) /* the sums the replicas add up */
        fg_model_count_synced_layer(m);
    l->batch_groups = fg_model_batch_groups(m);
    if (l->sync_stats || l->batch_groups > 1) /* (2c + 1) f64 per group: the sums */
        l->aux_fixed = bn_sums_offset(c) +
                       (size_t)l->batch_groups * bn_sums_count(c) * sizeof(double);
    fg_status st = fg_model_add_tensor(m, l, "weight", 0, 1, &c, FG_INIT_ONE, 0, err);
    if (st == FG_OK)
        st = fg_model_add_tensor(m, l, "bias", 0, 1, &c, FG_INIT_ZERO, 0, err);
    if (st == FG_OK)
        st = fg_model_add_tensor(m, l, "running_mean", 1, 1, &c, FG_INIT_ZERO, 0, err);
    if (st == FG_OK)
        st = fg_model_add_tensor(m, l, "running_var", 1, 1, &c, FG_INIT_ONE, 0, err);
    return st;
}

/* [model] batch_groups: each group's sums (group g's at sums + g (2c + 1)), added in group
 * order as ranks add theirs, then the replicas' all-reduce (none beside one device). */
static fg_status bn_sum_groups(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    fg_status st = fg_group_sums_add(c, bn_sums(l, c), bn_sums_count(l->in.dims[0]), c->groups,
                                     err);
    return st == FG_OK ? bn_allreduce(l, c, err) : st;
}

/* Group g's rows of x (or dy): (batch / groups) samples from sample g (batch / groups). */
static const void *bn_group_rows(const fg_layer *l, const fg_layer_ctx *c, const void *p,
                                 int g)
{
    size_t per = fg_shape_numel(&l->in) * fg_dtype_size((fg_dtype)c->dt.act);
    return (const char *)p + (size_t)g * (size_t)(c->batch / c->groups) * per;
}

static fg_status batchnorm_forward_groups(const fg_layer *l, const fg_layer_ctx *c,
                                          fg_error *err)
{
    int ch = bn_channels(l), sp = bn_op_spatial(l), n = c->batch / c->groups;
    int rows = l->nhwc ? n * bn_spatial(l) : n;
    float *saved = c->aux;
    double *sums = bn_sums(l, c);
    fg_status st = fg_group_batch_check(l, c, err);
    for (int g = 0; st == FG_OK && g < c->groups; g++)
        st = FG_OP(c, err, batchnorm_stats, c->dt.act, rows, ch, sp, bn_group_rows(l, c, c->x, g),
                   sums + (size_t)g * bn_sums_count(ch));
    if (st == FG_OK)
        st = bn_sum_groups(l, c, err);
    if (st == FG_OK)
        st = FG_OP(c, err, batchnorm_apply, c->dt.act, c->dt.param, bn_rows(l, c), ch, sp, c->x,
                   sums, c->param[0], c->param[1], c->buffer[0], c->buffer[1],
                   (float)l->momentum, (float)l->eps, saved, saved + ch, c->y);
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
    fg_status st = fg_layout_enter(l, c, err);
    if (st != FG_OK)
        return st;
    int rows = bn_rows(l, c);
    sp = bn_op_spatial(l);
    const void *x = fg_layout_x(l, c);
    if (c->training && c->groups > 1)
        return batchnorm_forward_groups(l, c, err);
    if (!c->training || !l->sync_stats)
        return FG_OP(c, err, batchnorm_forward, c->dt.act, c->dt.param, c->training, rows, ch,
                     sp, x, c->param[0], c->param[1], c->buffer[0], c->buffer[1],
                     (float)l->momentum, (float)l->eps, saved, saved + ch, c->y);
    double *sums = bn_sums(l, c);
    st = FG_OP(c, err, batchnorm_stats, c->dt.act, rows, ch, sp, x, sums);
    if (st == FG_OK)
        st = bn_allreduce(l, c, err);
    if (st == FG_OK)
        st = FG_OP(c, err, batchnorm_apply, c->dt.act, c->dt.param, rows, ch, sp, x,
                   sums, c->param[0], c->param[1], c->buffer[0], c->buffer[1],
                   (float)l->momentum, (float)l->eps, saved, saved + ch, c->y);
    return st;
}

/* Backward from the whole batch's sums: this replica's dgamma and dbeta, then dx. */
static fg_status batchnorm_backward_synced(const fg_layer *l, const fg_layer_ctx *c,
                                           fg_error *err)
{
    int ch = bn_channels(l), sp = bn_op_spatial(l), rows = bn_rows(l, c);
    const float *saved = c->aux;
    double *sums = bn_sums(l, c);
    const void *x = fg_layout_x(l, c);
    fg_status st = FG_OP(c, err, batchnorm_backward_reduce, c->dt.act, c->dt.grad, rows, ch,
                         sp, x, saved, saved + ch, c->dy, sums, c->grad[0], c->grad[1],
                         c->accumulate);
    if (st != FG_OK || !c->dx) /* no dx on any replica: the sums are not needed */
        return st;
    st = bn_allreduce(l, c, err);
    if (st == FG_OK)
        st = FG_OP(c, err, batchnorm_backward_apply, c->dt.act, c->dt.param, rows, ch, sp, x,
                   c->param[0], saved, saved + ch, c->dy, sums, fg_layout_dx(l, c));
    return st == FG_OK ? fg_layout_leave_dx(l, c, err) : st;
}

/* Each group's dgamma and dbeta (added in group order) and sums, then dx from their total. */
static fg_status batchnorm_backward_groups(const fg_layer *l, const fg_layer_ctx *c,
                                           fg_error *err)
{
    int ch = bn_channels(l), sp = bn_op_spatial(l), n = c->batch / c->groups;
    int rows = l->nhwc ? n * bn_spatial(l) : n;
    const float *saved = c->aux;
    double *sums = bn_sums(l, c);
    fg_status st = fg_group_batch_check(l, c, err);
    for (int g = 0; st == FG_OK && g < c->groups; g++) {
        st = FG_OP(c, err, batchnorm_backward_reduce, c->dt.act, c->dt.grad, rows, ch, sp,
                   bn_group_rows(l, c, c->x, g), saved, saved + ch,
                   bn_group_rows(l, c, c->dy, g), sums + (size_t)g * bn_sums_count(ch),
                   g ? fg_group_grad(c, 0) : c->grad[0], g ? fg_group_grad(c, 1) : c->grad[1],
                   g ? 0 : c->accumulate);
        for (int j = 0; g > 0 && st == FG_OK && j < 2; j++)
            st = fg_group_grad_add(c, j, (size_t)ch, err);
    }
    if (st != FG_OK || !c->dx)
        return st;
    st = bn_sum_groups(l, c, err);
    if (st == FG_OK)
        st = FG_OP(c, err, batchnorm_backward_apply, c->dt.act, c->dt.param, bn_rows(l, c), ch,
                   sp, c->x, c->param[0], saved, saved + ch, c->dy, sums, c->dx);
    return st;
}

static fg_status batchnorm_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    if (c->groups > 1)
        return batchnorm_backward_groups(l, c, err);
    if (l->sync_stats)
        return batchnorm_backward_synced(l, c, err);
    int ch = bn_channels(l);
    const float *saved = c->aux; /* (2, c): mean, invstd */
    fg_status st = FG_OP(c, err, batchnorm_backward, c->dt.act, c->dt.param, c->dt.grad,
                         bn_rows(l, c), ch, bn_op_spatial(l), fg_layout_x(l, c), c->param[0],
                         saved, saved + ch, c->dy, fg_layout_dx(l, c), c->grad[0], c->grad[1],
                         c->accumulate);
    return st == FG_OK ? fg_layout_leave_dx(l, c, err) : st;
}

static void batchnorm_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                               fg_op_needs *n)
{
    FG_NEED(n, l->section, FG_OP_BATCHNORM_FORWARD, dt->act, dt->param);
    if (training && (l->sync_stats || l->batch_groups > 1)) {
        FG_NEED(n, l->section, FG_OP_BATCHNORM_STATS, dt->act);
        FG_NEED(n, l->section, FG_OP_BATCHNORM_APPLY, dt->act, dt->param);
        FG_NEED(n, l->section, FG_OP_BATCHNORM_BACKWARD_REDUCE, dt->act, dt->grad);
        FG_NEED(n, l->section, FG_OP_BATCHNORM_BACKWARD_APPLY, dt->act, dt->param);
    } else if (training) {
        FG_NEED(n, l->section, FG_OP_BATCHNORM_BACKWARD, dt->act, dt->param, dt->grad);
    }
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
