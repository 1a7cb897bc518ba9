/* SwiGLU's gating, y = silu(gate) * up, and its backward, elementwise on the pool. silu uses
 * libm's expf (not fast_exp): it is compared with PyTorch's at 1e-4 in a whole model. */
#include <math.h>

#include "cpu_kernels.h"

typedef struct fg_cpu_swiglu_job {
    const float *gate, *up, *dy;
    float *y, *dgate, *dup;
} fg_cpu_swiglu_job;

static void fg_cpu_swiglu_forward_range(void *p, size_t b, size_t e)
{
    const fg_cpu_swiglu_job *j = p;
    for (size_t i = b; i < e; i++) {
        float g = j->gate[i];
        j->y[i] = g / (1.0f + expf(-g)) * j->up[i];
    }
}

static void fg_cpu_swiglu_backward_range(void *p, size_t b, size_t e)
{
    const fg_cpu_swiglu_job *j = p;
    for (size_t i = b; i < e; i++) {
        float g = j->gate[i], u = j->up[i], d = j->dy[i];
        float s = 1.0f / (1.0f + expf(-g)), silu = g * s;
        j->dup[i] = d * silu;
        j->dgate[i] = d * u * s * (1.0f + g * (1.0f - s)); /* dgate may alias dy: d read */
    }
}

void fg_cpu_swiglu_forward(fg_cpu_pool *pool, const float *gate, const float *up, float *y,
                           size_t n)
{
    fg_cpu_swiglu_job j = {.gate = gate, .up = up, .y = y};
    fg_cpu_parallel_for(pool, n, FG_CPU_GRAIN / 4, 1, fg_cpu_swiglu_forward_range, &j);
}

void fg_cpu_swiglu_backward(fg_cpu_pool *pool, const float *gate, const float *up,
                            const float *dy, float *dgate, float *dup, size_t n)
{
    fg_cpu_swiglu_job j = {.gate = gate, .up = up, .dy = dy, .dgate = dgate, .dup = dup};
    fg_cpu_parallel_for(pool, n, FG_CPU_GRAIN / 4, 1, fg_cpu_swiglu_backward_range, &j);
}
