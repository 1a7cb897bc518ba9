/* The CPU backend plugin's instance state and the vtable functions, split by concern:
 * cpu_plugin.c (descriptor, options, init/deinit), cpu_device.c (devices, memory, queues,
 * copies), cpu_ops.c (the vtable's ops in every dtype) over cpu_ops_f32.c (the ops in f32:
 * argument checks, then the kernels of kernels/cpu), cpu_ops_lm.c (the transformer ops),
 * cpu_bf16.c (bf16 gemms natively through oneDNN where the CPU has avx512_bf16). */
#ifndef FG_CPU_BACKEND_H
#define FG_CPU_BACKEND_H

#include <stdatomic.h>

#include "fulgur/backend.h"
#include "cpu_kernels.h"

#define FG_CPU_MAX_DEVICES 64

/* [backend] conv_algorithm: how conv2d runs (cpu_conv.c) */
enum { FG_CPU_CONV_AUTO = 0, FG_CPU_CONV_IM2COL = 1, FG_CPU_CONV_ONEDNN = 2 };
typedef struct fg_cpu_conv_cache fg_cpu_conv_cache;

typedef struct fg_cpu_backend {
    const fg_host *host;
    int devices;               /* virtual devices: separate allocations, memcpy between */
    int threads;               /* pool size (OpenBLAS runs single-threaded inside it) */
    int64_t memory_limit_mb;   /* per device; 0: unlimited */
    uint64_t limit_bytes;      /* memory_limit_mb in bytes; 0: unlimited */
    uint64_t physical_memory;  /* bytes, read at init */
    char cpu_model[64];        /* from /proc/cpuinfo, read at init */
    fg_cpu_pool *pool;
    int conv_algorithm;             /* FG_CPU_CONV_*: measured per shape, or fixed */
    fg_cpu_conv_cache *conv_cache;  /* the choice and the oneDNN state per conv shape */
    _Atomic uint64_t in_use[FG_CPU_MAX_DEVICES]; /* bytes allocated per device */
    int bf16_native;           /* bf16 gemms through oneDNN (cpu_bf16.c) */
    const char *bf16_why;      /* why not, when not */
    atomic_int bf16_noted;     /* "bf16 emulated" was said */
} fg_cpu_backend;

/* A queue only names its device: ops run synchronously on the calling thread. */
typedef struct fg_cpu_queue {
    int device;
    /* f32 copies of half operands for the ops (cpu_ops.c): grown to the largest
     * op's need on its first call, then reused; host memory of the emulation, outside the
     * device's accounting. */
    float *scratch;
    size_t scratch_bytes;
    /* bf16 gemm primitives (cpu_bf16.c), made on the queue's first bf16 gemm */
    struct fg_cpu_dnnl_gemm *dnnl;
    int dnnl_failed; /* oneDNN could not make an engine: emulate */
} fg_cpu_queue;

/* cpu_bf16.c: a gemm in bf16 on oneDNN where the CPU has avx512_bf16 */
typedef struct fg_cpu_bf16_args {
    const char *op; /* "gemm", "gemm_bias", for messages */
    uint32_t a_dtype, b_dtype, c_dtype;
    int trans_a, trans_b, m, n, k;
    float alpha, beta;
    const void *a, *b, *bias; /* bias: b_dtype, NULL: none */
    void *c;
    int lda, ldb, ldc;
} fg_cpu_bf16_args;
/* Reads the CPU and the option bf16 (auto | native | emulated) into be. */
fg_status fg_cpu_bf16_setup(fg_cpu_backend *be, const char *mode, fg_error *err);
/* Runs g natively when it can (returns 1, *st the result); 0: the caller emulates (the
 * first bf16 gemm emulated is logged once). Arguments are already checked. */
int fg_cpu_bf16_gemm(fg_cpu_backend *be, fg_cpu_queue *q, const fg_cpu_bf16_args *g,
                     fg_status *st, fg_error *err);
void fg_cpu_bf16_queue_fini(fg_cpu_queue *q);

