/* The CUDA backend's own-kernel ops (cuda_ops.c, cuda_ops_ex.c): fp32 vtable entries and
 * their dtype-taking (_ex) forms. */
#ifndef FG_CUDA_OPS_H
#define FG_CUDA_OPS_H

#include "cuda_backend.h"

fg_status fg_cuda_op_bias_add(void *state, void *queue, float *y, const float *bias, int rows,
                              int cols, int spatial, fg_error *err);
fg_status fg_cuda_op_bias_grad(void *state, void *queue, float *dbias, const float *dy,
                               int rows, int cols, int spatial, int accumulate, fg_error *err);
fg_status fg_cuda_op_activation_forward(void *state, void *queue, int act, const float *x,
                                        float *y, size_t n, fg_error *err);
fg_status fg_cuda_op_activation_backward(void *state, void *queue, int act, const float *x,
                                         const float *y, const float *dy, float *dx, size_t n,
                                         fg_error *err);
fg_status fg_cuda_op_pool2d_forward(void *state, void *queue, int mode,
                                    const fg_conv2d_desc *d, const float *x, float *y,
                                    int32_t *argmax, fg_error *err);
fg_status fg_cuda_op_pool2d_backward(void *state, void *queue, int mode,
                                     const fg_conv2d_desc *d, const float *dy,
                                     const int32_t *argmax, float *dx, fg_error *err);
fg_status fg_cuda_op_batchnorm_forward(void *state, void *queue, int training, int n, int c,
                                       int spatial, const float *x, const float *gamma,
                                       const float *beta, float *running_mean,
                                       float *running_var, float momentum, float eps,
                                       float *saved_mean, float *saved_invstd, float *y,
                                       fg_error *err);
fg_status fg_cuda_op_batchnorm_backward(void *state, void *queue, int n, int c, int spatial,
                                        const float *x, const float *gamma,
                                        const float *saved_mean, const float *saved_invstd,
                                        const float *dy, float *dx, float *dgamma,
                                        float *dbeta, int accumulate, fg_error *err);
fg_status fg_cuda_op_dropout_forward(void *state, void *queue, float p, uint64_t seed,
                                     uint64_t offset, const float *x, float *y, uint8_t *mask,
                                     size_t n, fg_error *err);
fg_status fg_cuda_op_dropout_backward(void *state, void *queue, float p, const uint8_t *mask,
                                      const float *dy, float *dx, size_t n, fg_error *err);
fg_status fg_cuda_op_softmax_xent_forward(void *state, void *queue, const float *logits,
                                          const int32_t *labels, int rows, int classes,
                                          float *probs, float *loss_sum, float *correct,
                                          fg_error *err);
fg_status fg_cuda_op_softmax_xent_backward(void *state, void *queue, const float *probs,
                                           const int32_t *labels, int rows, int classes,
                                           float scale, float *dlogits, fg_error *err);
fg_status fg_cuda_op_fill(void *state, void *queue, float *x, float value, size_t n,
                          fg_error *err);
fg_status fg_cuda_op_scale(void *state, void *queue, float *x, float alpha, size_t n,
                           fg_error *err);
fg_status fg_cuda_op_axpy(void *state, void *queue, float alpha, const float *x, float *y,
                          size_t n, fg_error *err);
fg_status fg_cuda_op_sum_squares(void *state, void *queue, const float *x, size_t n,
                                 float *out, fg_error *err);
fg_status fg_cuda_op_sgd_update(void *state, void *queue, const fg_sgd_args *a, float *param,
                                const float *grad, float *momentum_buf, size_t n,
                                fg_error *err);
fg_status fg_cuda_op_adamw_update(void *state, void *queue, const fg_adamw_args *a,
                                  float *param, const float *grad, float *m, float *v,
                                  size_t n, fg_error *err);
fg_status fg_cuda_op_clamp(void *state, void *queue, float *x, float lo, float hi, size_t n,
                           fg_error *err);

fg_status fg_cuda_op_cast(void *state, void *queue, void *dst, uint32_t dst_dtype,
                          const void *src, uint32_t src_dtype, size_t n, fg_error *err);
