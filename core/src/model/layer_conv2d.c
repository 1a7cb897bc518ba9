/* Conv2d over NCHW (NHWC under [model] memory_format = channels_last, layout.h): weight
 * (out_channels, in_channels, k, k) in either, bias (out_channels), square kernel, stride
 * and padding, as torch.nn.Conv2d. */
#include <math.h>
#include <stdio.h>

#include "layout.h"
#include "model.h"

static const fg_option conv2d_options[] = {
    FG_LAYER_TYPE_OPTION("conv2d"),
    {"out_channels", FG_OPT_INT, FG_OPT_REQUIRED, 1, 1 << 20, NULL, "output channels"},
    {"kernel_size", FG_OPT_INT, FG_OPT_REQUIRED, 1, 1 << 12, NULL, "square kernel side"},
    {"stride", FG_OPT_INT, "1", 1, 1 << 12, NULL, "step between windows"},
    {"padding", FG_OPT_INT, "0", 0, 1 << 12, NULL, "zeros added on each side"},
    {"bias", FG_OPT_BOOL, "true", 1, 0, NULL, "add a learned bias per output channel"},
};

static fg_status conv2d_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    int64_t k = 0, s = 0, p = 0;
    const fg_layer_key keys[] = {
        {"out_channels", .i = &l->units},
        {"kernel_size", .i = &k},
        {"stride", .i = &s},
        {"padding", .i = &p},
        {"bias", .b = &l->bias},
    };
    fg_status st = fg_layer_read_keys(l, cfg, keys, COUNT(keys), err);
    l->kernel = (int)k;
    l->stride = (int)s;
    l->padding = (int)p;
    return st;
}

static fg_status conv2d_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    if (l->in.rank != 3)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] (conv2d) needs a (channels, height, width) input but %s; "
                            "set [model] input = C,H,W or remove the flatten before it",
                            l->origin, l->section, l->input_text);
    fg_status st = fg_layer_plan_window(l, l->units, err);
    if (st != FG_OK)
        return st;
    int64_t c = l->in.dims[0];
    int64_t fan_in = c * l->kernel * l->kernel;
    double bound = 1.0 / sqrt((double)fan_in); /* kaiming_uniform(a=sqrt(5)) */
    int64_t wshape[4] = {l->units, c, l->kernel, l->kernel};
    st = fg_model_add_tensor(m, l, "weight", 0, 4, wshape, FG_INIT_UNIFORM, bound, err);
    if (st == FG_OK && l->bias)
        st = fg_model_add_tensor(m, l, "bias", 0, 1, &l->units, FG_INIT_UNIFORM, bound, err);
    return st;
}

static size_t conv2d_workspace(const fg_layer *l, const fg_backend_vtable *be, void *bs,
                               int batch)
{
    if (!FG_BACKEND_HAS(be, conv2d_workspace))
        return 0;
    fg_conv2d_desc d;
    fg_layer_window_desc(l, batch, &d);
    return be->conv2d_workspace(bs, &d);
}

static fg_status conv2d_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    fg_conv2d_desc d;
    fg_layer_window_desc(l, c->batch, &d);
    fg_status st = fg_layout_enter(l, c, err);
    if (st != FG_OK)
        return st;
    return FG_OP(c, err, conv2d_forward, c->dt.act, c->dt.param, &d, fg_layout_x(l, c),
                 c->param[0], l->bias ? c->param[1] : NULL, c->y, c->workspace);
}

static fg_status conv2d_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    fg_conv2d_desc d;
    fg_layer_window_desc(l, c->batch, &d);
    fg_status st = FG_OP(c, err, conv2d_backward, c->dt.act, c->dt.param, c->dt.grad, &d,
                         fg_layout_x(l, c), c->param[0], c->dy, fg_layout_dx(l, c), c->grad[0],
                         l->bias ? c->grad[1] : NULL, c->accumulate, c->workspace);
    return st == FG_OK ? fg_layout_leave_dx(l, c, err) : st;
}

static void conv2d_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                            fg_op_needs *n)
{
    FG_NEED(n, l->section, FG_OP_CONV2D_FORWARD, dt->act, dt->param);
    if (training)
        FG_NEED(n, l->section, FG_OP_CONV2D_BACKWARD, dt->act, dt->param, dt->grad);
}

/* every output value: a kernel x kernel x in_channels dot product */
static int64_t conv2d_flops(const fg_layer *l)
{
    return 2 * (int64_t)fg_shape_numel(&l->out) * l->kernel * l->kernel * l->in.dims[0];
}

const fg_layer_ops fg_layer_conv2d = {
    .type = "conv2d",
    .options = conv2d_options,
    .option_count = sizeof conv2d_options / sizeof conv2d_options[0],
    .flags = FG_LAYER_DX_OPTIONAL,
    .configure = conv2d_configure,
    .plan = conv2d_plan,
    .workspace_bytes = conv2d_workspace,
    .forward = conv2d_forward,
    .backward = conv2d_backward,
    .op_needs = conv2d_op_needs,
    .flops = conv2d_flops,
};
