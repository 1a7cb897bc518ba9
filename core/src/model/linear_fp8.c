/* One linear map's three gemms in fp8 (precision.fp8-mixed; the backend's gemm_fp8, ABI
 * 1.9), as Transformer Engine's Linear under fp8_autocast with delayed scaling: x and w in
 * E4M3, dy in E5M2 (HYBRID; E4M3 too under the E4M3 format), each with its own scale pair
 * {scale, 1/scale} and amax history, kept in six layer buffers (so checkpoints carry them).
 * The one helper of both layer kinds that have such maps: `linear` (one map) and
 * `transformer_block` (qkv, attn.proj, the MLP's fc or gate/up, and its down projection).
 * Forward updates x's and w's scales from their histories and pushes their amaxes; the
 * weight gradient's gemm does the same for dy; the input gradient's gemm and the weight
 * gradient's x reuse the scales forward and dy's update set. Evaluation updates nothing, nor
 * does a micro-batch after its step's first (c->fp8_hold): the histories advance once per
 * optimizer step. The bias is added (bias_add) and its gradient summed (bias_grad) in the
 * activations' dtype. A call whose rows are not a multiple of 16 (or whose output is not
 * 16-byte aligned) runs in the activations' dtype. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

enum { FP8_X = 0, FP8_W = 1, FP8_DY = 2 }; /* operand slots; buffers 2 * slot (+1) */

static const char *const fp8_names[3] = {"x", "w", "dy"};

int fg_tensor_is_fp8_state(const fg_tensor_info *t)
{
    return t->is_buffer && (strstr(t->name, ".fp8_scale_") || strstr(t->name, ".fp8_amax_"));
}

int fg_fp8_shape_fits(int64_t in, int64_t out)
{
    return in % 16 == 0 && out % 16 == 0;
}

fg_status fg_fp8_declare(fg_layer *l, fg_model *m, const char *prefix, fg_error *err)
{
    int64_t two = 2, len = fg_model_fp8(m)->history_len;
    fg_status st = FG_OK;
    for (int op = FP8_X; op <= FP8_DY && st == FG_OK; op++) {
        char name[64];
        snprintf(name, sizeof name, "%sfp8_scale_%s", prefix, fp8_names[op]);
        st = fg_model_add_tensor(m, l, name, 1, 1, &two, FG_INIT_ONE, 0.0, err);
        snprintf(name, sizeof name, "%sfp8_amax_%s", prefix, fp8_names[op]);
        if (st == FG_OK)
            st = fg_model_add_tensor(m, l, name, 1, 1, &len, FG_INIT_ZERO, 0.0, err);
    }
    return st;
}

const char *fg_fp8_formats(const fg_model *m)
{
    return fg_model_fp8(m)->format == FG_FP8_HYBRID ? "x, w e4m3; dy e5m2" : "e4m3";
}

fg_fp8_map fg_fp8_map_at(const fg_layer_ctx *c, int first)
{
    fg_fp8_map f = {{NULL}};
    for (int i = 0; i < 6; i++)
        f.state[i] = c->buffer[first + i];
    return f;
}

int fg_fp8_runs(const fg_fp8_map *f, const fg_layer_ctx *c, int rows, const void *out)
{
    /* cuBLASLt's fp8 outputs must be 16-byte aligned (the arena's are: this is a guard) */
    return f && f->state[0] && c->fp8 && c->fp8->format != FG_FP8_NONE && rows % 16 == 0 &&
           !((uintptr_t)out & 15);
}

static uint32_t fp8_format_of(const fg_layer_ctx *c, int op)
{
    return op == FP8_DY && c->fp8->format == FG_FP8_HYBRID ? FG_F8E5M2 : FG_F8E4M3;
}

/* gemm_fp8's arguments for operands a and b (slots), updating those asked for while
 * training, on the step's first micro-batch. */
static fg_fp8_gemm_args fp8_args(const fg_fp8_map *m, const fg_layer_ctx *c, int a, int b,
                                 int update_a, int update_b)
{
    int record = c->training && !c->fp8_hold;
    fg_fp8_gemm_args f = {sizeof f, fp8_format_of(c, a), fp8_format_of(c, b),
                          c->fp8->history_len, c->fp8->algo, c->fp8->margin,
                          m->state[2 * a], m->state[2 * a + 1],
                          m->state[2 * b], m->state[2 * b + 1],
                          update_a && record, update_b && record};
    return f;
}

fg_status fg_fp8_forward(const fg_fp8_map *m, const fg_layer_ctx *c, int rows, int out, int in,
                         const void *x, const void *w, const void *b, void *y, int ldy,
                         fg_error *err)
{
    uint32_t act = c->dt.act;
    fg_fp8_gemm_args f = fp8_args(m, c, FP8_X, FP8_W, 1, 1);
    fg_status st = FG_OP(c, err, gemm_fp8, act, act, 0, 1, rows, out, in, x, in, w, in, 0.0f,
                         y, ldy, &f);
    if (st == FG_OK && b)
        st = FG_OP(c, err, bias_add, act, c->dt.param, y, b, rows, out, 1);
    return st;
}