/* cpu_device.c */
fg_status fg_cpu_device_count(void *state, int *count, fg_error *err);
int fg_cpu_host_synchronous(void *state, int device);
fg_status fg_cpu_device_info(void *state, int device, fg_device_info *info, fg_error *err);
fg_status fg_cpu_alloc(void *state, int device, size_t bytes, void **ptr, fg_error *err);
void fg_cpu_free(void *state, int device, void *ptr);
fg_status fg_cpu_host_alloc(void *state, size_t bytes, void **ptr, fg_error *err);
void fg_cpu_host_free(void *state, void *ptr);
fg_status fg_cpu_queue_create(void *state, int device, void **queue, fg_error *err);
void fg_cpu_queue_destroy(void *state, void *queue);
fg_status fg_cpu_queue_sync(void *state, void *queue, fg_error *err);
fg_status fg_cpu_copy(void *state, void *queue, void *dst, int dst_device, const void *src,
                      int src_device, size_t bytes, fg_error *err);
/* Reads the CPU model and the physical memory size into the state. */
void fg_cpu_probe_machine(fg_cpu_backend *be);

/* cpu_ops_f32.c: the ops in f32 (argument checks, then kernels/cpu) */
fg_status fg_cpu_f32_gemm(void *state, void *queue, int trans_a, int trans_b, int m, int n,
                          int k, float alpha, const float *a, int lda, const float *b, int ldb,
                          float beta, float *c, int ldc, fg_error *err);
/* bias may be NULL (none) */
fg_status fg_cpu_f32_gemm_bias(void *state, void *queue, int trans_a, int trans_b, int m, int n,
                               int k, const float *a, int lda, const float *b, int ldb,
                               const float *bias, float *c, int ldc, fg_error *err);
fg_status fg_cpu_f32_bias_add(void *state, void *queue, float *y, const float *bias, int rows,
                              int cols, int spatial, fg_error *err);
fg_status fg_cpu_f32_bias_grad(void *state, void *queue, float *dbias, const float *dy,
                               int rows, int cols, int spatial, int accumulate, fg_error *err);
fg_status fg_cpu_f32_activation_forward(void *state, void *queue, int act, const float *x,
                                        float *y, size_t n, fg_error *err);
fg_status fg_cpu_f32_activation_backward(void *state, void *queue, int act, const float *x,
                                         const float *y, const float *dy, float *dx, size_t n,
                                         fg_error *err);
size_t fg_cpu_im2col_conv2d_workspace(void *state, const fg_conv2d_desc *d);
fg_status fg_cpu_f32_conv2d_forward(void *state, void *queue, const fg_conv2d_desc *d,
                                    const float *x, const float *w, const float *bias,
                                    float *y, void *workspace, fg_error *err);
fg_status fg_cpu_f32_conv2d_backward(void *state, void *queue, const fg_conv2d_desc *d,
                                     const float *x, const float *w, const float *dy,
                                     float *dx, float *dw, float *dbias, int accumulate,
                                     void *workspace, fg_error *err);
fg_status fg_cpu_f32_pool2d_forward(void *state, void *queue, int mode,
                                    const fg_conv2d_desc *d, const float *x, float *y,
                                    int32_t *argmax, fg_error *err);
fg_status fg_cpu_f32_pool2d_backward(void *state, void *queue, int mode,
                                     const fg_conv2d_desc *d, const float *dy,
                                     const int32_t *argmax, float *dx, fg_error *err);
fg_status fg_cpu_f32_batchnorm_forward(void *state, void *queue, int training, int n, int c,
                                       int spatial, const float *x, const float *gamma,
                                       const float *beta, float *running_mean,
                                       float *running_var, float momentum, float eps,
                                       float *saved_mean, float *saved_invstd, float *y,
                                       fg_error *err);
