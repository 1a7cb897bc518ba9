/* Flatten: (c, h, w) -> (c*h*w). Row-major memory is already flat, so the replica hands
 * the input on as the output and the gradient back unchanged: no copy, no op. Of an NHWC
 * tensor ([model] memory_format = channels_last, layout.h) it is a transpose back to NCHW,
 * forward and backward, so the flattened order is NCHW's in either format. */
#include "layout.h"
#include "model.h"

static const fg_option flatten_options[] = {
    FG_LAYER_TYPE_OPTION("flatten"),
};

static fg_status flatten_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    l->out.rank = 1;
    l->out.dims[0] = (int64_t)fg_shape_numel(&l->in);
    (void)m;
    (void)err;
    return FG_OK;
}

const fg_layer_ops fg_layer_flatten = {
    .type = "flatten",
    .options = flatten_options,
    .option_count = sizeof flatten_options / sizeof flatten_options[0],
    .flags = FG_LAYER_ALIAS,
    .plan = flatten_plan,
};

/* (c, h*w) of the (c, h, w) input */
static int channels(const fg_layer *l) { return (int)l->in.dims[0]; }
static int plane(const fg_layer *l) { return (int)(l->in.dims[1] * l->in.dims[2]); }

/* y (n, c, h*w) = x (n, h*w, c) transposed */
static fg_status flatten_nhwc_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    return fg_layout_transpose(c, plane(l), channels(l), c->x, c->y, err);
}

static fg_status flatten_nhwc_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    if (!c->dx)
        return FG_OK;
    return fg_layout_transpose(c, channels(l), plane(l), c->dy, c->dx, err);
}

/* layout.c adds the transpose's need once for the model */
const fg_layer_ops fg_layer_flatten_nhwc = {
    .type = "flatten",
    .options = flatten_options,
    .option_count = sizeof flatten_options / sizeof flatten_options[0],
    .flags = FG_LAYER_DX_OPTIONAL,
    .plan = flatten_plan,
    .forward = flatten_nhwc_forward,
    .backward = flatten_nhwc_backward,
};
