/* The optimizer step without a host round trip (ABI 1.5): grad_clip_coef, sgd_fused and
 * adamw_fused, behind the checked trampolines; each enters the queue's device, checks the
 * dtypes and enqueues kernels/cuda/optimizer.cu's kernels. Nothing waits for the device. */
#include <math.h>

#include "cuda_backend.h"
#include "cuda_checks.h"
#include "cuda_ops.h"

fg_status fg_cuda_op_grad_clip_coef(void *state, void *queue, uint32_t dtype, const void *x,
                                    size_t n, double max_norm, float *sq, float *coef,
                                    fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("grad_clip_coef", dtype);
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_grad_clip_coef(q->stream, (int)dtype, x, n, max_norm, sq,
                                                 coef, q->scratch),
                            "grad_clip_coef", err);
}

fg_status fg_cuda_op_sgd_fused(void *state, void *queue, uint32_t param_dtype,
                               uint32_t grad_dtype, uint32_t work_dtype, const fg_sgd_args *a,
                               void *param, const void *grad, float *momentum_buf,
                               const float *grad_scale, void *work, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("sgd_fused", param_dtype, grad_dtype, work ? work_dtype : param_dtype);
    fg_cu_sgd s = { a->lr, a->momentum, a->dampening, a->weight_decay, a->nesterov,
                    a->first_step, FG_HAS_FIELD(a, fg_sgd_args, lr_dev) ? a->lr_dev : NULL,
                    FG_HAS_FIELD(a, fg_sgd_args, skip_dev) ? a->skip_dev : NULL };
    return fg_cuda_launched(fg_cu_sgd_fused(STREAM(queue), &s, param, (int)param_dtype, grad,
                                            (int)grad_dtype, momentum_buf, grad_scale, work,
                                            (int)work_dtype, n),
                            "sgd_fused", err);
}

fg_status fg_cuda_op_adamw_fused(void *state, void *queue, uint32_t param_dtype,
                                 uint32_t grad_dtype, uint32_t work_dtype,
                                 const fg_adamw_args *a, void *param, const void *grad,
                                 float *m, float *v, const float *grad_scale, void *work,
                                 size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("adamw_fused", param_dtype, grad_dtype, work ? work_dtype : param_dtype);
    /* the bias corrections exactly as kernels/cpu/optim.c computes them */
    double step = (double)a->step;
    fg_cu_adamw s = { a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                      (float)(1.0 - pow((double)a->beta1, step)),
                      (float)sqrt(1.0 - pow((double)a->beta2, step)),
                      FG_HAS_FIELD(a, fg_adamw_args, step_dev) ? a->step_dev : NULL,
                      FG_HAS_FIELD(a, fg_adamw_args, skip_dev) ? a->skip_dev : NULL };
    return fg_cuda_launched(fg_cu_adamw_fused(STREAM(queue), &s, param, (int)param_dtype, grad,
                                              (int)grad_dtype, m, v, grad_scale, work,
                                              (int)work_dtype, n),
                            "adamw_fused", err);
}