fg_status fg_cpu_f32_batchnorm_backward(void *state, void *queue, int n, int c, int spatial,
                                        const float *x, const float *gamma,
                                        const float *saved_mean, const float *saved_invstd,
                                        const float *dy, float *dx, float *dgamma,
                                        float *dbeta, int accumulate, fg_error *err);
fg_status fg_cpu_f32_dropout_forward(void *state, void *queue, float p, uint64_t seed,
                                     uint64_t offset, const float *x, float *y, uint8_t *mask,
                                     size_t n, fg_error *err);
fg_status fg_cpu_f32_dropout_backward(void *state, void *queue, float p, const uint8_t *mask,
                                      const float *dy, float *dx, size_t n, fg_error *err);
fg_status fg_cpu_f32_pointwise_loss(void *state, void *queue, int kind, const float *x,
                                    const float *t, size_t n, float scale, float *loss_sum,
                                    float *metric_sum, float grad_scale, float *dx,
                                    fg_error *err);
fg_status fg_cpu_f32_softmax_xent_forward(void *state, void *queue, const float *logits,
                                          const int32_t *labels, int rows, int classes,
                                          float *probs, float *loss_sum, float *correct,
                                          fg_error *err);
fg_status fg_cpu_f32_softmax_xent_backward(void *state, void *queue, const float *probs,
                                           const int32_t *labels, int rows, int classes,
                                           float scale, float *dlogits, fg_error *err);
fg_status fg_cpu_f32_fill(void *state, void *queue, float *x, float value, size_t n,
                          fg_error *err);
fg_status fg_cpu_f32_scale(void *state, void *queue, float *x, float alpha, size_t n,
                           fg_error *err);
fg_status fg_cpu_f32_axpy(void *state, void *queue, float alpha, const float *x, float *y,
                          size_t n, fg_error *err);
fg_status fg_cpu_f32_clamp(void *state, void *queue, float *x, float lo, float hi, size_t n,
                           fg_error *err);
fg_status fg_cpu_f32_sum_squares(void *state, void *queue, const float *x, size_t n,
                                 float *out, fg_error *err);
fg_status fg_cpu_f32_sgd_update(void *state, void *queue, const fg_sgd_args *a, float *param,
                                const float *grad, float *momentum_buf, size_t n,
                                fg_error *err);
fg_status fg_cpu_f32_adamw_update(void *state, void *queue, const fg_adamw_args *a,
                                  float *param, const float *grad, float *m, float *v,
                                  size_t n, fg_error *err);

/* cpu_ops.c: the vtable's ops in every dtype (f32 views, then the f32 ops) */
int fg_cpu_supports(void *state, uint32_t op, const uint32_t *dtypes);
fg_status fg_cpu_op_cast(void *state, void *queue, uint32_t dst_dtype, uint32_t src_dtype,
                         void *dst, const void *src, size_t n, fg_error *err);
fg_status fg_cpu_op_gemm(void *state, void *queue, uint32_t a_dtype, uint32_t b_dtype,
                         uint32_t c_dtype, int trans_a, int trans_b, int m, int n, int k,
                         float alpha, const void *a, int lda, const void *b, int ldb,
                         float beta, void *c, int ldc, fg_error *err);
fg_status fg_cpu_op_gemm_bias(void *state, void *queue, uint32_t a_dtype, uint32_t b_dtype,
                              uint32_t c_dtype, int trans_a, int trans_b, int m, int n, int k,
                              const void *a, int lda, const void *b, int ldb, const void *bias,
                              void *c, int ldc, fg_error *err);
fg_status fg_cpu_op_bias_add(void *state, void *queue, uint32_t y_dtype, uint32_t bias_dtype,
                             void *y, const void *bias, int rows, int cols, int spatial,
                             fg_error *err);
fg_status fg_cpu_op_bias_grad(void *state, void *queue, uint32_t dbias_dtype,
                              uint32_t dy_dtype, void *dbias, const void *dy, int rows,
                              int cols, int spatial, int accumulate, fg_error *err);
fg_status fg_cpu_op_activation_forward(void *state, void *queue, uint32_t dtype, int act,
                                       const void *x, void *y, size_t n, fg_error *err);
