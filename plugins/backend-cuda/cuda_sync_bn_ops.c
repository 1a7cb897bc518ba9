/* The ABI 1.8 batch-norm ops for statistics across replicas (batchnorm_stats, _apply,
 * _backward_reduce, _backward_apply) are not implemented on CUDA yet: supports() answers no
 * for them (fg_cuda_lacks_sync_bn_op), so the core's op-needs check refuses [model]
 * sync_batchnorm = true at setup naming the ops; their entries, reached only by a caller
 * that skips that check, fail with the same news instead of computing anything. */
#include "cuda_backend.h"
#include "cuda_ops.h"

int fg_cuda_lacks_sync_bn_op(uint32_t op)
{
    return op == FG_OP_BATCHNORM_STATS || op == FG_OP_BATCHNORM_APPLY ||
           op == FG_OP_BATCHNORM_BACKWARD_REDUCE || op == FG_OP_BATCHNORM_BACKWARD_APPLY;
}

static fg_status not_here(const char *op, fg_error *err)
{
    return fg_error_set(err, FG_UNAVAILABLE, "backend.cuda: %s (ABI 1.8, [model] "
                        "sync_batchnorm) is not implemented on this backend yet (the CPU "
                        "backend has it)", op);
}

fg_status fg_cuda_op_batchnorm_stats(void *state, void *queue, uint32_t x_dtype, int n, int c,
                                     int spatial, const void *x, double *stats, fg_error *err)
{
    (void)state, (void)queue, (void)x_dtype, (void)n, (void)c, (void)spatial, (void)x;
    (void)stats;
    return not_here("batchnorm_stats", err);
}

fg_status fg_cuda_op_batchnorm_apply(void *state, void *queue, uint32_t x_dtype,
                                     uint32_t param_dtype, int n, int c, int spatial,
                                     const void *x, const double *stats, const void *gamma,
                                     const void *beta, float *running_mean, float *running_var,
                                     float momentum, float eps, float *saved_mean,
                                     float *saved_invstd, void *y, fg_error *err)
{
    (void)state, (void)queue, (void)x_dtype, (void)param_dtype, (void)n, (void)c;
    (void)spatial, (void)x, (void)stats, (void)gamma, (void)beta, (void)running_mean;
    (void)running_var, (void)momentum, (void)eps, (void)saved_mean, (void)saved_invstd, (void)y;
    return not_here("batchnorm_apply", err);
}

fg_status fg_cuda_op_batchnorm_backward_reduce(void *state, void *queue, uint32_t x_dtype,
                                               uint32_t grad_dtype, int n, int c, int spatial,
                                               const void *x, const float *saved_mean,
                                               const float *saved_invstd, const void *dy,
                                               double *sums, void *dgamma, void *dbeta,
                                               int accumulate, fg_error *err)
{
    (void)state, (void)queue, (void)x_dtype, (void)grad_dtype, (void)n, (void)c, (void)spatial;
    (void)x, (void)saved_mean, (void)saved_invstd, (void)dy, (void)sums, (void)dgamma;
    (void)dbeta, (void)accumulate;
    return not_here("batchnorm_backward_reduce", err);
}

fg_status fg_cuda_op_batchnorm_backward_apply(void *state, void *queue, uint32_t x_dtype,
                                              uint32_t param_dtype, int n, int c, int spatial,
                                              const void *x, const void *gamma,
                                              const float *saved_mean,
                                              const float *saved_invstd, const void *dy,
                                              const double *sums, void *dx, fg_error *err)
{
    (void)state, (void)queue, (void)x_dtype, (void)param_dtype, (void)n, (void)c;
    (void)spatial, (void)x, (void)gamma, (void)saved_mean, (void)saved_invstd, (void)dy;
    (void)sums, (void)dx;
    return not_here("batchnorm_backward_apply", err);
}
