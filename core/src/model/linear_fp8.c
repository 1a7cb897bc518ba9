/* A linear layer's three gemms in fp8 (precision.fp8-mixed; the backend's gemm_fp8, ABI
 * 1.9), as Transformer Engine's Linear under fp8_autocast with delayed scaling: x and w in
 * E4M3, dy in E5M2 (HYBRID; E4M3 too under the E4M3 format), each with its own scale pair
 * {scale, 1/scale} and amax history, kept in the layer's buffers (so checkpoints carry
 * them). Forward updates x's and w's scales from their histories and pushes their amaxes;
 * the weight gradient's gemm does the same for dy; the input gradient's gemm and the weight
 * gradient's x reuse the scales forward and dy's update set. Evaluation updates nothing.
 * The bias is added (bias_add) and its gradient summed (bias_grad) in the activations'
 * dtype. A call whose rows are not a multiple of 16 (or whose outputs are not 16-byte
 * aligned) runs in the activations' dtype. */
#include <stdint.h>
#include <stdio.h>

#include "model.h"

enum { FP8_X = 0, FP8_W = 1, FP8_DY = 2 }; /* operand slots; buffers 2 * slot (+1) */

static const char *const fp8_names[3] = {"x", "w", "dy"};

fg_status fg_linear_fp8_plan(fg_layer *l, fg_model *m, int64_t in, char *why, size_t why_size,
                             fg_error *err)
{
    const fg_fp8_recipe *r = fg_model_fp8(m);
    why[0] = '\0';
    l->fp8 = 0;
    if (!r || r->format == FG_FP8_NONE)
        return FG_OK;
    if (in % 16 || l->units % 16) {
        snprintf(why, why_size, "fp8: [%s] stays in the activations' dtype: in_features %lld and "
                 "out_features %lld must be multiples of 16 (cuBLASLt's fp8 gemm)", l->section,
                 (long long)in, (long long)l->units);
        return FG_OK;
    }
    int64_t two = 2, len = r->history_len;
    fg_status st = FG_OK;
    for (int op = FP8_X; op <= FP8_DY && st == FG_OK; op++) {
        char name[32];
        snprintf(name, sizeof name, "fp8_scale_%s", fp8_names[op]);
        st = fg_model_add_tensor(m, l, name, 1, 1, &two, FG_INIT_ONE, 0.0, err);
        snprintf(name, sizeof name, "fp8_amax_%s", fp8_names[op]);
        if (st == FG_OK)
            st = fg_model_add_tensor(m, l, name, 1, 1, &len, FG_INIT_ZERO, 0.0, err);
    }
    l->fp8 = st == FG_OK;
    if (l->fp8)
        snprintf(why, why_size, "fp8: [%s] runs its gemms in fp8 (%s)", l->section,
                 r->format == FG_FP8_HYBRID ? "x, w e4m3; dy e5m2" : "e4m3");
    return st;
}

int fg_linear_fp8_runs(const fg_layer *l, const fg_layer_ctx *c, int rows)
{
    /* cuBLASLt's fp8 outputs must be 16-byte aligned (the arena's are: this is a guard) */
    uintptr_t outs = (uintptr_t)c->y | (uintptr_t)c->dx | (uintptr_t)c->grad[0];
    return l->fp8 && c->fp8 && c->fp8->format != FG_FP8_NONE && rows % 16 == 0 && !(outs & 15);
}

static uint32_t fp8_format_of(const fg_layer_ctx *c, int op)
{
    return op == FP8_DY && c->fp8->format == FG_FP8_HYBRID ? FG_F8E5M2 : FG_F8E4M3;
}

/* gemm_fp8's arguments for operands a and b (slots), updating those asked for. */
static fg_fp8_gemm_args fp8_args(const fg_layer *l, const fg_layer_ctx *c, int a, int b,
                                 int update_a, int update_b)
{
    int first = l->buffer_count - 6; /* the six fp8 buffers come last */
    fg_fp8_gemm_args f = {sizeof f, fp8_format_of(c, a), fp8_format_of(c, b),
                          c->fp8->history_len, c->fp8->algo, c->fp8->margin,
                          c->buffer[first + 2 * a], c->buffer[first + 2 * a + 1],
                          c->buffer[first + 2 * b], c->buffer[first + 2 * b + 1],
                          update_a && c->training, update_b && c->training};
    return f;
}

fg_status fg_linear_fp8_forward(const fg_layer *l, const fg_layer_ctx *c, int rows, int out,
                                int in, int ldy, fg_error *err)
{
    uint32_t act = c->dt.act;
    fg_fp8_gemm_args f = fp8_args(l, c, FP8_X, FP8_W, 1, 1);
    fg_status st = FG_OP(c, err, gemm_fp8, act, act, 0, 1, rows, out, in, c->x, in,
                         c->param[0], in, 0.0f, c->y, ldy, &f);
    if (st == FG_OK && l->bias)
        st = FG_OP(c, err, bias_add, act, c->dt.param, c->y, c->param[1], rows, out, 1);
    return st;
}

fg_status fg_linear_fp8_backward(const fg_layer *l, const fg_layer_ctx *c, int rows, int out,
                                 int in, int ldy, fg_error *err)
{
    uint32_t act = c->dt.act, grad = c->dt.grad;
    /* dW(out, in) (+)= dy^T x: dy's scale from its history, x's as forward left it */
    fg_fp8_gemm_args fw = fp8_args(l, c, FP8_DY, FP8_X, 1, 0);
    fg_status st = FG_OP(c, err, gemm_fp8, act, grad, 1, 0, out, in, rows, c->dy, ldy, c->x,
                         in, c->accumulate ? 1.0f : 0.0f, c->grad[0], in, &fw);
    if (st == FG_OK && l->bias)
        st = FG_OP(c, err, bias_grad, grad, act, c->grad[1], c->dy, rows, out, 1,
                   c->accumulate);
    /* dx(rows, in) = dy W */
    fg_fp8_gemm_args fx = fp8_args(l, c, FP8_DY, FP8_W, 0, 0);
    if (st == FG_OK && c->dx)
        st = FG_OP(c, err, gemm_fp8, act, act, 0, 0, rows, in, out, c->dy, ldy, c->param[0],
                   in, 0.0f, c->dx, in, &fx);
    return st;
}