fg_status fg_cpu_op_activation_backward(void *state, void *queue, uint32_t dtype, int act,
                                        const void *x, const void *y, const void *dy,
                                        void *dx, size_t n, fg_error *err);
/* im2col + gemm in every dtype (half operands staged through f32) */
fg_status fg_cpu_im2col_conv2d_forward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, const fg_conv2d_desc *d,
                                       const void *x, const void *w, const void *bias, void *y,
                                       void *workspace, fg_error *err);
fg_status fg_cpu_im2col_conv2d_backward(void *state, void *queue, uint32_t x_dtype,
                                        uint32_t param_dtype, uint32_t grad_dtype,
                                        const fg_conv2d_desc *d, const void *x, const void *w,
                                        const void *dy, void *dx, void *dw, void *dbias,
                                        int accumulate, void *workspace, fg_error *err);
fg_status fg_cpu_op_pool2d_forward(void *state, void *queue, uint32_t dtype, int mode,
                                   const fg_conv2d_desc *d, const void *x, void *y,
                                   int32_t *argmax, fg_error *err);
fg_status fg_cpu_op_pool2d_backward(void *state, void *queue, uint32_t dtype, int mode,
                                    const fg_conv2d_desc *d, const void *dy,
                                    const int32_t *argmax, void *dx, fg_error *err);
fg_status fg_cpu_op_batchnorm_forward(void *state, void *queue, uint32_t x_dtype,
                                      uint32_t param_dtype, int training, int n, int c,
                                      int spatial, const void *x, const void *gamma,
                                      const void *beta, float *running_mean,
                                      float *running_var, float momentum, float eps,
                                      float *saved_mean, float *saved_invstd, void *y,
                                      fg_error *err);
fg_status fg_cpu_op_batchnorm_backward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, uint32_t grad_dtype, int n, int c,
                                       int spatial, const void *x, const void *gamma,
                                       const float *saved_mean, const float *saved_invstd,
                                       const void *dy, void *dx, void *dgamma, void *dbeta,
                                       int accumulate, fg_error *err);
fg_status fg_cpu_op_dropout_forward(void *state, void *queue, uint32_t dtype, float p,
                                    uint64_t seed, uint64_t offset, const void *x, void *y,
                                    uint8_t *mask, size_t n, fg_error *err);
fg_status fg_cpu_op_dropout_backward(void *state, void *queue, uint32_t dtype, float p,
                                     const uint8_t *mask, const void *dy, void *dx, size_t n,
                                     fg_error *err);
fg_status fg_cpu_op_pointwise_loss(void *state, void *queue, uint32_t x_dtype, int kind,
                                   const void *x, const float *t, size_t n, float scale,
                                   float *loss_sum, float *metric_sum, float grad_scale,
                                   void *dx, fg_error *err);
fg_status fg_cpu_op_softmax_xent_forward(void *state, void *queue, uint32_t logits_dtype,
                                         const void *logits, const int32_t *labels, int rows,
                                         int classes, float *probs, float *loss_sum,
                                         float *correct, fg_error *err);
fg_status fg_cpu_op_softmax_xent_backward(void *state, void *queue, uint32_t dlogits_dtype,
                                          const float *probs, const int32_t *labels, int rows,
                                          int classes, float scale, void *dlogits,
                                          fg_error *err);
fg_status fg_cpu_op_fill(void *state, void *queue, uint32_t dtype, void *x, float value,
                         size_t n, fg_error *err);
fg_status fg_cpu_op_scale(void *state, void *queue, uint32_t dtype, void *x, float alpha,
                          size_t n, fg_error *err);
fg_status fg_cpu_op_axpy(void *state, void *queue, uint32_t x_dtype, uint32_t y_dtype,
                         float alpha, const void *x, void *y, size_t n, fg_error *err);
fg_status fg_cpu_op_clamp(void *state, void *queue, uint32_t dtype, void *x, float lo,
                          float hi, size_t n, fg_error *err);
