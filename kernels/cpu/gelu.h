/* GELU (tanh approximation, PyTorch's approximate="tanh") and its derivative, one element:
 * x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), with fast_exp.h's exponential. Shared
 * by activation.c and gelu_fused.c so that both compute the same bits. */
#ifndef FG_CPU_GELU_H
#define FG_CPU_GELU_H

#include "fast_exp.h"

#define FG_GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define FG_GELU_K1 0.044715f

static inline float fg_cpu_gelu(float v)
{
    float u = FG_GELU_K0 * (v + FG_GELU_K1 * v * v * v);
    return v / (1.0f + fg_cpu_exp(-2.0f * u));
}

/* d/dx x s(2u) = s + 2 x s (1 - s) du/dx, s = sigmoid(2u) */
static inline float fg_cpu_gelu_grad(float v)
{
    float u = FG_GELU_K0 * (v + FG_GELU_K1 * v * v * v);
    float du = FG_GELU_K0 * (1.0f + 3.0f * FG_GELU_K1 * v * v);
    float s = 1.0f / (1.0f + fg_cpu_exp(-2.0f * u));
    return s + 2.0f * v * s * (1.0f - s) * du;
}

#endif
