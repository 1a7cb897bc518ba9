/* Backend plugins: devices, memory, queues, copies and the ops layers need.
 *
 * Conventions: every tensor is dense row-major (NCHW for images) in device memory of the
 * queue's device. An op is enqueued on a queue (a CUDA stream, or a CPU worker group) and
 * may run asynchronously; queue_sync waits. Ops never allocate device memory, except where
 * a workspace is noted. Thread rule: one queue is used by one host thread at a time;
 * different queues may be driven from different threads. device_count and device_info
 * have no side effects (no CUDA context, no allocation). */
#ifndef FULGUR_BACKEND_H
#define FULGUR_BACKEND_H

#include "fulgur/plugin.h"
#include "fulgur/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fg_device_info {
    uint32_t struct_size;
    int32_t index;
    char name[128];
    uint64_t total_memory; /* bytes; 0 when unknown */
    uint64_t free_memory;  /* bytes; 0 when unknown */
} fg_device_info;

typedef enum fg_activation {
    FG_ACT_NONE = 0,
    FG_ACT_RELU = 1,
    FG_ACT_GELU = 2, /* tanh approximation, as PyTorch's gelu(approximate="tanh") */
    FG_ACT_TANH = 3,
    FG_ACT_SIGMOID = 4
} fg_activation;

typedef enum fg_pool_mode { FG_POOL_MAX = 1, FG_POOL_AVG = 2 } fg_pool_mode;

/* A 2-D convolution or pooling window over NCHW tensors. */
typedef struct fg_conv2d_desc {
    uint32_t struct_size;
    int32_t n, c, h, w;      /* input */
    int32_t k;               /* output channels (conv only) */
    int32_t r, s;            /* window height, width */
    int32_t pad_h, pad_w;
    int32_t stride_h, stride_w;
    int32_t out_h, out_w;    /* filled by the caller */
} fg_conv2d_desc;

typedef struct fg_sgd_args {
    uint32_t struct_size;
    float lr, momentum, dampening, weight_decay;
    int32_t nesterov;
    int32_t first_step; /* momentum buffer starts as the gradient, as in PyTorch */
} fg_sgd_args;

typedef struct fg_adamw_args {
    uint32_t struct_size;
    float lr, beta1, beta2, eps, weight_decay;
    int64_t step; /* 1-based, for bias correction */
} fg_adamw_args;

/* Element types of an _ex op's tensors (ABI 1.x append): activations (x, y, dy, dx,
 * logits, dlogits) are in `act`, parameters (weights, biases, gamma, beta) in `param`, and
 * parameter gradients (dw, dbias, dgamma, dbeta) in `grad`; each FG_F32, FG_F16 or FG_BF16. */
typedef struct fg_op_dtypes {
    uint32_t struct_size;
    uint32_t act;
    uint32_t param;
    uint32_t grad;
} fg_op_dtypes;