fg_status fg_cuda_op_bias_add_ex(void *state, void *queue, const fg_op_dtypes *dt, void *y,
                                 const void *bias, int rows, int cols, int spatial,
                                 fg_error *err);
fg_status fg_cuda_op_bias_grad_ex(void *state, void *queue, const fg_op_dtypes *dt,
                                  void *dbias, const void *dy, int rows, int cols, int spatial,
                                  int accumulate, fg_error *err);
fg_status fg_cuda_op_activation_forward_ex(void *state, void *queue, const fg_op_dtypes *dt,
                                           int act, const void *x, void *y, size_t n,
                                           fg_error *err);
fg_status fg_cuda_op_activation_backward_ex(void *state, void *queue, const fg_op_dtypes *dt,
                                            int act, const void *x, const void *y,
                                            const void *dy, void *dx, size_t n, fg_error *err);
fg_status fg_cuda_op_pool2d_forward_ex(void *state, void *queue, const fg_op_dtypes *dt,
                                       int mode, const fg_conv2d_desc *d, const void *x,
                                       void *y, int32_t *argmax, fg_error *err);
fg_status fg_cuda_op_pool2d_backward_ex(void *state, void *queue, const fg_op_dtypes *dt,
                                        int mode, const fg_conv2d_desc *d, const void *dy,
                                        const int32_t *argmax, void *dx, fg_error *err);
fg_status fg_cuda_op_batchnorm_forward_ex(void *state, void *queue, const fg_op_dtypes *dt,
                                          int training, int n, int c, int spatial,
                                          const void *x, const void *gamma, const void *beta,
                                          float *running_mean, float *running_var,
                                          float momentum, float eps, float *saved_mean,
                                          float *saved_invstd, void *y, fg_error *err);
fg_status fg_cuda_op_batchnorm_backward_ex(void *state, void *queue, const fg_op_dtypes *dt,
                                           int n, int c, int spatial, const void *x,
                                           const void *gamma, const float *saved_mean,
                                           const float *saved_invstd, const void *dy, void *dx,
                                           void *dgamma, void *dbeta, int accumulate,
                                           fg_error *err);
fg_status fg_cuda_op_dropout_forward_ex(void *state, void *queue, const fg_op_dtypes *dt,
                                        float p, uint64_t seed, uint64_t offset, const void *x,
                                        void *y, uint8_t *mask, size_t n, fg_error *err);
fg_status fg_cuda_op_dropout_backward_ex(void *state, void *queue, const fg_op_dtypes *dt,
                                         float p, const uint8_t *mask, const void *dy, void *dx,
                                         size_t n, fg_error *err);
fg_status fg_cuda_op_softmax_xent_forward_ex(void *state, void *queue, const fg_op_dtypes *dt,
                                             const void *logits, const int32_t *labels,
                                             int rows, int classes, float *probs,
                                             float *loss_sum, float *correct, fg_error *err);
fg_status fg_cuda_op_softmax_xent_backward_ex(void *state, void *queue,
                                              const fg_op_dtypes *dt, const float *probs,
                                              const int32_t *labels, int rows, int classes,
                                              float scale, void *dlogits, fg_error *err);

/* cuda_ops_half.c: half gradients and "true" half parameters */
fg_status fg_cuda_op_sum_squares_ex(void *state, void *queue, const void *x, uint32_t dtype,
                                    size_t n, float *out, fg_error *err);
fg_status fg_cuda_op_scale_ex(void *state, void *queue, void *x, uint32_t dtype, float alpha,
                              size_t n, fg_error *err);
fg_status fg_cuda_op_clamp_ex(void *state, void *queue, void *x, uint32_t dtype, float lo,
                              float hi, size_t n, fg_error *err);
fg_status fg_cuda_op_sgd_update_ex(void *state, void *queue, const fg_sgd_args *a, void *param,
                                   uint32_t param_dtype, const void *grad, uint32_t grad_dtype,
                                   float *momentum_buf, size_t n, fg_error *err);
fg_status fg_cuda_op_adamw_update_ex(void *state, void *queue, const fg_adamw_args *a,
                                     void *param, uint32_t param_dtype, const void *grad,
                                     uint32_t grad_dtype, float *m, float *v, size_t n,
                                     fg_error *err);

#endif
