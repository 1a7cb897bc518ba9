/* Flatten: (c, h, w) -> (c*h*w). Row-major memory is already flat, so the replica hands
 * the input on as the output and the gradient back unchanged: no copy, no op. */
#include "model.h"

static const fg_option flatten_options[] = {
    FG_LAYER_TYPE_OPTION("flatten"),
};

static fg_status flatten_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    (void)l;
    (void)cfg;
    (void)err;
    return FG_OK;
}

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
    .configure = flatten_configure,
    .plan = flatten_plan,
};