fg_status fg_fp8_weight_grads(const fg_fp8_map *m, const fg_layer_ctx *c, int rows, int out,
                              int in, const void *x, const void *dy, int ldy, void *dw,
                              void *db, fg_error *err)
{
    uint32_t act = c->dt.act, grad = c->dt.grad;
    /* dW(out, in) (+)= dy^T x: dy's scale from its history, x's as forward left it */
    fg_fp8_gemm_args f = fp8_args(m, c, FP8_DY, FP8_X, 1, 0);
    fg_status st = FG_OP(c, err, gemm_fp8, act, grad, 1, 0, out, in, rows, dy, ldy, x, in,
                         c->accumulate ? 1.0f : 0.0f, dw, in, &f);
    if (st == FG_OK && db)
        st = FG_OP(c, err, bias_grad, grad, act, db, dy, rows, out, 1, c->accumulate);
    return st;
}

fg_status fg_fp8_input_grad(const fg_fp8_map *m, const fg_layer_ctx *c, int rows, int out,
                            int in, const void *w, const void *dy, int ldy, float beta, void *dx,
                            fg_error *err)
{
    uint32_t act = c->dt.act;
    /* dx(rows, in) = dy W (+ beta dx) */
    fg_fp8_gemm_args f = fp8_args(m, c, FP8_DY, FP8_W, 0, 0);
    return FG_OP(c, err, gemm_fp8, act, act, 0, 0, rows, in, out, dy, ldy, w, in, beta, dx, in,
                 &f);
}

/* ---- the linear layer's one map ------------------------------------------------------ */

fg_status fg_linear_fp8_plan(fg_layer *l, fg_model *m, int64_t in, char *why, size_t why_size,
                             fg_error *err)
{
    const fg_fp8_recipe *r = fg_model_fp8(m);
    why[0] = '\0';
    l->fp8 = 0;
    if (!r)
        return FG_OK;
    if (l->tied) { /* GPT-2's lm_head: Transformer Engine keeps the output layer in bf16 */
        snprintf(why, why_size, "fp8: [%s] stays in the activations' dtype: its weight is "
                 "[layer.%s]'s embedding (tie), which fp8 recipes keep in bf16", l->section,
                 l->tie);
        return FG_OK;
    }
    if (!fg_fp8_shape_fits(in, l->units)) {
        snprintf(why, why_size, "fp8: [%s] stays in the activations' dtype: in_features %lld and "
                 "out_features %lld must be multiples of 16 (cuBLASLt's fp8 gemm)", l->section,
                 (long long)in, (long long)l->units);
        return FG_OK;
    }
    fg_status st = fg_fp8_declare(l, m, "", err);
    l->fp8 = st == FG_OK;
    if (l->fp8)
        snprintf(why, why_size, "fp8: [%s] runs its gemms in fp8 (%s)", l->section,
                 fg_fp8_formats(m));
    return st;
}

/* The linear layer's map: its six fp8 buffers come last; none when it stays in bf16. */
static fg_fp8_map linear_map(const fg_layer *l, const fg_layer_ctx *c)
{
    fg_fp8_map none = {{NULL}};
    return l->fp8 ? fg_fp8_map_at(c, l->buffer_count - 6) : none;
}

int fg_linear_fp8_runs(const fg_layer *l, const fg_layer_ctx *c, int rows)
{
    fg_fp8_map m = linear_map(l, c);
    uintptr_t outs = (uintptr_t)c->y | (uintptr_t)c->dx | (uintptr_t)c->grad[0];
    return fg_fp8_runs(&m, c, rows, (const void *)outs);
}

fg_status fg_linear_fp8_forward(const fg_layer *l, const fg_layer_ctx *c, int rows, int out,
                                int in, int ldy, fg_error *err)
{
    fg_fp8_map m = linear_map(l, c);
    return fg_fp8_forward(&m, c, rows, out, in, c->x, c->param[0], l->bias ? c->param[1] : NULL,
                          c->y, ldy, err);
}

fg_status fg_linear_fp8_backward(const fg_layer *l, const fg_layer_ctx *c, int rows, int out,
                                 int in, int ldy, fg_error *err)
{
    fg_fp8_map m = linear_map(l, c);
    fg_status st = fg_fp8_weight_grads(&m, c, rows, out, in, c->x, c->dy, ldy, c->grad[0],
                                       l->bias ? c->grad[1] : NULL, err);
    if (st == FG_OK && c->dx)
        st = fg_fp8_input_grad(&m, c, rows, out, in, c->param[0], c->dy, ldy, 0.0f, c->dx, err);
    return st;
}
