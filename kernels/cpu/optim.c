/* Fused optimizer updates over a flat parameter range, PyTorch semantics: one sweep per
 * update, on the pool, vectorised for the widest unit the CPU has (tests/kernel-lab/sgd_lab.c,
 * version 4). */
#include <math.h>

#include "cpu_kernels.h"
#include "half.h"

typedef struct fg_cpu_optim_ctx {
    const fg_cpu_sgd *sgd;
    const fg_cpu_adamw *adam;
    float *param, *buf, *m, *v;
    const float *grad;
    float bc1, bc2_sqrt; /* AdamW bias corrections */
    fg_cpu_range_fn update; /* with a bf16 copy: the update fg_cpu_optim_copy_range tiles */
    uint16_t *bf16_copy;
} fg_cpu_optim_ctx;

/* Tiles of 2048 parameters: updated, then rounded into the bf16 copy while in L1 */
enum { FG_CPU_OPTIM_TILE = 2048 };

static void fg_cpu_optim_copy_range(void *p, size_t b, size_t e)
{
    fg_cpu_optim_ctx *c = p;
    for (size_t i = b; i < e; i += FG_CPU_OPTIM_TILE) {
        size_t t = e - i < FG_CPU_OPTIM_TILE ? e : i + FG_CPU_OPTIM_TILE;
        c->update(c, i, t);
        fg_cpu_bf16_round(c->bf16_copy + i, c->param + i, t - i);
    }
}

/* fn over [0, n) on the pool, each range's parameters then rounded into the copy if any */
static void fg_cpu_optim_run(fg_cpu_pool *pool, fg_cpu_optim_ctx *c, size_t n, size_t grain,
                             fg_cpu_range_fn fn)
{
    if (!c->bf16_copy) {
        fg_cpu_parallel_for(pool, n, grain, 16, fn, c);
        return;
    }
    c->update = fn;
    fg_cpu_parallel_for(pool, n, grain, 16, fg_cpu_optim_copy_range, c);
}

/* g = grad + wd * p; with momentum: b = g on the first step, else
 * b = momentum * b + (1 - dampening) * g; nesterov uses g + momentum * b, else b;
 * p -= lr * that. */
FG_CPU_VECTOR_CLONES static void fg_cpu_sgd_range(void *p, size_t b, size_t e)
{
    fg_cpu_optim_ctx *c = p;
    const fg_cpu_sgd *a = c->sgd;
    float *restrict param = c->param, *restrict buf = c->buf;
    const float *restrict grad = c->grad;
    float lr = a->lr, wd = a->weight_decay, mom = a->momentum, damp = 1.0f - a->dampening;
    if (mom == 0.0f) {
        for (size_t i = b; i < e; i++)
            param[i] -= lr * (grad[i] + wd * param[i]);
        return;
    }
    if (a->first_step) {
        for (size_t i = b; i < e; i++) {
            float g = grad[i] + wd * param[i];
            buf[i] = g;
            param[i] -= lr * (a->nesterov ? g + mom * g : g);
        }
        return;
    }
    if (a->nesterov) {
        for (size_t i = b; i < e; i++) {
            float g = grad[i] + wd * param[i];
            float nb = mom * buf[i] + damp * g;
            buf[i] = nb;
            param[i] -= lr * (g + mom * nb);
        }
        return;
    }
    for (size_t i = b; i < e; i++) {
        float g = grad[i] + wd * param[i];
        float nb = mom * buf[i] + damp * g;
        buf[i] = nb;
        param[i] -= lr * nb;
    }
}

void fg_cpu_sgd_update(fg_cpu_pool *pool, const fg_cpu_sgd *a, float *param,
                       const float *grad, float *momentum_buf, size_t n)
{
    fg_cpu_optim_ctx c = { .sgd = a, .param = param, .buf = momentum_buf, .grad = grad,
                           .bf16_copy = a->bf16_copy };
    fg_cpu_optim_run(pool, &c, n, fg_cpu_stream_grain(pool), fg_cpu_sgd_range);
}

/* As torch.optim.AdamW (foreach=False): p *= 1 - lr*wd; m, v moving averages;
 * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps). */
FG_CPU_VECTOR_CLONES static void fg_cpu_adamw_range(void *p, size_t b, size_t e)
{
    fg_cpu_optim_ctx *c = p;
    const fg_cpu_adamw *a = c->adam;
    float *restrict param = c->param, *restrict m = c->m, *restrict v = c->v;
    const float *restrict grad = c->grad;
    float decay = 1.0f - a->lr * a->weight_decay, b1 = a->beta1, b2 = a->beta2;
    float step_size = a->lr / c->bc1, bc2_sqrt = c->bc2_sqrt, eps = a->eps;
    for (size_t i = b; i < e; i++) {
        float g = grad[i];
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] = param[i] * decay - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

void fg_cpu_adamw_update(fg_cpu_pool *pool, const fg_cpu_adamw *a, float *param,
                         const float *grad, float *m, float *v, size_t n)
{
    double step = (double)(a->step < 1 ? 1 : a->step);
    fg_cpu_optim_ctx c = { .adam = a, .param = param, .m = m, .v = v, .grad = grad,
                           .bc1 = (float)(1.0 - pow((double)a->beta1, step)),
                           .bc2_sqrt = (float)sqrt(1.0 - pow((double)a->beta2, step)),
                           .bf16_copy = a->bf16_copy };
    fg_cpu_optim_run(pool, &c, n, FG_CPU_GRAIN / 4, fg_cpu_adamw_range);
}