typedef struct fg_backend_vtable {
    uint32_t struct_size;

    /* devices -------------------------------------------------------------------- */
    fg_status (*device_count)(void *state, int *count, fg_error *err);
    fg_status (*device_info)(void *state, int device, fg_device_info *info, fg_error *err);

    /* memory --------------------------------------------------------------------- */
    fg_status (*alloc)(void *state, int device, size_t bytes, void **ptr, fg_error *err);
    void (*free)(void *state, int device, void *ptr);
    /* Page-locked host memory for staging (plain aligned memory where the device has none). */
    fg_status (*host_alloc)(void *state, size_t bytes, void **ptr, fg_error *err);
    void (*host_free)(void *state, void *ptr);

    /* queues --------------------------------------------------------------------- */
    fg_status (*queue_create)(void *state, int device, void **queue, fg_error *err);
    void (*queue_destroy)(void *state, void *queue);
    fg_status (*queue_sync)(void *state, void *queue, fg_error *err);

    /* copies: host (-1) or a device index on each side; async on queue ------------
     * A host source must stay unchanged, and a host destination is valid, only once the
     * copy has completed: after queue_sync, or event_sync of an event recorded after it
     * (a backend without events completes copies before copy returns). */
    fg_status (*copy)(void *state, void *queue, void *dst, int dst_device, const void *src,
                      int src_device, size_t bytes, fg_error *err);

    /* ops (fp32 unless a dtype says otherwise) ------------------------------------ */
    /* C(m,n) = alpha * op(A) op(B) + beta * C, row-major; op(A) is (m,k), op(B) is (k,n). */
    fg_status (*gemm)(void *state, void *queue, int trans_a, int trans_b, int m, int n, int k,
                      float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                      float *c, int ldc, fg_error *err);
    /* y(rows, cols, spatial) += bias(cols) broadcast over rows and spatial positions */
    fg_status (*bias_add)(void *state, void *queue, float *y, const float *bias, int rows,
                          int cols, int spatial, fg_error *err);
    /* dbias(cols) (+)= sum over rows (and spatial positions) of dy; accumulate != 0 adds */
    fg_status (*bias_grad)(void *state, void *queue, float *dbias, const float *dy, int rows,
                           int cols, int spatial, int accumulate, fg_error *err);
    fg_status (*activation_forward)(void *state, void *queue, int act, const float *x,
                                    float *y, size_t n, fg_error *err);
    /* dx = dy * act'(x); x is the activation's input, y its output */
    fg_status (*activation_backward)(void *state, void *queue, int act, const float *x,
                                     const float *y, const float *dy, float *dx, size_t n,
                                     fg_error *err);
    /* workspace: scratch of at least conv2d_workspace() bytes on the queue's device */
    size_t (*conv2d_workspace)(void *state, const fg_conv2d_desc *d);
    fg_status (*conv2d_forward)(void *state, void *queue, const fg_conv2d_desc *d,
                                const float *x, const float *w, const float *bias, float *y,
                                void *workspace, fg_error *err);
    /* dx may be NULL (first layer); dw and dbias are accumulated into when accumulate != 0 */
    fg_status (*conv2d_backward)(void *state, void *queue, const fg_conv2d_desc *d,
                                 const float *x, const float *w, const float *dy, float *dx,
                                 float *dw, float *dbias, int accumulate, void *workspace,
                                 fg_error *err);
    /* argmax: (n,c,out_h,out_w) int32 scratch for max pooling, NULL for avg */
    fg_status (*pool2d_forward)(void *state, void *queue, int mode, const fg_conv2d_desc *d,
                                const float *x, float *y, int32_t *argmax, fg_error *err);
    fg_status (*pool2d_backward)(void *state, void *queue, int mode, const fg_conv2d_desc *d,
                                 const float *dy, const int32_t *argmax, float *dx,
                                 fg_error *err);
    /* Batch norm over (n, c, spatial). training != 0: batch statistics, saved_mean and
     * saved_invstd written, running stats updated with momentum (PyTorch's unbiased var). */
    fg_status (*batchnorm_forward)(void *state, void *queue, int training, int n, int c,
                                   int spatial, const float *x, const float *gamma,
                                   const float *beta, float *running_mean, float *running_var,
                                   float momentum, float eps, float *saved_mean,
                                   float *saved_invstd, float *y, fg_error *err);
    fg_status (*batchnorm_backward)(void *state, void *queue, int n, int c, int spatial,
                                    const float *x, const float *gamma, const float *saved_mean,
                                    const float *saved_invstd, const float *dy, float *dx,
                                    float *dgamma, float *dbeta, int accumulate, fg_error *err);
    /* mask(n) bytes; keep with probability 1-p, scale 1/(1-p); reproducible from
     * (seed, offset): element i's draw depends only on seed, offset + i. */
    fg_status (*dropout_forward)(void *state, void *queue, float p, uint64_t seed,
                                 uint64_t offset, const float *x, float *y, uint8_t *mask,
                                 size_t n, fg_error *err);
    fg_status (*dropout_backward)(void *state, void *queue, float p, const uint8_t *mask,
                                  const float *dy, float *dx, size_t n, fg_error *err);
    /* Mean softmax cross-entropy over rows with int32 labels. loss_sum and correct
     * (device scalars) are accumulated into: += sum of row losses, += argmax hits.
     * probs(rows, classes) keeps the softmax for backward. */
    fg_status (*softmax_xent_forward)(void *state, void *queue, const float *logits,
                                      const int32_t *labels, int rows, int classes,
                                      float *probs, float *loss_sum, float *correct,
                                      fg_error *err);
    /* dlogits = (probs - onehot(labels)) * scale */
    fg_status (*softmax_xent_backward)(void *state, void *queue, const float *probs,
                                       const int32_t *labels, int rows, int classes,
                                       float scale, float *dlogits, fg_error *err);
    /* elementwise helpers over n floats */
    fg_status (*fill)(void *state, void *queue, float *x, float value, size_t n, fg_error *err);
    fg_status (*scale)(void *state, void *queue, float *x, float alpha, size_t n, fg_error *err);
    /* y += alpha * x */
    fg_status (*axpy)(void *state, void *queue, float alpha, const float *x, float *y, size_t n,
                      fg_error *err);
    /* *out = sum of x^2 (device scalar) */
    fg_status (*sum_squares)(void *state, void *queue, const float *x, size_t n, float *out,
                             fg_error *err);
    /* fused optimizer updates over a flat range of parameters */
    fg_status (*sgd_update)(void *state, void *queue, const fg_sgd_args *a, float *param,
                            const float *grad, float *momentum_buf, size_t n, fg_error *err);
    fg_status (*adamw_update)(void *state, void *queue, const fg_adamw_args *a, float *param,
                              const float *grad, float *m, float *v, size_t n, fg_error *err);
    /* x = min(max(x, lo), hi) over n floats */
    fg_status (*clamp)(void *state, void *queue, float *x, float lo, float hi, size_t n,
                       fg_error *err);

    /* ---- dtypes (ABI 1.x append): half-precision storage -----------------------------
     * An _ex op is the fp32 op above it names, over untyped pointers whose element types
     * `dt` gives (fg_op_dtypes); what stays f32 whatever dt says is said. Arithmetic
     * accumulates in f32 and results are rounded to nearest even into their storage type.
     * With every dtype FG_F32 an _ex op gives bitwise its fp32 op's result. A dtype the
     * backend cannot store fails with FG_UNAVAILABLE. Workspaces: conv2d_workspace() bytes
     * (the f32 size) suffice for every dtype. */
    /* dst(n) = src(n) converted (f32, f16, bf16 either way; NaN stays NaN, overflow gives
     * inf) */
    fg_status (*cast)(void *state, void *queue, void *dst, uint32_t dst_dtype, const void *src,
                      uint32_t src_dtype, size_t n, fg_error *err);
    fg_status (*gemm_ex)(void *state, void *queue, int trans_a, int trans_b, int m, int n,
                         int k, float alpha, const void *a, uint32_t a_dtype, int lda,
                         const void *b, uint32_t b_dtype, int ldb, float beta, void *c,
                         uint32_t c_dtype, int ldc, fg_error *err);
    fg_status (*bias_add_ex)(void *state, void *queue, const fg_op_dtypes *dt, void *y,
                             const void *bias, int rows, int cols, int spatial, fg_error *err);
    fg_status (*bias_grad_ex)(void *state, void *queue, const fg_op_dtypes *dt, void *dbias,
                              const void *dy, int rows, int cols, int spatial, int accumulate,
                              fg_error *err);
    fg_status (*activation_forward_ex)(void *state, void *queue, const fg_op_dtypes *dt,
                                       int act, const void *x, void *y, size_t n,
                                       fg_error *err);
    fg_status (*activation_backward_ex)(void *state, void *queue, const fg_op_dtypes *dt,
                                        int act, const void *x, const void *y, const void *dy,
                                        void *dx, size_t n, fg_error *err);
    fg_status (*conv2d_forward_ex)(void *state, void *queue, const fg_op_dtypes *dt,
                                   const fg_conv2d_desc *d, const void *x, const void *w,
                                   const void *bias, void *y, void *workspace, fg_error *err);
    fg_status (*conv2d_backward_ex)(void *state, void *queue, const fg_op_dtypes *dt,
                                    const fg_conv2d_desc *d, const void *x, const void *w,
                                    const void *dy, void *dx, void *dw, void *dbias,
                                    int accumulate, void *workspace, fg_error *err);
    fg_status (*pool2d_forward_ex)(void *state, void *queue, const fg_op_dtypes *dt, int mode,
                                   const fg_conv2d_desc *d, const void *x, void *y,
                                   int32_t *argmax, fg_error *err);
    fg_status (*pool2d_backward_ex)(void *state, void *queue, const fg_op_dtypes *dt, int mode,
                                    const fg_conv2d_desc *d, const void *dy,
                                    const int32_t *argmax, void *dx, fg_error *err);
    /* running_mean, running_var, saved_mean and saved_invstd stay f32 */
    fg_status (*batchnorm_forward_ex)(void *state, void *queue, const fg_op_dtypes *dt,
                                      int training, int n, int c, int spatial, const void *x,
                                      const void *gamma, const void *beta, float *running_mean,
                                      float *running_var, float momentum, float eps,
                                      float *saved_mean, float *saved_invstd, void *y,
                                      fg_error *err);
    fg_status (*batchnorm_backward_ex)(void *state, void *queue, const fg_op_dtypes *dt, int n,
                                       int c, int spatial, const void *x, const void *gamma,
                                       const float *saved_mean, const float *saved_invstd,
                                       const void *dy, void *dx, void *dgamma, void *dbeta,
                                       int accumulate, fg_error *err);
    fg_status (*dropout_forward_ex)(void *state, void *queue, const fg_op_dtypes *dt, float p,
                                    uint64_t seed, uint64_t offset, const void *x, void *y,
                                    uint8_t *mask, size_t n, fg_error *err);
    fg_status (*dropout_backward_ex)(void *state, void *queue, const fg_op_dtypes *dt, float p,
                                     const uint8_t *mask, const void *dy, void *dx, size_t n,
                                     fg_error *err);
    /* logits in dt->act; probs, loss_sum and correct stay f32 (softmax in f32) */
    fg_status (*softmax_xent_forward_ex)(void *state, void *queue, const fg_op_dtypes *dt,
                                         const void *logits, const int32_t *labels, int rows,
                                         int classes, float *probs, float *loss_sum,
                                         float *correct, fg_error *err);
    /* probs f32; dlogits in dt->act */
    fg_status (*softmax_xent_backward_ex)(void *state, void *queue, const fg_op_dtypes *dt,
                                          const float *probs, const int32_t *labels, int rows,
                                          int classes, float scale, void *dlogits,
                                          fg_error *err);

    /* ---- half gradients and "true" half parameters (ABI 1.x append) ------------------
     * The fp32 helpers above over x of `dtype` (f32, f16, bf16): arithmetic in f32, results
     * rounded to nearest even into x. sum_squares_ex accumulates in f32 or wider and writes
     * an f32 device scalar. */
    fg_status (*sum_squares_ex)(void *state, void *queue, const void *x, uint32_t dtype,
                                size_t n, float *out, fg_error *err);
    fg_status (*scale_ex)(void *state, void *queue, void *x, uint32_t dtype, float alpha,
                          size_t n, fg_error *err);
    fg_status (*clamp_ex)(void *state, void *queue, void *x, uint32_t dtype, float lo, float hi,
                          size_t n, fg_error *err);
    /* The fused updates with param in param_dtype and grad in grad_dtype; the optimizer
     * state (momentum_buf, m, v) stays f32. Each element's update is computed in f32 from
     * the widened parameter and rounded to nearest even back into param. */
    fg_status (*sgd_update_ex)(void *state, void *queue, const fg_sgd_args *a, void *param,
                               uint32_t param_dtype, const void *grad, uint32_t grad_dtype,
                               float *momentum_buf, size_t n, fg_error *err);
    fg_status (*adamw_update_ex)(void *state, void *queue, const fg_adamw_args *a, void *param,
                                 uint32_t param_dtype, const void *grad, uint32_t grad_dtype,
                                 float *m, float *v, size_t n, fg_error *err);

    /* ---- queues and events (ABI 1.x append) -------------------------------------------
     * What lets a batch's host-to-device copy overlap compute. An event marks a point in a
     * queue. The core copies a batch out of its staging buffer on a copy queue, records an
     * event after the copy, makes the compute queue wait for that event (on the device: the
     * host goes on), and rewrites the staging buffer only after event_sync of that event
     * returned. Events are created once at setup, never per step.
     *
     * Which entries: event_create, event_destroy, event_record, queue_wait_event and
     * event_sync come together, all five or none. None (NULL, or a vtable too short to hold
     * them) means "this backend is synchronous: a copy and an op have completed when they
     * return", and the caller reuses a copy's host memory at once. copy_queue_create is
     * optional on top of the five; NULL: copies run on the compute queue, still fenced by
     * events.
     *
     * Thread rule: event_record and queue_wait_event follow their queue's rule (one host
     * thread at a time). event_sync may be called from any thread, also while other threads
     * use the queue the event was recorded on, but not at the same time as event_record or
     * event_destroy of the same event. */
    /* A queue of `device` for copies: copy, event_record, queue_wait_event, queue_sync and
     * queue_destroy take it; ops on it fail with FG_INVALID_ARGUMENT. Its copies may run
     * concurrently with the work of the device's other queues (CUDA: a stream of its own,
     * served by the copy engines). Optional (see above). */
    fg_status (*copy_queue_create)(void *state, int device, void **queue, fg_error *err);
    /* An event of `device`, recorded on and waited for by that device's queues. An event
     * never recorded is complete. */
    fg_status (*event_create)(void *state, int device, void **event, fg_error *err);
    /* May be called while the last recorded point is still pending (the backend releases
     * the event once it completes); no queue may be made to wait on it afterwards. NULL is
     * ignored. */
    void (*event_destroy)(void *state, void *event);
    /* Marks the point after all work enqueued on `queue` so far; a new record replaces the
     * previous one (waits issued before keep the point they saw). */
    fg_status (*event_record)(void *state, void *queue, void *event, fg_error *err);
    /* Work enqueued on `queue` after this call starts only once the event's recorded point
     * has completed. The host does not wait. */
    fg_status (*queue_wait_event)(void *state, void *queue, void *event, fg_error *err);
    /* The host waits until the event's recorded point has completed (at once when never
     * recorded). A failure of the work before that point may be reported here. */
    fg_status (*event_sync)(void *state, void *event, fg_error *err);
} fg_backend_vtable;

/* The five event entries (all or none: see "queues and events" above). */
#define FG_BACKEND_HAS_EVENTS(vt)                                                           \
    (FG_HAS_FIELD((vt), fg_backend_vtable, event_sync) && (vt)->event_create &&             \
     (vt)->event_destroy && (vt)->event_record && (vt)->queue_wait_event && (vt)->event_sync)

#ifdef __cplusplus
}
#endif
#endif
