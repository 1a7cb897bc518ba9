/* The batch-norm ops of ABI 1.8 (batchnorm_stats, _apply, _backward_reduce, _backward_apply:
 * batch norm with statistics summed across replicas) in every dtype, behind the checked
 * trampolines: f32 views of the operands (cpu_stage.h), then kernels/cpu/batchnorm_sync.c.
 * The f64 sums and the f32 saved statistics are device memory read and written as they are. */
#include <stdint.h>

#include "cpu_backend.h"
#include "cpu_stage.h"

static size_t volume(int n, int c, int spatial) { return (size_t)n * (size_t)c * (size_t)spatial; }

fg_status fg_cpu_op_batchnorm_stats(void *state, void *queue, uint32_t x_dtype, int n, int c,
                                    int spatial, const void *x, double *stats, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, volume(n, c, spatial))};
    fg_status st = fg_cpu_stage(state, queue, "batchnorm_stats", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_batchnorm_stats(FG_CPU_POOL(state), n, c, spatial, o[0].f, stats);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_batchnorm_apply(void *state, void *queue, uint32_t x_dtype,
                                    uint32_t param_dtype, int n, int c, int spatial,
                                    const void *x, const double *stats, const void *gamma,
                                    const void *beta, float *running_mean, float *running_var,
                                    float momentum, float eps, float *saved_mean,
                                    float *saved_invstd, void *y, fg_error *err)
{
    size_t xn = volume(n, c, spatial);
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, xn), ARG_IN(gamma, param_dtype, (size_t)c),
                          ARG_IN(beta, param_dtype, (size_t)c), ARG_OUT(y, x_dtype, xn)};
    fg_status st = fg_cpu_stage(state, queue, "batchnorm_apply", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_batchnorm_apply(FG_CPU_POOL(state), n, c, spatial, o[0].f, stats, o[1].f,
                               o[2].f, running_mean, running_var, momentum, eps, saved_mean,
                               saved_invstd, o[3].f);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_batchnorm_backward_reduce(void *state, void *queue, uint32_t x_dtype,
                                              uint32_t grad_dtype, int n, int c, int spatial,
                                              const void *x, const float *saved_mean,
                                              const float *saved_invstd, const void *dy,
                                              double *sums, void *dgamma, void *dbeta,
                                              int accumulate, fg_error *err)
{
    size_t xn = volume(n, c, spatial);
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, xn), ARG_IN(dy, x_dtype, xn),
                          ARG_ACC(dgamma, grad_dtype, (size_t)c, accumulate),
                          ARG_ACC(dbeta, grad_dtype, (size_t)c, accumulate)};
    fg_status st = fg_cpu_stage(state, queue, "batchnorm_backward_reduce", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_batchnorm_backward_reduce(FG_CPU_POOL(state), n, c, spatial, o[0].f, saved_mean,
                                         saved_invstd, o[1].f, sums, o[2].f, o[3].f,
                                         accumulate);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_batchnorm_backward_apply(void *state, void *queue, uint32_t x_dtype,
                                             uint32_t param_dtype, int n, int c, int spatial,
                                             const void *x, const void *gamma,
                                             const float *saved_mean,
                                             const float *saved_invstd, const void *dy,
                                             const double *sums, void *dx, fg_error *err)
{
    size_t xn = volume(n, c, spatial);
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, xn), ARG_IN(gamma, param_dtype, (size_t)c),
                          ARG_IN(dy, x_dtype, xn), ARG_OUT(dx, x_dtype, xn)};
    fg_status st = fg_cpu_stage(state, queue, "batchnorm_backward_apply", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_batchnorm_backward_apply(FG_CPU_POOL(state), n, c, spatial, o[0].f, o[1].f,
                                        saved_mean, saved_invstd, o[2].f, sums, o[3].f);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}