fg_status fg_cpu_op_sum_squares(void *state, void *queue, uint32_t dtype, const void *x,
                                size_t n, float *out, fg_error *err);
fg_status fg_cpu_op_sgd_update(void *state, void *queue, uint32_t param_dtype,
                               uint32_t grad_dtype, const fg_sgd_args *a, void *param,
                               const void *grad, float *momentum_buf, size_t n, fg_error *err);
fg_status fg_cpu_op_adamw_update(void *state, void *queue, uint32_t param_dtype,
                                 uint32_t grad_dtype, const fg_adamw_args *a, void *param,
                                 const void *grad, float *m, float *v, size_t n, fg_error *err);

/* cpu_conv.c: conv2d by the algorithm [backend] conv_algorithm picks, per shape and dtype:
 * im2col + gemm, or oneDNN (when built with it), chosen by timing both at the first call
 * of a shape (auto) or fixed. */
fg_status fg_cpu_conv_init(fg_cpu_backend *be, const char *algorithm, fg_error *err);
void fg_cpu_conv_deinit(fg_cpu_backend *be);
size_t fg_cpu_op_conv2d_workspace(void *state, const fg_conv2d_desc *d);
fg_status fg_cpu_op_conv2d_forward(void *state, void *queue, uint32_t x_dtype,
                                   uint32_t param_dtype, const fg_conv2d_desc *d,
                                   const void *x, const void *w, const void *bias, void *y,
                                   void *workspace, fg_error *err);
fg_status fg_cpu_op_conv2d_backward(void *state, void *queue, uint32_t x_dtype,
                                    uint32_t param_dtype, uint32_t grad_dtype,
                                    const fg_conv2d_desc *d, const void *x, const void *w,
                                    const void *dy, void *dx, void *dw, void *dbias,
                                    int accumulate, void *workspace, fg_error *err);

/* cpu_ops_lm.c: the transformer ops, every dtype */
fg_status fg_cpu_op_layernorm_forward(void *state, void *queue, uint32_t x_dtype,
                                      uint32_t param_dtype, int rms, int rows, int cols,
                                      const void *x, const void *gamma, const void *beta,
                                      float eps, float *mean, float *rstd, void *y,
                                      fg_error *err);
fg_status fg_cpu_op_layernorm_backward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, uint32_t grad_dtype, int rms,
                                       int rows, int cols, const void *x, const void *gamma,
                                       const float *mean, const float *rstd, const void *dy,
                                       void *dx, void *dgamma, void *dbeta, int accumulate,
                                       fg_error *err);
fg_status fg_cpu_op_embedding_forward(void *state, void *queue, uint32_t table_dtype,
                                      uint32_t out_dtype, const int32_t *ids, int n, int dim,
                                      int rows, const void *table, void *out, int accumulate,
                                      fg_error *err);
fg_status fg_cpu_op_embedding_backward(void *state, void *queue, uint32_t dout_dtype,
                                       uint32_t grad_dtype, const int32_t *ids, int n, int dim,
                                       int rows, const void *dout, void *dtable, int accumulate,
                                       fg_error *err);
size_t fg_cpu_op_attention_workspace(void *state, const fg_attention_desc *d);
fg_status fg_cpu_op_attention_forward(void *state, void *queue, uint32_t dtype,
                                      const fg_attention_desc *d, const void *qkv, void *y,
                                      float *lse, void *workspace, fg_error *err);
fg_status fg_cpu_op_attention_backward(void *state, void *queue, uint32_t dtype,
                                       const fg_attention_desc *d, const void *qkv,
                                       const void *y, const float *lse, const void *dy,
                                       void *dqkv, void *workspace, fg_error *err);
fg_status fg_cpu_op_attention_decode(void *state, void *queue, uint32_t dtype,
                                     const fg_attention_desc *d, int pos, const void *qkv,
                                     void *y, void *workspace, fg_error *err);

#endif
