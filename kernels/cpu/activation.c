/* Activations, forward and backward side by side: relu, gelu (tanh approximation, as
 * PyTorch's approximate="tanh"), tanh, sigmoid.
 *
 * GELU is computed as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): the same function
 * as 0.5 x (1 + tanh(u)) without its cancellation for negative x, with one exponential
 * (fast_exp.h) instead of libm's tanhf, which took 40% of a small GPT's step. */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "fast_exp.h"
#include "gelu.h"
#include "half.h"

enum { FG_CPU_ACT_NONE, FG_CPU_ACT_RELU, FG_CPU_ACT_GELU, FG_CPU_ACT_TANH, FG_CPU_ACT_SIGMOID };

typedef struct fg_cpu_act_ctx {
    int act;
    const float *x, *y, *dy;
    float *out;
} fg_cpu_act_ctx;

FG_CPU_VECTOR_CLONES static void fg_cpu_act_forward_range(void *p, size_t b, size_t e)
{
    fg_cpu_act_ctx *c = p;
    const float *x = c->x;
    float *y = c->out;
    switch (c->act) {
    case FG_CPU_ACT_RELU:
        for (size_t i = b; i < e; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case FG_CPU_ACT_GELU:
        for (size_t i = b; i < e; i++)
            y[i] = fg_cpu_gelu(x[i]);
        break;
    case FG_CPU_ACT_TANH:
        for (size_t i = b; i < e; i++)
            y[i] = tanhf(x[i]);
        break;
    case FG_CPU_ACT_SIGMOID:
        for (size_t i = b; i < e; i++)
            y[i] = 1.0f / (1.0f + expf(-x[i]));
        break;
    default:
        if (y != x)
            memmove(y + b, x + b, (e - b) * sizeof *y);
        break;
    }
}

FG_CPU_VECTOR_CLONES static void fg_cpu_act_backward_range(void *p, size_t b, size_t e)
{
    fg_cpu_act_ctx *c = p;
    const float *x = c->x, *y = c->y, *dy = c->dy;
    float *dx = c->out;
    switch (c->act) {
    case FG_CPU_ACT_RELU:
        /* dy is loaded unconditionally so the select vectorises (a conditional load
         * compiles to a branch that mispredicts on every other element) */
        for (size_t i = b; i < e; i++) {
            float g = dy[i];
            dx[i] = x[i] > 0.0f ? g : 0.0f;
        }
        break;
    case FG_CPU_ACT_GELU:
        for (size_t i = b; i < e; i++)
            dx[i] = dy[i] * fg_cpu_gelu_grad(x[i]);
        break;
    case FG_CPU_ACT_TANH:
        for (size_t i = b; i < e; i++)
            dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        break;
    case FG_CPU_ACT_SIGMOID:
        for (size_t i = b; i < e; i++)
            dx[i] = dy[i] * y[i] * (1.0f - y[i]);
        break;
    default:
        if (dx != dy)
            memmove(dx + b, dy + b, (e - b) * sizeof *dx);
        break;
    }
}

/* Transcendental activations cost ~20x a relu per element: parallelise them sooner. */
static size_t fg_cpu_act_grain(const fg_cpu_pool *pool, int act)
{
    return act == FG_CPU_ACT_GELU || act == FG_CPU_ACT_TANH || act == FG_CPU_ACT_SIGMOID
               ? FG_CPU_GRAIN / 16
               : fg_cpu_stream_grain(pool);
}

void fg_cpu_activation_forward(fg_cpu_pool *pool, int act, const float *x, float *y,
                               size_t n)
{
    fg_cpu_act_ctx c = { act, x, NULL, NULL, y };
    fg_cpu_parallel_for(pool, n, fg_cpu_act_grain(pool, act), 16, fg_cpu_act_forward_range, &c);
}

void fg_cpu_activation_backward(fg_cpu_pool *pool, int act, const float *x, const float *y,
                                const float *dy, float *dx, size_t n)
{
    fg_cpu_act_ctx c = { act, x, y, dy, dx };
    fg_cpu_parallel_for(pool, n, fg_cpu_act_grain(pool, act), 16, fg_cpu_act_backward_range, &c);
}

/* ---- bf16 storage, f32 math ---------------------------------------------------------------
 * Blocks of FG_CPU_BF16_BLOCK elements widened onto the stack, the f32 range functions above
 * run on them, the results rounded back (fg_cpu_bf16_round): the f32 intermediates stay in
 * L1, and the values are those of the f32 activation on the widened input, rounded. */

typedef struct fg_cpu_act_bf16_ctx {
    int act;
    const uint16_t *x, *y, *dy;
    uint16_t *out;
} fg_cpu_act_bf16_ctx;

static void fg_cpu_act_bf16_forward_range(void *p, size_t b, size_t e)
{
    const fg_cpu_act_bf16_ctx *c = p;
    float x[FG_CPU_BF16_BLOCK], y[FG_CPU_BF16_BLOCK];
    for (size_t i = b; i < e; i += FG_CPU_BF16_BLOCK) {
        size_t m = e - i < FG_CPU_BF16_BLOCK ? e - i : FG_CPU_BF16_BLOCK;
        fg_cpu_bf16_widen(x, c->x + i, m);
        fg_cpu_act_ctx f = {c->act, x, NULL, NULL, y};
        fg_cpu_act_forward_range(&f, 0, m);
        fg_cpu_bf16_round(c->out + i, y, m);
    }
}

static void fg_cpu_act_bf16_backward_range(void *p, size_t b, size_t e)
{
    const fg_cpu_act_bf16_ctx *c = p;
    float xy[FG_CPU_BF16_BLOCK], dy[FG_CPU_BF16_BLOCK], dx[FG_CPU_BF16_BLOCK];
    int reads_x = c->act == FG_CPU_ACT_RELU || c->act == FG_CPU_ACT_GELU;
    for (size_t i = b; i < e; i += FG_CPU_BF16_BLOCK) {
        size_t m = e - i < FG_CPU_BF16_BLOCK ? e - i : FG_CPU_BF16_BLOCK;
        fg_cpu_bf16_widen(xy, (reads_x ? c->x : c->y) + i, m);
        fg_cpu_bf16_widen(dy, c->dy + i, m);
        fg_cpu_act_ctx f = {c->act, reads_x ? xy : NULL, reads_x ? NULL : xy, dy, dx};
        fg_cpu_act_backward_range(&f, 0, m);
        fg_cpu_bf16_round(c->out + i, dx, m);
    }
}

void fg_cpu_activation_forward_bf16(fg_cpu_pool *pool, int act, const uint16_t *x,
                                    uint16_t *y, size_t n)
{
    fg_cpu_act_bf16_ctx c = {act, x, NULL, NULL, y};
    fg_cpu_parallel_for(pool, n, fg_cpu_act_grain(pool, act), 16, fg_cpu_act_bf16_forward_range,
                        &c);
}

void fg_cpu_activation_backward_bf16(fg_cpu_pool *pool, int act, const uint16_t *x,
                                     const uint16_t *y, const uint16_t *dy, uint16_t *dx,
                                     size_t n)
{
    fg_cpu_act_bf16_ctx c = {act, x, y, dy, dx};
    fg_cpu_parallel_for(pool, n, fg_cpu_act_grain(pool, act), 16,
                        fg_cpu_act_bf16_backward_range, &c);
}

/* ---- relu on half bits ------------------------------------------------------------------
 * A relu's result is its input or +0, so on f16/bf16 it needs no conversion: x > 0 exactly
 * when its bits lie in [1, +inf's bits] (sign clear, not zero, not NaN). The values are the
 * f32 relu's on the widened input, rounded back (a NaN dy passes through unquietened). */

typedef struct fg_cpu_half_relu_ctx {
    const uint16_t *x, *dy;
    uint16_t *out;
    uint16_t inf;
} fg_cpu_half_relu_ctx;

FG_CPU_VECTOR_CLONES static void fg_cpu_half_relu_forward_range(void *p, size_t b, size_t e)
{
    const fg_cpu_half_relu_ctx *c = p;
    const uint16_t *x = c->x;
    uint16_t *y = c->out, top = (uint16_t)(c->inf - 1);
    for (size_t i = b; i < e; i++)
        y[i] = (uint16_t)(x[i] - 1u) <= top ? x[i] : 0;
}

FG_CPU_VECTOR_CLONES static void fg_cpu_half_relu_backward_range(void *p, size_t b, size_t e)
{
    const fg_cpu_half_relu_ctx *c = p;
    const uint16_t *x = c->x, *dy = c->dy;
    uint16_t *dx = c->out, top = (uint16_t)(c->inf - 1);
    for (size_t i = b; i < e; i++) {
        uint16_t g = dy[i];
        dx[i] = (uint16_t)(x[i] - 1u) <= top ? g : 0;
    }
}

void fg_cpu_half_relu_forward(fg_cpu_pool *pool, uint16_t inf_bits, const uint16_t *x,
                              uint16_t *y, size_t n)
{
    fg_cpu_half_relu_ctx c = { x, NULL, y, inf_bits };
    fg_cpu_parallel_for(pool, n, fg_cpu_stream_grain(pool), 32, fg_cpu_half_relu_forward_range,
                        &c);
}

void fg_cpu_half_relu_backward(fg_cpu_pool *pool, uint16_t inf_bits, const uint16_t *x,
                               const uint16_t *dy, uint16_t *dx, size_t n)
{
    fg_cpu_half_relu_ctx c = { x, dy, dx, inf_bits };
    fg_cpu_parallel_for(pool, n, fg_cpu_stream_grain(pool), 32, fg_cpu_half_relu_backward_range,
                        &c);
}
