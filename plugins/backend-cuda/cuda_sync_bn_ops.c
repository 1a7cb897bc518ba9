/* The ABI 1.8 batch-norm ops for statistics summed across replicas ([model] sync_batchnorm:
 * batchnorm_stats, _apply, _backward_reduce, _backward_apply) in every dtype mix, behind the
 * checked trampolines: kernels/cuda/batchnorm_sync.cu on the queue's stream. The f64 sums
 * stay in device memory, where the strategy's replica all-reduce reads and writes them. */
#include "cuda_backend.h"
#include "cuda_checks.h"
#include "cuda_ops.h"

fg_status fg_cuda_op_batchnorm_stats(void *state, void *queue, uint32_t x_dtype, int n, int c,
                                     int spatial, const void *x, double *stats, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("batchnorm_stats", x_dtype);
    return fg_cuda_launched(fg_cu_bn_stats(STREAM(queue), (int)x_dtype, n, c, spatial, x,
                                           stats),
                            "batchnorm_stats", err);
}

fg_status fg_cuda_op_batchnorm_apply(void *state, void *queue, uint32_t x_dtype,
                                     uint32_t param_dtype, int n, int c, int spatial,
                                     const void *x, const double *stats, const void *gamma,
                                     const void *beta, float *running_mean, float *running_var,
                                     float momentum, float eps, float *saved_mean,
                                     float *saved_invstd, void *y, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("batchnorm_apply", x_dtype, param_dtype);
    return fg_cuda_launched(fg_cu_bn_apply(STREAM(queue), (int)x_dtype, (int)param_dtype, n, c,
                                           spatial, x, stats, gamma, beta, running_mean,
                                           running_var, momentum, eps, saved_mean,
                                           saved_invstd, y),
                            "batchnorm_apply", err);
}

fg_status fg_cuda_op_batchnorm_backward_reduce(void *state, void *queue, uint32_t x_dtype,
                                               uint32_t grad_dtype, int n, int c, int spatial,
                                               const void *x, const float *saved_mean,
                                               const float *saved_invstd, const void *dy,
                                               double *sums, void *dgamma, void *dbeta,
                                               int accumulate, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("batchnorm_backward_reduce", x_dtype, grad_dtype);
    return fg_cuda_launched(fg_cu_bn_backward_reduce(STREAM(queue), (int)x_dtype,
                                                     (int)grad_dtype, n, c, spatial, x,
                                                     saved_mean, saved_invstd, dy, sums,
                                                     dgamma, dbeta, accumulate),
                            "batchnorm_backward_reduce", err);
}

fg_status fg_cuda_op_batchnorm_backward_apply(void *state, void *queue, uint32_t x_dtype,
                                              uint32_t param_dtype, int n, int c, int spatial,
                                              const void *x, const void *gamma,
                                              const float *saved_mean,
                                              const float *saved_invstd, const void *dy,
                                              const double *sums, void *dx, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("batchnorm_backward_apply", x_dtype, param_dtype);
    return fg_cuda_launched(fg_cu_bn_backward_apply(STREAM(queue), (int)x_dtype,
                                                    (int)param_dtype, n, c, spatial, x, gamma,
                                                    saved_mean, saved_invstd, dy, sums, dx),
                            "batchnorm_backward_apply", err);
}
