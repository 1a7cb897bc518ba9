/* Linear: y(batch, out) = x(batch, in) W(out, in)^T + b(out), as torch.nn.Linear. The input
 * is flat (in), or a sequence (T, in) that the layer maps position by position to (T, out);
 * an image needs an explicit flatten before it. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "model.h"

static const fg_option linear_options[] = {
    FG_LAYER_TYPE_OPTION("linear"),
    {"out_features", FG_OPT_INT, FG_OPT_REQUIRED, 1, 1 << 30, NULL, "output features"},
    {"in_features", FG_OPT_INT, "0", 0, 1 << 30, NULL,
     "expected input features, checked at build; 0: whatever the previous layer gives"},
    {"bias", FG_OPT_BOOL, "true", 1, 0, NULL, "add a learned bias"},
    {"tie", FG_OPT_STRING, "", 1, 0, NULL,
     "weight tying: use the weight of this earlier embedding layer (GPT-2's lm_head and wte: "
     "one parameter, its gradient summed over both); needs bias = false"},
};

static fg_status linear_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    const fg_layer_key keys[] = {
        {"out_features", .i = &l->units},
        {"in_features", .i = &l->in_units},
        {"bias", .b = &l->bias},
    };
    fg_status st = fg_layer_read_keys(l, cfg, keys, COUNT(keys), err);
    const char *tie = fg_config_get(cfg, l->section, "tie");
    snprintf(l->tie, sizeof l->tie, "%s", tie ? tie : "");
    if (st == FG_OK && l->tie[0] && l->bias)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] tie = %s needs bias = false (a "
                          "tied layer owns no tensor)", fg_config_origin(cfg, l->section, "tie"),
                          l->section, l->tie);
    return st;
}

static fg_status linear_plan_fp8(fg_layer *l, fg_model *m, int64_t in, fg_error *err)
{
    char why[256];
    fg_status st = fg_linear_fp8_plan(l, m, in, why, sizeof why, err);
    fg_model_fp8_note_add(m, why);
    return st;
}

static fg_status linear_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    int64_t in = l->in.rank == 2 ? l->in.dims[1] : (int64_t)fg_shape_numel(&l->in);
    if (l->in_units && l->in_units != in)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] expects %" PRId64 " input features but %s = %" PRId64
                            "; did you forget a flatten or change a conv?",
                            l->origin, l->section, l->in_units, l->input_text, in);
    if (l->in.rank != 1 && l->in.rank != 2)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [%s] (linear) needs a flat input but %s = %" PRId64
                            " values; add a layer with type = flatten before it",
                            l->origin, l->section, l->input_text, in);
    l->out = l->in;
    l->out.dims[l->in.rank - 1] = l->units;
    double bound = 1.0 / sqrt((double)in); /* kaiming_uniform(a=sqrt(5)) = U(+-1/sqrt(fan_in)) */
    int64_t wshape[2] = {l->units, in};
    if (l->tie[0]) {
        fg_status st = fg_model_tie_weight(m, l, l->tie, l->units, in, err);
        return st == FG_OK ? linear_plan_fp8(l, m, in, err) : st;
    }
    fg_status st = fg_model_add_tensor(m, l, "weight", 0, 2, wshape, FG_INIT_UNIFORM, bound, err);
    if (st == FG_OK && l->bias)
        st = fg_model_add_tensor(m, l, "bias", 0, 1, &l->units, FG_INIT_UNIFORM, bound, err);
    return st == FG_OK ? linear_plan_fp8(l, m, in, err) : st;
}

/* Rows of the gemms: one per sample, or one per position of a sequence. */
static int linear_rows(const fg_layer *l, const fg_layer_ctx *c)
{
    return l->in.rank == 2 ? c->batch * (int)l->in.dims[0] : c->batch;
}

static int linear_in(const fg_layer *l)
{
    return (int)l->in.dims[l->in.rank - 1];
}

static fg_status linear_forward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    int in = linear_in(l), out = (int)l->units, rows = linear_rows(l, c);
    if (fg_linear_fp8_runs(l, c, rows))
        return fg_linear_fp8_forward(l, c, rows, out, in, c->y_ld ? c->y_ld : out, err);
    return fg_affine_forward(c, rows, out, in, c->x, c->param[0], l->bias ? c->param[1] : NULL,
                             c->y, c->y_ld ? c->y_ld : out, err);
}

static fg_status linear_backward(const fg_layer *l, const fg_layer_ctx *c, fg_error *err)
{
    int in = linear_in(l), out = (int)l->units, rows = linear_rows(l, c);
    int ldy = c->y_ld ? c->y_ld : out; /* padded logits: rows of ldy, bias-free */
    uint32_t act = c->dt.act, param = c->dt.param;
    if (fg_linear_fp8_runs(l, c, rows))
        return fg_linear_fp8_backward(l, c, rows, out, in, ldy, err);
    /* dW(out, in) (+)= dy^T x, db (+)= sum dy */
    fg_status st = fg_affine_weight_grads(c, rows, out, in, c->x, c->dy, ldy, c->grad[0],
                                          l->bias ? c->grad[1] : NULL, err);
    /* dx(rows, in) = dy W */
    if (st == FG_OK && c->dx)
        st = FG_OP(c, err, gemm, act, param, act, 0, 0, rows, in, out, 1.0f, c->dy, ldy,
                   c->param[0], in, 0.0f, c->dx, in);
    return st;
}

static void linear_op_needs(const fg_layer *l, const fg_role_dtypes *dt, int training,
                            fg_op_needs *n)
{
    FG_NEED(n, l->section, FG_OP_GEMM, dt->act, dt->param, dt->act);
    if (l->fp8) /* and the gemms above for rows that are not a multiple of 16 */
        FG_NEED(n, l->section, FG_OP_GEMM_FP8, dt->act, dt->act);
    if (l->fp8 && training)
        FG_NEED(n, l->section, FG_OP_GEMM_FP8, dt->act, dt->grad);
    if (l->bias)
        FG_NEED(n, l->section, FG_OP_BIAS_ADD, dt->act, dt->param);
    if (!training)
        return;
    FG_NEED(n, l->section, FG_OP_GEMM, dt->act, dt->act, dt->grad);
    if (l->bias)
        FG_NEED(n, l->section, FG_OP_BIAS_GRAD, dt->grad, dt->act);
}

/* every position: an (in x out) product */
static int64_t linear_flops(const fg_layer *l)
{
    int64_t in = l->in.dims[l->in.rank - 1];
    int64_t positions = (int64_t)fg_shape_numel(&l->in) / (in > 0 ? in : 1);
    return 2 * positions * in * l->units;
}

const fg_layer_ops fg_layer_linear = {
    .type = "linear",
    .options = linear_options,
    .option_count = sizeof linear_options / sizeof linear_options[0],
    .flags = FG_LAYER_DX_OPTIONAL,
    .configure = linear_configure,
    .plan = linear_plan,
    .forward = linear_forward,
    .backward = linear_backward,
    .op_needs = linear_op_needs,
    .flops = linear_flops,
};
