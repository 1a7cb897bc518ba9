/* Max and average pooling over NCHW (NHWC under [model] memory_format = channels_last,
 * layout.h) with a square window, as torch.nn.MaxPool2d and AvgPool2d. Max pooling keeps
 * the argmax of each window for backward. */
#include <inttypes.h>
#include <stdio.h>

#include "layout.h"
#include "model.h"

#define POOL_OPTIONS(kind)                                                                     \
    {                                                                                          \
        FG_LAYER_TYPE_OPTION(kind),                                                            \
        {"kernel_size", FG_OPT_INT, FG_OPT_REQUIRED, 1, 1 << 12, NULL, "square window side"},  \
        {"stride", FG_OPT_INT, "0", 0, 1 << 12, NULL, "step between windows; 0: kernel_size"}, \
        {"padding", FG_OPT_INT, "0", 0, 1 << 12, NULL,                                         \
         "implicit padding on each side, at most kernel_size / 2"},                            \
    }

static const fg_option maxpool_options[] = POOL_OPTIONS("maxpool2d");
static const fg_option avgpool_options[] = POOL_OPTIONS("avgpool2d");

static int pool_mode(const fg_layer *l)
{
    return l->ops == &fg_layer_maxpool2d ? FG_POOL_MAX : FG_POOL_AVG;
}

static fg_status pool_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    int64_t k = 0, s = 0, p = 0;
    const fg_layer_key keys[] = {
        {"kernel_size", .i = &k},
        {"stride", .i = &s},
        {"padding", .i = &p},
    };
    fg_status st = fg_layer_read_keys(l, cfg, keys, COUNT(keys), err);
    if (st != FG_OK)
        return st;
    l->kernel = (int)k;
    l->stride = s ? (int)s : (int)k;
    l->padding = (int)p;
    if (2 * p > k)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] padding = %" PRId64 " is more than half of kernel_size = %" PRId64,
                            fg_config_origin(cfg, l->section, "padding"), l->section, p, k);
    return FG_OK;
}

static fg_status pool_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    if (l->in.rank != 3)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] (%s) needs a (channels, height, width) input but %s",
                            l->origin, l->section, l->ops->type, l->input_text);
    fg_status st = fg_layer_plan_window(l, l->in.dims[0], err);
    if (st != FG_OK)
        return st;
    l->units = l->in.dims[0];
    if (pool_mode(l) == FG_POOL_MAX)
        l->aux_per_sample = fg_shape_numel(&l->out) * sizeof(int32_t); /* argmax */
    (void)m;
    return FG_OK;
}

static fg_status pool_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    fg_conv2d_desc d;
    fg_layer_window_desc(l, c->batch, &d);
    int mode = pool_mode(l);
    fg_status st = fg_layout_enter(l, c, err);
    if (st != FG_OK)
        return st;
    return FG_OP(c, err, pool2d_forward, c->dt.act, mode, &d, fg_layout_x(l, c), c->y,
                 mode == FG_POOL_MAX ? (int32_t *)c->aux : NULL);
}

static fg_status pool_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    fg_conv2d_desc d;
    fg_layer_window_desc(l, c->batch, &d);
    int mode = pool_mode(l);
    fg_status st = FG_OP(c, err, pool2d_backward, c->dt.act, mode, &d, c->dy,
                         mode == FG_POOL_MAX ? (const int32_t *)c->aux : NULL,
                         fg_layout_dx(l, c));
    return st == FG_OK ? fg_layout_leave_dx(l, c, err) : st;
}

static void pool_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                          fg_op_needs *n)
{
    FG_NEED(n, l->section, FG_OP_POOL2D_FORWARD, dt->act);
    if (training)
        FG_NEED(n, l->section, FG_OP_POOL2D_BACKWARD, dt->act);
}

const fg_layer_ops fg_layer_maxpool2d = {
    .type = "maxpool2d",
    .options = maxpool_options,
    .option_count = sizeof maxpool_options / sizeof maxpool_options[0],
    .configure = pool_configure,
    .plan = pool_plan,
    .forward = pool_forward,
    .backward = pool_backward,
    .op_needs = pool_op_needs,
};

const fg_layer_ops fg_layer_avgpool2d = {
    .type = "avgpool2d",
    .options = avgpool_options,
    .option_count = sizeof avgpool_options / sizeof avgpool_options[0],
    .configure = pool_configure,
    .plan = pool_plan,
    .forward = pool_forward,
    .backward = pool_backward,
    .op_needs = pool_op_needs,
};
