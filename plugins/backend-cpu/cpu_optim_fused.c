/* The optimizer step without a host round trip (ABI 1.5): the clip coefficient from the
 * gradients' sum of squares, and sgd/adamw with the gradient scale read from device memory
 * and the working copy written by the op. The CPU runs each as the sequence it replaces
 * (scale, update, cast) with the same kernels (a bf16 copy of f32 parameters rounded by the
 * update tile by tile, the cast's rounding), so a fused step is bitwise the unfused one;
 * it is synchronous, so "device memory" is read where it lies. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend.h"
#include "cpu_stage.h"
#include "half.h"

#define POOL(state) (((fg_cpu_backend *)(state))->pool)

fg_status fg_cpu_op_grad_clip_coef(void *state, void *queue, uint32_t dtype, const void *x,
                                   size_t n, double max_norm, float *sq, float *coef,
                                   fg_error *err)
{
    fg_status st = fg_cpu_op_sum_squares(state, queue, dtype, x, n, sq, err);
    if (st != FG_OK)
        return st;
    double c = max_norm / (sqrt((double)*sq) + 1e-6); /* torch.nn.utils.clip_grad_norm_ */
    *coef = c < 1.0 ? (float)c : 1.0f;
    return FG_OK;
}

/* The queue's buffer for n scaled f32 gradients and their rounding through n half values. */
static float *fused_scratch(fg_cpu_queue *q, size_t n, const char *op, fg_error *err)
{
    size_t need = (n * (sizeof(float) + sizeof(uint16_t)) + 63) / 64 * 64;
    if (need > q->fused_bytes) {
        free(q->fused);
        q->fused_bytes = 0;
        q->fused = aligned_alloc(64, need);
        if (!q->fused) {
            fg_error_set(err, FG_OUT_OF_MEMORY, "cpu backend: %s: no memory for %zu bytes of "
                         "scaled gradients", op, need);
            return NULL;
        }
        q->fused_bytes = need;
    }
    return q->fused;
}

/* *g: the gradients the update reads: grad itself, or grad * scale rounded into grad_dtype
 * (what the scale op leaves in grad) in the queue's buffer. */
static fg_status scaled_grads(void *state, fg_cpu_queue *q, const char *op, uint32_t grad_dtype,
                              const float *grad_f, const float *grad_scale, size_t n,
                              const float **g, fg_error *err)
{
    *g = grad_f;
    if (!grad_scale || *grad_scale == 1.0f)
        return FG_OK;
    float *tmp = fused_scratch(q, n, op, err);
    if (!tmp)
        return FG_OUT_OF_MEMORY;
    memcpy(tmp, grad_f, n * sizeof(float));
    fg_cpu_scale(POOL(state), tmp, *grad_scale, n);
    if (grad_dtype != FG_F32) {
        void *half = tmp + n;
        fg_cpu_convert(POOL(state), half, (int)grad_dtype, tmp, FG_CPU_F32, n);
        fg_cpu_convert(POOL(state), tmp, FG_CPU_F32, half, (int)grad_dtype, n);
    }
    *g = tmp;
    return FG_OK;
}

/* One fused update: param staged in and out, grad in, the gradients the update reads
 * (scaled), and the working copy cast from the stored parameters afterwards. */
typedef struct fused_update {
    void *state, *queue;
    uint32_t param_dtype, work_dtype;
    void *param, *work;
    size_t n;
    fg_cpu_operand o[2];
    const float *g;
} fused_update;

static fg_status fused_begin(fused_update *u, const char *op, uint32_t grad_dtype,
                             const void *grad, const float *grad_scale, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_INOUT(u->param, u->param_dtype, u->n),
                          ARG_IN(grad, grad_dtype, u->n)};
    memcpy(u->o, o, sizeof o);
    u->g = NULL;
    fg_status st = fg_cpu_stage(u->state, u->queue, op, u->o, NARGS(u->o), err);
    if (st == FG_OK)
        st = scaled_grads(u->state, u->queue, op, grad_dtype, u->o[1].f, grad_scale, u->n,
                          &u->g, err);
    return st;
}

/* f32 parameters with a bf16 working copy: the update rounds into it as it goes (the cast
 * op's bits: both are fg_cpu_bf16_round), so no cast runs after it */
static uint16_t *copy_in_update(const fused_update *u)
{
    return u->work && u->param_dtype == FG_F32 && u->work_dtype == FG_BF16 ? u->work : NULL;
}

/* The working copy, cast from the stored parameters as the cast op would. */
static fg_status fused_end(fused_update *u, fg_status st, fg_error *err)
{
    st = fg_cpu_unstage(u->state, u->o, NARGS(u->o), st);
    if (st != FG_OK || !u->work || copy_in_update(u))
        return st;
    return fg_cpu_op_cast(u->state, u->queue, u->work_dtype, u->param_dtype, u->work, u->param,
                          u->n, err);
}

fg_status fg_cpu_op_sgd_fused(void *state, void *queue, uint32_t param_dtype,
                              uint32_t grad_dtype, uint32_t work_dtype, const fg_sgd_args *a,
                              void *param, const void *grad, float *momentum_buf,
                              const float *grad_scale, void *work, size_t n, fg_error *err)
{
    if (FG_HAS_FIELD(a, fg_sgd_args, skip_dev) && a->skip_dev && *a->skip_dev)
        return FG_OK; /* the loss scaler skips this step */
    fused_update u = {.state = state, .queue = queue, .param_dtype = param_dtype,
                      .work_dtype = work_dtype, .param = param, .work = work, .n = n};
    fg_status st = fused_begin(&u, "sgd_fused", grad_dtype, grad, grad_scale, err);
    if (st == FG_OK) {
        fg_cpu_sgd s = { a->lr, a->momentum, a->dampening, a->weight_decay, a->nesterov,
                         a->first_step, copy_in_update(&u) };
        fg_cpu_sgd_update(POOL(state), &s, u.o[0].f, u.g, momentum_buf, n);
    }
    return fused_end(&u, st, err);
}

fg_status fg_cpu_op_adamw_fused(void *state, void *queue, uint32_t param_dtype,
                                uint32_t grad_dtype, uint32_t work_dtype,
                                const fg_adamw_args *a, void *param, const void *grad, float *m,
                                float *v, const float *grad_scale, void *work, size_t n,
                                fg_error *err)
{
    if (FG_HAS_FIELD(a, fg_adamw_args, skip_dev) && a->skip_dev && *a->skip_dev)
        return FG_OK; /* the loss scaler skips this step */
    fused_update u = {.state = state, .queue = queue, .param_dtype = param_dtype,
                      .work_dtype = work_dtype, .param = param, .work = work, .n = n};
    fg_status st = fused_begin(&u, "adamw_fused", grad_dtype, grad, grad_scale, err);
    if (st == FG_OK) {
        fg_cpu_adamw s = { a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->step,
                           copy_in_update(&u) };
        fg_cpu_adamw_update(POOL(state), &s, u.o[0].f, u.g, m, v, n);
    }
    return fused_end(&u, st, err);
}
