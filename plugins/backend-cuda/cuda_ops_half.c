/* Half gradients and "true" half parameters: the dtype-taking helpers and fused optimizer
 * updates. Arguments are checked by the f32 op itself (called with n = 0), then the typed
 * kernel of kernels/cuda/half_storage.cu runs. */
#include <math.h>

#include "cuda_backend.h"
#include "cuda_ops.h"

#define STREAM(queue) (((fg_cuda_queue *)(queue))->stream)

static int storable(uint32_t t) { return t == FG_F32 || t == FG_F16 || t == FG_BF16; }

static fg_status check_types(const char *op, uint32_t a, uint32_t b, fg_error *err)
{
    if (storable(a) && storable(b))
        return FG_OK;
    return fg_error_set(err, FG_UNAVAILABLE, "backend.cuda: %s: dtype %s: this backend stores "
                        "f32, f16 and bf16", op, fg_dtype_name((fg_dtype)(storable(a) ? b : a)));
}

fg_status fg_cuda_op_sum_squares_ex(void *state, void *queue, const void *x, uint32_t dtype,
                                    size_t n, float *out, fg_error *err)
{
    fg_status st = fg_cuda_op_sum_squares(state, queue, (const float *)x, 0, out, err);
    if (st == FG_OK) st = check_types("sum_squares_ex", dtype, dtype, err);
    if (st != FG_OK) return st;
    if (n && !x)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: sum_squares_ex: x is NULL");
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_sum_squares_ex(q->stream, x, (int)dtype, n, out, q->scratch),
                            "sum_squares_ex", err);
}

static fg_status scale_clamp(void *queue, const char *op, void *x, uint32_t dtype, float alpha,
                             float lo, float hi, int clamp, size_t n, fg_error *err)
{
    fg_status st = fg_cuda_enter(queue, op, err);
    if (st == FG_OK) st = check_types(op, dtype, dtype, err);
    if (st != FG_OK || n == 0) return st;
    if (!x) return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: %s: x is NULL", op);
    if (clamp && !(lo <= hi))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: %s: lo %g > hi %g", op,
                            (double)lo, (double)hi);
    return fg_cuda_launched(fg_cu_scale_clamp_ex(STREAM(queue), x, (int)dtype, alpha, lo, hi,
                                                 clamp, n), op, err);
}

fg_status fg_cuda_op_scale_ex(void *state, void *queue, void *x, uint32_t dtype, float alpha,
                              size_t n, fg_error *err)
{
    (void)state;
    return scale_clamp(queue, "scale_ex", x, dtype, alpha, 0.0f, 0.0f, 0, n, err);
}

fg_status fg_cuda_op_clamp_ex(void *state, void *queue, void *x, uint32_t dtype, float lo,
                              float hi, size_t n, fg_error *err)
{
    (void)state;
    return scale_clamp(queue, "clamp_ex", x, dtype, 1.0f, lo, hi, 1, n, err);
}

fg_status fg_cuda_op_sgd_update_ex(void *state, void *queue, const fg_sgd_args *a, void *param,
                                   uint32_t param_dtype, const void *grad, uint32_t grad_dtype,
                                   float *momentum_buf, size_t n, fg_error *err)
{
    fg_status st = fg_cuda_op_sgd_update(state, queue, a, (float *)param, (const float *)grad,
                                         momentum_buf, 0, err);
    if (st == FG_OK) st = check_types("sgd_update_ex", param_dtype, grad_dtype, err);
    if (st != FG_OK || n == 0) return st;
    if (!param || !grad || (a->momentum != 0.0f && !momentum_buf))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: sgd_update_ex: %s is NULL",
                            !param ? "param" : !grad ? "grad" : "momentum_buf");
    fg_cu_sgd s = {a->lr, a->momentum, a->dampening, a->weight_decay, a->nesterov,
                   a->first_step};
    return fg_cuda_launched(fg_cu_sgd_update_ex(STREAM(queue), &s, param, (int)param_dtype,
                                                grad, (int)grad_dtype, momentum_buf, n),
                            "sgd_update_ex", err);
}

fg_status fg_cuda_op_adamw_update_ex(void *state, void *queue, const fg_adamw_args *a,
                                     void *param, uint32_t param_dtype, const void *grad,
                                     uint32_t grad_dtype, float *m, float *v, size_t n,
                                     fg_error *err)
{
    fg_status st = fg_cuda_op_adamw_update(state, queue, a, (float *)param, (const float *)grad,
                                           m, v, 0, err);
    if (st == FG_OK) st = check_types("adamw_update_ex", param_dtype, grad_dtype, err);
    if (st != FG_OK || n == 0) return st;
    if (!param || !grad || !m || !v)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: adamw_update_ex: %s is "
                            "NULL", !param ? "param" : !grad ? "grad" : !m ? "m" : "v");
    /* the bias corrections exactly as kernels/cpu/optim.c computes them */
    double step = (double)a->step;
    fg_cu_adamw s = {a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                     (float)(1.0 - pow((double)a->beta1, step)),
                     (float)sqrt(1.0 - pow((double)a->beta2, step))};
    return fg_cuda_launched(fg_cu_adamw_update_ex(STREAM(queue), &s, param, (int)param_dtype,
                                                  grad, (int)grad_dtype, m, v, n),
                            "adamw_update_ex", err);
}
