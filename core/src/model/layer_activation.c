/* Elementwise activations: relu, gelu (tanh approximation), tanh, sigmoid. The backend's
 * backward gets both the input and the output, so each uses whichever is cheaper. */
#include "model.h"

#define ACT_OPTIONS(kind) {FG_LAYER_TYPE_OPTION(kind)}

static const fg_option relu_options[] = ACT_OPTIONS("relu");
static const fg_option gelu_options[] = ACT_OPTIONS("gelu");
static const fg_option tanh_options[] = ACT_OPTIONS("tanh");
static const fg_option sigmoid_options[] = ACT_OPTIONS("sigmoid");

static int act_of(const fg_layer_ops *k)
{
    if (k == &fg_layer_relu) return FG_ACT_RELU;
    if (k == &fg_layer_gelu) return FG_ACT_GELU;
    if (k == &fg_layer_tanh) return FG_ACT_TANH;
    return FG_ACT_SIGMOID;
}

static fg_status act_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    (void)cfg;
    (void)err;
    l->act = act_of(l->ops);
    return FG_OK;
}

static fg_status act_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    l->out = l->in;
    (void)m;
    (void)err;
    return FG_OK;
}

static fg_status act_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    size_t n = (size_t)c->batch * fg_shape_numel(&l->in);
    return FG_OP(c, err, activation_forward, c->dt.act, l->act, c->x, c->y, n);
}

static fg_status act_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    size_t n = (size_t)c->batch * fg_shape_numel(&l->in);
    return FG_OP(c, err, activation_backward, c->dt.act, l->act, c->x, c->y, c->dy, c->dx, n);
}

static void act_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                         fg_op_needs *n)
{
    FG_NEED(n, l->section, FG_OP_ACTIVATION_FORWARD, dt->act);
    if (training)
        FG_NEED(n, l->section, FG_OP_ACTIVATION_BACKWARD, dt->act);
}

#define ACT_KIND(name_)                                                                       \
    const fg_layer_ops fg_layer_##name_ = {                                                   \
        .type = #name_,                                                                       \
        .options = name_##_options,                                                           \
        .option_count = sizeof name_##_options / sizeof name_##_options[0],                   \
        .configure = act_configure,                                                           \
        .plan = act_plan,                                                                     \
        .forward = act_forward,                                                               \
        .backward = act_backward,                                                             \
        .op_needs = act_op_needs,                                                             \
    }

ACT_KIND(relu);
ACT_KIND(gelu);
ACT_KIND(tanh);
ACT_KIND(sigmoid);
