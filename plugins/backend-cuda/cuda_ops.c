/* Flat-buffer ops (fill, scale, axpy, clamp, sum of squares, fused optimizer updates,
 * cast) and the helpers every op shares: argument checks at the border, then a kernel of
 * kernels/cuda enqueued on the queue's stream. */
#include <math.h>

#include "cuda_backend.h"
#include "cuda_ops.h"

const fg_op_dtypes fg_cuda_all_f32 = { sizeof(fg_op_dtypes), FG_F32, FG_F32, FG_F32 };

static int fg_cuda_storable(uint32_t t)
{
    return t == FG_F32 || t == FG_F16 || t == FG_BF16;
}

fg_status fg_cuda_check_dtypes(const char *op, const fg_op_dtypes **dt, fg_error *err)
{
    if (!*dt)
        *dt = &fg_cuda_all_f32;
    const fg_op_dtypes *t = *dt;
    if (t->struct_size < sizeof(fg_op_dtypes))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: %s: fg_op_dtypes struct_size %u is too small", op,
                            (unsigned)t->struct_size);
    if (!fg_cuda_storable(t->act) || !fg_cuda_storable(t->param) || !fg_cuda_storable(t->grad))
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: %s: dtypes %s/%s/%s: this backend stores f32, f16 "
                            "and bf16", op, fg_dtype_name((fg_dtype)t->act),
                            fg_dtype_name((fg_dtype)t->param), fg_dtype_name((fg_dtype)t->grad));
    return FG_OK;
}

fg_status fg_cuda_launched(cudaError_t e, const char *op, fg_error *err)
{
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, op);
}

#define STREAM(queue) (((fg_cuda_queue *)(queue))->stream)

/* Enters the queue's device; n == 0 is done; otherwise the pointers must be there. */
#define FG_CUDA_FLAT(op, n, ...)                                                           \
    do {                                                                                   \
        fg_status st_ = fg_cuda_enter(queue, op, err);                                     \
        if (st_ != FG_OK)                                                                  \
            return st_;                                                                    \
        if ((n) == 0)                                                                      \
            return FG_OK;                                                                  \
        const void *ptrs_[] = { __VA_ARGS__ };                                             \
        for (size_t i_ = 0; i_ < sizeof ptrs_ / sizeof ptrs_[0]; i_++)                     \
            if (!ptrs_[i_])                                                                \
                return fg_error_set(err, FG_INVALID_ARGUMENT,                              \
                                    "backend.cuda: %s: operand %zu is NULL", op, i_);      \
    } while (0)

fg_status fg_cuda_op_fill(void *state, void *queue, float *x, float value, size_t n,
                          fg_error *err)
{
    (void)state;
    FG_CUDA_FLAT("fill", n, x);
    return fg_cuda_launched(fg_cu_fill(STREAM(queue), x, value, n), "fill", err);
}

fg_status fg_cuda_op_scale(void *state, void *queue, float *x, float alpha, size_t n,
                           fg_error *err)
{
    (void)state;
    FG_CUDA_FLAT("scale", n, x);
    return fg_cuda_launched(fg_cu_scale(STREAM(queue), x, alpha, n), "scale", err);
}

fg_status fg_cuda_op_axpy(void *state, void *queue, float alpha, const float *x, float *y,
                          size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_FLAT("axpy", n, x, y);
    return fg_cuda_launched(fg_cu_axpy(STREAM(queue), alpha, x, y, n), "axpy", err);
}

fg_status fg_cuda_op_clamp(void *state, void *queue, float *x, float lo, float hi, size_t n,
                           fg_error *err)
{
    (void)state;
    FG_CUDA_FLAT("clamp", n, x);
    return fg_cuda_launched(fg_cu_clamp(STREAM(queue), x, lo, hi, n), "clamp", err);
}

fg_status fg_cuda_op_sum_squares(void *state, void *queue, const float *x, size_t n,
                                 float *out, fg_error *err)
{
    (void)state;
    fg_status st = fg_cuda_enter(queue, "sum_squares", err);
    if (st != FG_OK)
        return st;
    if (!out || (n > 0 && !x))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: sum_squares: %s is NULL",
                            !out ? "out" : "x");
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_sum_squares(q->stream, x, n, out, q->scratch), "sum_squares",
                            err);
}

fg_status fg_cuda_op_sgd_update(void *state, void *queue, const fg_sgd_args *a, float *param,
                                const float *grad, float *momentum_buf, size_t n,
                                fg_error *err)
{
    (void)state;
    fg_status st = fg_cuda_enter(queue, "sgd_update", err);
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
    return fg_cuda_launched(fg_cu_sgd_update(STREAM(queue), &s, param, grad, momentum_buf, n),
                            "sgd_update", err);
}

fg_status fg_cuda_op_adamw_update(void *state, void *queue, const fg_adamw_args *a,
                                  float *param, const float *grad, float *m, float *v,
                                  size_t n, fg_error *err)
{
    (void)state;
    fg_status st = fg_cuda_enter(queue, "adamw_update", err);
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
    return fg_cuda_launched(fg_cu_adamw_update(STREAM(queue), &s, param, grad, m, v, n),
                            "adamw_update", err);
}

fg_status fg_cuda_op_cast(void *state, void *queue, void *dst, uint32_t dst_dtype,
                          const void *src, uint32_t src_dtype, size_t n, fg_error *err)
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
