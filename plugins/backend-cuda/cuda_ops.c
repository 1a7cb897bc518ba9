/* Flat-buffer ops (fill, scale, axpy, clamp, sum of squares, fused optimizer updates,
 * cast), each for f32, f16 and bf16 storage, and the helpers every op shares: argument
 * checks at the border, then a kernel of kernels/cuda enqueued on the queue's stream. */
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
    (void)state;
    const fg_backend_op_desc *d = fg_backend_op_info(op);
    if (!d || !dtypes)
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

/* Enters the queue's device and checks the dtypes; n == 0 is done; otherwise the pointers
 * must be there. */
#define FG_CUDA_FLAT(op, n, types, ...)                                                    \
    do {                                                                                   \
        FG_CUDA_BEGIN(op, FG_CUDA_UNPAREN types);                                          \
        if ((n) == 0)                                                                      \
            return FG_OK;                                                                  \
        const void *ptrs_[] = { __VA_ARGS__ };                                             \
        for (size_t i_ = 0; i_ < sizeof ptrs_ / sizeof ptrs_[0]; i_++)                     \
            if (!ptrs_[i_])                                                                \
                return fg_error_set(err, FG_INVALID_ARGUMENT,                              \
                                    "backend.cuda: %s: operand %zu is NULL", op, i_);      \
    } while (0)
#define FG_CUDA_UNPAREN(...) __VA_ARGS__

fg_status fg_cuda_op_fill(void *state, void *queue, uint32_t dtype, void *x, float value,
                          size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_FLAT("fill", n, (dtype), x);
    return fg_cuda_launched(fg_cu_fill(STREAM(queue), (int)dtype, x, value, n), "fill", err);
}

fg_status fg_cuda_op_scale(void *state, void *queue, uint32_t dtype, void *x, float alpha,
                           size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_FLAT("scale", n, (dtype), x);
    return fg_cuda_launched(fg_cu_scale(STREAM(queue), (int)dtype, x, alpha, n), "scale", err);
}

fg_status fg_cuda_op_axpy(void *state, void *queue, uint32_t x_dtype, uint32_t y_dtype,
                          float alpha, const void *x, void *y, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_FLAT("axpy", n, (x_dtype, y_dtype), x, y);
    return fg_cuda_launched(fg_cu_axpy(STREAM(queue), (int)x_dtype, (int)y_dtype, alpha, x, y,
                                       n),
                            "axpy", err);
}

/* lo > hi gives hi everywhere, as torch.clamp and the CPU backend. */
fg_status fg_cuda_op_clamp(void *state, void *queue, uint32_t dtype, void *x, float lo,
                           float hi, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_FLAT("clamp", n, (dtype), x);
    return fg_cuda_launched(fg_cu_clamp(STREAM(queue), (int)dtype, x, lo, hi, n), "clamp",
                            err);
}

fg_status fg_cuda_op_sum_squares(void *state, void *queue, uint32_t dtype, const void *x,
                                 size_t n, float *out, fg_error *err)
{
    (void)state;
    uint32_t types[] = { dtype };
    fg_status st = fg_cuda_enter(queue, "sum_squares", err);
    if (st == FG_OK)
        st = fg_cuda_check_types("sum_squares", 1, types, err);
    if (st != FG_OK)
        return st;
    if (!out || (n > 0 && !x))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: sum_squares: %s is NULL",
                            !out ? "out" : "x");
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_sum_squares(q->stream, (int)dtype, x, n, out, q->scratch),
                            "sum_squares", err);
}

fg_status fg_cuda_op_sgd_update(void *state, void *queue, uint32_t param_dtype,
                                uint32_t grad_dtype, const fg_sgd_args *a, void *param,
                                const void *grad, float *momentum_buf, size_t n, fg_error *err)
{
    (void)state;
    uint32_t types[] = { param_dtype, grad_dtype };
    fg_status st = fg_cuda_enter(queue, "sgd_update", err);
    if (st == FG_OK)
        st = fg_cuda_check_types("sgd_update", 2, types, err);
    if (st != FG_OK)
        return st;
    if (!a || a->struct_size < offsetof(fg_sgd_args, first_step) + sizeof a->first_step)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: sgd_update: args are NULL or older than "
                            "fg_sgd_args v1.0");
    if (a->nesterov && (a->momentum <= 0.0f || a->dampening != 0.0f))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: sgd_update: nesterov needs momentum > 0 and "
                            "dampening = 0 (momentum = %g, dampening = %g)",
                            (double)a->momentum, (double)a->dampening);
    if (n == 0)
        return FG_OK;
    if (!param || !grad || (a->momentum != 0.0f && !momentum_buf))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: sgd_update: %s is NULL",
                            !param ? "param" : !grad ? "grad" : "momentum_buf");
    fg_cu_sgd s = { a->lr, a->momentum, a->dampening, a->weight_decay, a->nesterov,
                    a->first_step };
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
    uint32_t types[] = { param_dtype, grad_dtype };
    fg_status st = fg_cuda_enter(queue, "adamw_update", err);
    if (st == FG_OK)
        st = fg_cuda_check_types("adamw_update", 2, types, err);
    if (st != FG_OK)
        return st;
    if (!a || a->struct_size < offsetof(fg_adamw_args, step) + sizeof a->step)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: adamw_update: args are NULL or older than "
                            "fg_adamw_args v1.0");
    if (a->step < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: adamw_update: step = %lld must be >= 1 (1-based)",
                            (long long)a->step);
    if (!(a->beta1 >= 0.0f && a->beta1 < 1.0f && a->beta2 >= 0.0f && a->beta2 < 1.0f))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: adamw_update: beta1 = %g, beta2 = %g must lie in "
                            "[0, 1)", (double)a->beta1, (double)a->beta2);
    if (n == 0)
        return FG_OK;
    if (!param || !grad || !m || !v)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: adamw_update: %s is NULL",
                            !param ? "param" : !grad ? "grad" : !m ? "m" : "v");
    /* the bias corrections exactly as kernels/cpu/optim.c computes them */
    double step = (double)a->step;
    fg_cu_adamw s = { a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                      (float)(1.0 - pow((double)a->beta1, step)),
                      (float)sqrt(1.0 - pow((double)a->beta2, step)) };
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
    if (n == 0)
        return FG_OK;
    if (!dst || !src)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: cast: %s is NULL",
                            dst ? "src" : "dst");
    return fg_cuda_launched(fg_cu_convert(STREAM(queue), dst, (int)dst_dtype, src,
                                          (int)src_dtype, n),
                            "cast", err);
}
