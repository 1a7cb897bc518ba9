/* The CUDA backend's own-kernel ops: cuda_layer_ops.c (bias, activations, pooling, batch
 * norm, dropout, softmax cross-entropy, pointwise losses), cuda_ops.c (flat buffers: fill,
 * scale, axpy, clamp, sum of squares, cast, the fused optimizer updates) and cuda_lm_ops.c
 * (layer and RMS norm, embedding, attention), each one vtable entry for every dtype. */
#ifndef FG_CUDA_OPS_H
#define FG_CUDA_OPS_H

#include "cuda_backend.h"

fg_status fg_cuda_op_bias_add(void *state, void *queue, uint32_t y_dtype, uint32_t bias_dtype,
                              void *y, const void *bias, int rows, int cols, int spatial,
                              fg_error *err);
fg_status fg_cuda_op_bias_grad(void *state, void *queue, uint32_t dbias_dtype, uint32_t dy_dtype,
                               void *dbias, const void *dy, int rows, int cols, int spatial,
                               int accumulate, fg_error *err);
fg_status fg_cuda_op_activation_forward(void *state, void *queue, uint32_t dtype, int act,
                                        const void *x, void *y, size_t n, fg_error *err);
fg_status fg_cuda_op_activation_backward(void *state, void *queue, uint32_t dtype, int act,
                                         const void *x, const void *y, const void *dy,
                                         void *dx, size_t n, fg_error *err);
fg_status fg_cuda_op_pool2d_forward(void *state, void *queue, uint32_t dtype, int mode,
                                    const fg_conv2d_desc *d, const void *x, void *y,
                                    int32_t *argmax, fg_error *err);
fg_status fg_cuda_op_pool2d_backward(void *state, void *queue, uint32_t dtype, int mode,
                                     const fg_conv2d_desc *d, const void *dy,
                                     const int32_t *argmax, void *dx, fg_error *err);
fg_status fg_cuda_op_batchnorm_forward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, int training, int n, int c,
                                       int spatial, const void *x, const void *gamma,
                                       const void *beta, float *running_mean,
                                       float *running_var, float momentum, float eps,
                                       float *saved_mean, float *saved_invstd, void *y,
                                       fg_error *err);
fg_status fg_cuda_op_batchnorm_backward(void *state, void *queue, uint32_t x_dtype,
                                        uint32_t param_dtype, uint32_t grad_dtype, int n,
                                        int c, int spatial, const void *x, const void *gamma,
                                        const float *saved_mean, const float *saved_invstd,
                                        const void *dy, void *dx, void *dgamma, void *dbeta,
                                        int accumulate, fg_error *err);
fg_status fg_cuda_op_dropout_forward(void *state, void *queue, uint32_t dtype, float p,
                                     uint64_t seed, uint64_t offset, const void *x, void *y,
                                     uint8_t *mask, size_t n, fg_error *err);
fg_status fg_cuda_op_dropout_backward(void *state, void *queue, uint32_t dtype, float p,
                                      const uint8_t *mask, const void *dy, void *dx, size_t n,
                                      fg_error *err);
fg_status fg_cuda_op_softmax_xent_forward(void *state, void *queue, uint32_t logits_dtype,
                                          const void *logits, const int32_t *labels, int rows,
                                          int classes, float *probs, float *loss_sum,
                                          float *correct, fg_error *err);
fg_status fg_cuda_op_softmax_xent_backward(void *state, void *queue, uint32_t dlogits_dtype,
                                           const float *probs, const int32_t *labels, int rows,
                                           int classes, float scale, void *dlogits,
                                           fg_error *err);
fg_status fg_cuda_op_fill(void *state, void *queue, uint32_t dtype, void *x, float value,
                          size_t n, fg_error *err);
fg_status fg_cuda_op_scale(void *state, void *queue, uint32_t dtype, void *x, float alpha,
                           size_t n, fg_error *err);
fg_status fg_cuda_op_axpy(void *state, void *queue, uint32_t x_dtype, uint32_t y_dtype,
                          float alpha, const void *x, void *y, size_t n, fg_error *err);
fg_status fg_cuda_op_clamp(void *state, void *queue, uint32_t dtype, void *x, float lo,
                           float hi, size_t n, fg_error *err);
fg_status fg_cuda_op_sum_squares(void *state, void *queue, uint32_t dtype, const void *x,
                                 size_t n, float *out, fg_error *err);
fg_status fg_cuda_op_sgd_update(void *state, void *queue, uint32_t param_dtype,
                                uint32_t grad_dtype, const fg_sgd_args *a, void *param,
                                const void *grad, float *momentum_buf, size_t n, fg_error *err);
fg_status fg_cuda_op_adamw_update(void *state, void *queue, uint32_t param_dtype,
                                  uint32_t grad_dtype, const fg_adamw_args *a, void *param,
                                  const void *grad, float *m, float *v, size_t n,
                                  fg_error *err);
fg_status fg_cuda_op_cast(void *state, void *queue, uint32_t dst_dtype, uint32_t src_dtype,
                          void *dst, const void *src, size_t n, fg_error *err);
/* Dropout's draws (kernels/cpu/dropout.c): the key of a seed, the 24-bit threshold of p;
 * dropout and attention dropout share them. */
uint64_t fg_cuda_dropout_key(uint64_t seed);
uint32_t fg_cuda_dropout_threshold(float p);
fg_status fg_cuda_op_pointwise_loss(void *state, void *queue, uint32_t x_dtype, int kind,
                                    const void *x, const float *t, size_t n, float scale,
                                    float *loss_sum, float *metric_sum, float grad_scale,
                                    void *dx, fg_error *err);

/* cuda_lm_ops.c */
fg_status fg_cuda_op_layernorm_forward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, int rms, int rows, int cols,
                                       const void *x, const void *gamma, const void *beta,
                                       float eps, float *mean, float *rstd, void *y,
                                       fg_error *err);
fg_status fg_cuda_op_layernorm_backward(void *state, void *queue, uint32_t x_dtype,
                                        uint32_t param_dtype, uint32_t grad_dtype, int rms,
                                        int rows, int cols, const void *x, const void *gamma,
                                        const float *mean, const float *rstd, const void *dy,
                                        void *dx, void *dgamma, void *dbeta, int accumulate,
                                        fg_error *err);
fg_status fg_cuda_op_embedding_forward(void *state, void *queue, uint32_t table_dtype,
                                       uint32_t out_dtype, const int32_t *ids, int n, int dim,
                                       int rows, const void *table, void *out, int accumulate,
                                       fg_error *err);
fg_status fg_cuda_op_embedding_backward(void *state, void *queue, uint32_t dout_dtype,
                                        uint32_t grad_dtype, const int32_t *ids, int n,
                                        int dim, int rows, const void *dout, void *dtable,
                                        int accumulate, fg_error *err);
size_t fg_cuda_op_attention_workspace(void *state, const fg_attention_desc *d);
fg_status fg_cuda_op_attention_forward(void *state, void *queue, uint32_t dtype,
                                       const fg_attention_desc *d, const void *qkv, void *y,
                                       float *lse, void *workspace, fg_error *err);
fg_status fg_cuda_op_attention_backward(void *state, void *queue, uint32_t dtype,
                                        const fg_attention_desc *d, const void *qkv,
                                        const void *y, const float *lse, const void *dy,
                                        void *dqkv, void *workspace, fg_error *err);
fg_status fg_cuda_op_attention_decode(void *state, void *queue, uint32_t dtype,
                                      const fg_attention_desc *d, int pos, const void *qkv,
                                      void *y, void *workspace, fg_error *err);

#endif
