/* Flat-buffer ops (fill, scale, axpy, clamp, sum of squares, fused optimizer updates,
 * cast), each for f32, f16 and bf16 storage, and the helpers every op shares; behind the
 * checked trampolines (fulgur/backend_checks.h), each enters the queue's device, checks
 * the dtypes and enqueues a kernel of kernels/cuda on the queue's stream. */
#include <math.h>

#include "cuda_backend.h"
#include "cuda_checks.h"
#include "cuda_ops.h"

static int fg_cuda_storable(uint32_t t)
{
    return t == FG_F32 || t == FG_F16 || t == FG_BF16;
}

int fg_cuda_supports(void *state, uint32_t op, const uint32_t *dtypes)
{
    const fg_backend_op_desc *d = fg_backend_op_info(op);
    if (!d || !dtypes)
        return 0;
    if (op == FG_OP_GEMM_FP8 && !fg_cuda_has_fp8(state))
        return 0;
    for (int i = 0; i < d->dtype_count; i++)
        if (!fg_cuda_storable(dtypes[i]))
            return 0;
    return 1;
}

fg_status fg_cuda_check_types(const char *op, int count, const uint32_t *types, fg_error *err)
{
    for (int i = 0; i < count; i++)
        if (!fg_cuda_storable(types[i]))
            return fg_error_set(err, FG_UNAVAILABLE,
                                "backend.cuda: %s: dtype %s: this backend stores f32, f16 and "
                                "bf16", op, fg_dtype_name((fg_dtype)types[i]));
    return FG_OK;
}

fg_status fg_cuda_launched(cudaError_t e, const char *op, fg_error *err)
{
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, op);
}


fg_status fg_cuda_op_fill(void *state, void *queue, uint32_t dtype, void *x, float value,
                          size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("fill", dtype);
    return fg_cuda_launched(fg_cu_fill(STREAM(queue), (int)dtype, x, value, n), "fill", err);
}

fg_status fg_cuda_op_scale(void *state, void *queue, uint32_t dtype, void *x, float alpha,
                           size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("scale", dtype);
    return fg_cuda_launched(fg_cu_scale(STREAM(queue), (int)dtype, x, alpha, n), "scale", err);
}

fg_status fg_cuda_op_axpy(void *state, void *queue, uint32_t x_dtype, uint32_t y_dtype,
                          float alpha, const void *x, void *y, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("axpy", x_dtype, y_dtype);
    return fg_cuda_launched(fg_cu_axpy(STREAM(queue), (int)x_dtype, (int)y_dtype, alpha, x, y,
                                       n),
                            "axpy", err);
}

/* lo > hi gives hi everywhere, as torch.clamp and the CPU backend. */
fg_status fg_cuda_op_clamp(void *state, void *queue, uint32_t dtype, void *x, float lo,
                           float hi, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("clamp", dtype);
    return fg_cuda_launched(fg_cu_clamp(STREAM(queue), (int)dtype, x, lo, hi, n), "clamp",
                            err);
}

fg_status fg_cuda_op_sum_squares(void *state, void *queue, uint32_t dtype, const void *x,
                                 size_t n, float *out, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("sum_squares", dtype);
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_sum_squares(q->stream, (int)dtype, x, n, out, q->scratch),
                            "sum_squares", err);
}

fg_status fg_cuda_op_sgd_update(void *state, void *queue, uint32_t param_dtype,
                                uint32_t grad_dtype, const fg_sgd_args *a, void *param,
                                const void *grad, float *momentum_buf, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("sgd_update", param_dtype, grad_dtype);
    if (FG_HAS_FIELD(a, fg_sgd_args, lr_dev) && a->lr_dev)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "sgd_update: lr_dev is read by sgd_fused "
                            "only");
    fg_cu_sgd s = { a->lr, a->momentum, a->dampening, a->weight_decay, a->nesterov,
                    a->first_step, NULL, NULL };
    return fg_cuda_launched(fg_cu_sgd_update(STREAM(queue), &s, param, (int)param_dtype, grad,
                                             (int)grad_dtype, momentum_buf, n),
                            "sgd_update", err);
}

fg_status fg_cuda_op_adamw_update(void *state, void *queue, uint32_t param_dtype,
                                  uint32_t grad_dtype, const fg_adamw_args *a, void *param,
                                  const void *grad, float *m, float *v, size_t n,
                                  fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("adamw_update", param_dtype, grad_dtype);
    if (FG_HAS_FIELD(a, fg_adamw_args, step_dev) && a->step_dev)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "adamw_update: step_dev is read by "
                            "adamw_fused only");
    /* the bias corrections exactly as kernels/cpu/optim.c computes them */
    double step = (double)a->step;
    fg_cu_adamw s = { a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                      (float)(1.0 - pow((double)a->beta1, step)),
                      (float)sqrt(1.0 - pow((double)a->beta2, step)), NULL, NULL };
    return fg_cuda_launched(fg_cu_adamw_update(STREAM(queue), &s, param, (int)param_dtype, grad,
                                               (int)grad_dtype, m, v, n),
                            "adamw_update", err);
}

fg_status fg_cuda_op_cast(void *state, void *queue, uint32_t dst_dtype, uint32_t src_dtype,
                          void *dst, const void *src, size_t n, fg_error *err)
{
    (void)state;
    fg_status st = fg_cuda_enter(queue, "cast", err);
    if (st != FG_OK)
        return st;
    if (!fg_cuda_storable(dst_dtype) || !fg_cuda_storable(src_dtype))
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: cast from %s to %s: this backend stores f32, f16 "
                            "and bf16", fg_dtype_name((fg_dtype)src_dtype),
                            fg_dtype_name((fg_dtype)dst_dtype));
    return fg_cuda_launched(fg_cu_convert(STREAM(queue), dst, (int)dst_dtype, src,
                                          (int)src_dtype, n),
                            "cast", err);
}
