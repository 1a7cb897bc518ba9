/* Backend plugins: devices, memory, queues, copies, and the ops layers, optimizers and
 * precisions need: one entry per op, for every element type.
 *
 * Conventions: every tensor is dense row-major (NCHW for images) in device memory of the
 * queue's device. An op is enqueued on a queue (a CUDA stream, or a CPU worker group) and
 * may run asynchronously; queue_sync waits. Ops never allocate device memory, except where
 * a workspace is noted. One queue is used by one host thread at a time; different queues
 * may be driven from different threads (each entry says its rule). */
#ifndef FULGUR_BACKEND_H
#define FULGUR_BACKEND_H

#include <string.h>

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

/* The losses of pointwise_loss: each value x against its f32 target t. */
typedef enum fg_pointwise_loss_kind {
    FG_LOSS_MSE = 1,       /* l = (x - t)^2; metric |x - t| */
    FG_LOSS_BCE_LOGITS = 2 /* l = max(x, 0) - x t + log(1 + exp(-|x|)); metric (x > 0) == (t > 0.5) */
} fg_pointwise_loss_kind;

/* The label that marks a row the loss ignores (softmax_xent_*, ABI 1.1): the core maps
 * [model] ignore_index to it. */
#define FG_IGNORED_LABEL (-1)

/* Multi-head scaled dot-product attention over a fused QKV tensor (B, T, 3C): q | k | v
 * along the last dimension, head h at columns [h*D, (h+1)*D) of each third, C = heads*D;
 * the output (B, T, C) holds the heads side by side. Scores are scaled by 1/sqrt(D). */
typedef struct fg_attention_desc {
    uint32_t struct_size;
    int32_t batch, seq, heads, head_dim;
    int32_t causal;          /* nonzero: query i sees keys 0..i */
    float dropout;           /* probability of dropping an attention weight (training); 0 */
    uint64_t seed, offset;   /* dropout's draws: position ((b*H + h)*T + i)*T + j + offset,
                              * reproducible as dropout_forward's */
} fg_attention_desc;

/* Op ids: the capability query (supports) names an op by its id. The ids are the ABI's and
 * never change; fg_backend_op_info gives each one's entry name and dtype arguments. */
typedef enum fg_backend_op {
    FG_OP_GEMM = 0,
    FG_OP_BIAS_ADD = 1,
    FG_OP_BIAS_GRAD = 2,
    FG_OP_ACTIVATION_FORWARD = 3,
    FG_OP_ACTIVATION_BACKWARD = 4,
    FG_OP_CONV2D_FORWARD = 5,
    FG_OP_CONV2D_BACKWARD = 6,
    FG_OP_POOL2D_FORWARD = 7,
    FG_OP_POOL2D_BACKWARD = 8,
    FG_OP_BATCHNORM_FORWARD = 9,
    FG_OP_BATCHNORM_BACKWARD = 10,
    FG_OP_DROPOUT_FORWARD = 11,
    FG_OP_DROPOUT_BACKWARD = 12,
    FG_OP_SOFTMAX_XENT_FORWARD = 13,
    FG_OP_SOFTMAX_XENT_BACKWARD = 14,
    FG_OP_FILL = 15,
    FG_OP_SCALE = 16,
    FG_OP_AXPY = 17,
    FG_OP_CLAMP = 18,
    FG_OP_SUM_SQUARES = 19,
    FG_OP_CAST = 20,
    FG_OP_SGD_UPDATE = 21,
    FG_OP_ADAMW_UPDATE = 22,
    FG_OP_POINTWISE_LOSS = 23,
    FG_OP_LAYERNORM_FORWARD = 24,
    FG_OP_LAYERNORM_BACKWARD = 25,
    FG_OP_EMBEDDING_FORWARD = 26,
    FG_OP_EMBEDDING_BACKWARD = 27,
    FG_OP_ATTENTION_FORWARD = 28,
    FG_OP_ATTENTION_BACKWARD = 29,
    FG_OP_ATTENTION_DECODE = 30, /* ABI 1.1 */
    FG_OP_GEMM_BIAS = 31,        /* ABI 1.2 */
    FG_OP_COUNT = 32
} fg_backend_op;

/* The most dtype arguments an op takes. */
#define FG_OP_MAX_DTYPES 3

/* Entry legend (each entry below starts with one):
 *   [required]  the core, the built-in layers, optimizers, precisions or strategies call it.
 *               Device, memory, queue and copy entries are needed by every run. For ops, the
 *               core works out at setup (fulgur fit, fulgur check) which ops the run will
 *               call and with which dtypes (the model's layers and loss, the precision's
 *               dtypes, the optimizer, gradient clipping) and asks the backend: a NULL entry
 *               or a supports() that says no fails the run before it starts, with one
 *               message naming every missing op and its dtypes (exit 2). A backend may leave
 *               out ops no config of its users needs.
 *   [optional]  NULL is allowed; the entry says what the caller does instead.
 * Thread rules:
 *   any thread  callable from any thread, concurrently with any entry;
 *   queue       called by the one host thread that drives `queue` at the time; different
 *               queues may be driven from different threads at once. */
typedef struct fg_backend_vtable {
    uint32_t struct_size;

    /* devices -------------------------------------------------------------------- */
    /* [required; any thread] No side effects: no CUDA context, no allocation. */
    fg_status (*device_count)(void *state, int *count, fg_error *err);
    /* [required; any thread] No side effects. */
    fg_status (*device_info)(void *state, int device, fg_device_info *info, fg_error *err);

    /* memory --------------------------------------------------------------------- */
    /* [required; any thread] */
    fg_status (*alloc)(void *state, int device, size_t bytes, void **ptr, fg_error *err);
    /* [required; any thread] */
    void (*free)(void *state, int device, void *ptr);
    /* [optional; any thread] Page-locked host memory for staging (plain aligned memory
     * where the device has none). NULL: the data loader stages batches in plain host
     * memory; comm.mpi, which stages device buffers through it, refuses the backend. */
    fg_status (*host_alloc)(void *state, size_t bytes, void **ptr, fg_error *err);
    /* [optional, with host_alloc; any thread] */
    void (*host_free)(void *state, void *ptr);

    /* queues --------------------------------------------------------------------- */
    /* [required; any thread] */
    fg_status (*queue_create)(void *state, int device, void **queue, fg_error *err);
    /* [required; queue] */
    void (*queue_destroy)(void *state, void *queue);
    /* [required; queue] Waits for everything enqueued on queue. */
    fg_status (*queue_sync)(void *state, void *queue, fg_error *err);

    /* copies --------------------------------------------------------------------- */
    /* [required; queue] host (-1) or a device index on each side; async on queue. A host
     * source must stay unchanged, and a host destination is valid, only once the copy has
     * completed: after queue_sync, or event_sync of an event recorded after it (a backend
     * without events completes copies before copy returns). */
    fg_status (*copy)(void *state, void *queue, void *dst, int dst_device, const void *src,
                      int src_device, size_t bytes, fg_error *err);

    /* capabilities ----------------------------------------------------------------- */
    /* [optional; any thread] Nonzero when the backend runs op (fg_backend_op) with these
     * dtypes: fg_backend_op_info(op)->dtype_count values, in the order of the op's dtype
     * arguments. No side effects; called at setup, before any queue exists. NULL: every
     * op whose entry is not NULL runs with every dtype FG_F32, and no other. */
    int (*supports)(void *state, uint32_t op, const uint32_t *dtypes);

    /* ops --------------------------------------------------------------------------
     * All [queue]. Tensors are `void *` with their element type in a dtype argument
     * (FG_F32, FG_F16, FG_BF16); the comment after a dtype argument lists the tensors it
     * types. Typed pointers have a fixed type whatever the dtypes: float * is f32 (running
     * and saved statistics, probabilities, loss sums, optimizer state), int32_t * is int32
     * (labels, argmax indices), uint8_t * a byte (dropout masks). An op's dtype arguments
     * come right after `queue`, in the order their tensors first appear.
     *
     * Arithmetic is f32 (sums in f32 or wider); each result is rounded to nearest even into
     * its storage type. With every dtype FG_F32 an op is the plain fp32 op. A dtype the
     * backend does not run fails with FG_UNAVAILABLE (supports() says so beforehand). */

    /* [required: linear] C(m,n) = alpha * op(A) op(B) + beta * C, row-major; op(A) is
     * (m,k), op(B) is (k,n). beta == 0: C is not read. */
    fg_status (*gemm)(void *state, void *queue, uint32_t a_dtype /* a */,
                      uint32_t b_dtype /* b */, uint32_t c_dtype /* c */, int trans_a,
                      int trans_b, int m, int n, int k, float alpha, const void *a, int lda,
                      const void *b, int ldb, float beta, void *c, int ldc, fg_error *err);
    /* [required: linear] y(rows, cols, spatial) += bias(cols) broadcast over rows and
     * spatial positions */
    fg_status (*bias_add)(void *state, void *queue, uint32_t y_dtype /* y */,
                          uint32_t bias_dtype /* bias */, void *y, const void *bias, int rows,
                          int cols, int spatial, fg_error *err);
    /* [required: linear] dbias(cols) (+)= sum over rows (and spatial positions) of dy;
     * accumulate != 0 adds */
    fg_status (*bias_grad)(void *state, void *queue, uint32_t dbias_dtype /* dbias */,
                           uint32_t dy_dtype /* dy */, void *dbias, const void *dy, int rows,
                           int cols, int spatial, int accumulate, fg_error *err);
    /* [required: activation layers] act: fg_activation */
    fg_status (*activation_forward)(void *state, void *queue, uint32_t dtype /* x, y */,
                                    int act, const void *x, void *y, size_t n, fg_error *err);
    /* [required: activation layers] dx = dy * act'(x); x is the activation's input, y its
     * output (relu and gelu read x, tanh and sigmoid y; the other may be NULL) */
    fg_status (*activation_backward)(void *state, void *queue,
                                     uint32_t dtype /* x, y, dy, dx */, int act,
                                     const void *x, const void *y, const void *dy, void *dx,
                                     size_t n, fg_error *err);
    /* [required with conv2d_forward; any thread] Bytes of scratch conv2d_forward and
     * conv2d_backward need on the queue's device, for every dtype; 0 for a bad desc. */
    size_t (*conv2d_workspace)(void *state, const fg_conv2d_desc *d);
    /* [required: conv2d] bias may be NULL. */
    fg_status (*conv2d_forward)(void *state, void *queue, uint32_t x_dtype /* x, y */,
                                uint32_t param_dtype /* w, bias */, const fg_conv2d_desc *d,
                                const void *x, const void *w, const void *bias, void *y,
                                void *workspace, fg_error *err);
    /* [required: conv2d] dx may be NULL (first layer), dbias too (no bias); dw and dbias
     * are accumulated into when accumulate != 0 */
    fg_status (*conv2d_backward)(void *state, void *queue, uint32_t x_dtype /* x, dy, dx */,
                                 uint32_t param_dtype /* w */,
                                 uint32_t grad_dtype /* dw, dbias */, const fg_conv2d_desc *d,
                                 const void *x, const void *w, const void *dy, void *dx,
                                 void *dw, void *dbias, int accumulate, void *workspace,
                                 fg_error *err);
    /* [required: maxpool2d, avgpool2d] mode: fg_pool_mode; argmax: (n,c,out_h,out_w)
     * scratch for max pooling, NULL for avg */
    fg_status (*pool2d_forward)(void *state, void *queue, uint32_t dtype /* x, y */, int mode,
                                const fg_conv2d_desc *d, const void *x, void *y,
                                int32_t *argmax, fg_error *err);
    /* [required: maxpool2d, avgpool2d] dx overwritten */
    fg_status (*pool2d_backward)(void *state, void *queue, uint32_t dtype /* dy, dx */,
                                 int mode, const fg_conv2d_desc *d, const void *dy,
                                 const int32_t *argmax, void *dx, fg_error *err);
    /* [required: batchnorm] Batch norm over (n, c, spatial). training != 0: batch
     * statistics, saved_mean and saved_invstd written, running stats updated with momentum
     * (PyTorch's unbiased var). gamma and beta may be NULL (1 and 0). */
    fg_status (*batchnorm_forward)(void *state, void *queue, uint32_t x_dtype /* x, y */,
                                   uint32_t param_dtype /* gamma, beta */, int training, int n,
                                   int c, int spatial, const void *x, const void *gamma,
                                   const void *beta, float *running_mean, float *running_var,
                                   float momentum, float eps, float *saved_mean,
                                   float *saved_invstd, void *y, fg_error *err);
    /* [required: batchnorm] dx, dgamma, dbeta may be NULL; dgamma and dbeta accumulated
     * into when accumulate != 0 */
    fg_status (*batchnorm_backward)(void *state, void *queue,
                                    uint32_t x_dtype /* x, dy, dx */,
                                    uint32_t param_dtype /* gamma */,
                                    uint32_t grad_dtype /* dgamma, dbeta */, int n, int c,
                                    int spatial, const void *x, const void *gamma,
                                    const float *saved_mean, const float *saved_invstd,
                                    const void *dy, void *dx, void *dgamma, void *dbeta,
                                    int accumulate, fg_error *err);
    /* [required: dropout] mask(n) bytes; keep with probability 1-p, scale 1/(1-p);
     * reproducible from (seed, offset): element i's draw depends only on seed, offset + i. */
    fg_status (*dropout_forward)(void *state, void *queue, uint32_t dtype /* x, y */, float p,
                                 uint64_t seed, uint64_t offset, const void *x, void *y,
                                 uint8_t *mask, size_t n, fg_error *err);
    /* [required: dropout] */
    fg_status (*dropout_backward)(void *state, void *queue, uint32_t dtype /* dy, dx */,
                                  float p, const uint8_t *mask, const void *dy, void *dx,
                                  size_t n, fg_error *err);
    /* [required: the loss] Mean softmax cross-entropy over rows with int32 labels, the
     * softmax in f32. loss_sum and correct (f32 device scalars, may be NULL) are
     * accumulated into: += sum of row losses, += argmax hits. probs(rows, classes) keeps
     * the softmax for backward. Since ABI 1.1 a label of FG_IGNORED_LABEL (-1) marks an
     * ignored row: it adds no loss and no hit, and backward writes zeros in its gradient
     * row; any other label outside [0, classes) is an error. */
    fg_status (*softmax_xent_forward)(void *state, void *queue,
                                      uint32_t logits_dtype /* logits */, const void *logits,
                                      const int32_t *labels, int rows, int classes,
                                      float *probs, float *loss_sum, float *correct,
                                      fg_error *err);
    /* [required: the loss] dlogits = (probs - onehot(labels)) * scale; 0 in an ignored
     * row (ABI 1.1) */
    fg_status (*softmax_xent_backward)(void *state, void *queue,
                                       uint32_t dlogits_dtype /* dlogits */, const float *probs,
                                       const int32_t *labels, int rows, int classes,
                                       float scale, void *dlogits, fg_error *err);
    /* [required: replicas, optimizers, metrics] x(n) = value (rounded into dtype) */
    fg_status (*fill)(void *state, void *queue, uint32_t dtype /* x */, void *x, float value,
                      size_t n, fg_error *err);
    /* [required: loss scaling, gradient clipping, strategies] x(n) *= alpha */
    fg_status (*scale)(void *state, void *queue, uint32_t dtype /* x */, void *x, float alpha,
                       size_t n, fg_error *err);
    /* [required: strategies that sum gradients across devices] y(n) += alpha * x */
    fg_status (*axpy)(void *state, void *queue, uint32_t x_dtype /* x */,
                      uint32_t y_dtype /* y */, float alpha, const void *x, void *y, size_t n,
                      fg_error *err);
    /* [required: gradient_clip_algorithm = value] x(n) = min(max(x, lo), hi), as
     * torch.clamp: NaN stays NaN; lo > hi gives hi */
    fg_status (*clamp)(void *state, void *queue, uint32_t dtype /* x */, void *x, float lo,
                       float hi, size_t n, fg_error *err);
    /* [required: gradient norms (clipping, loss scaling, nan_guard)] *out = sum of x^2, an
     * f32 device scalar, accumulated in f32 or wider; n == 0 gives 0 */
    fg_status (*sum_squares)(void *state, void *queue, uint32_t dtype /* x */, const void *x,
                             size_t n, float *out, fg_error *err);
    /* [required: half precisions] dst(n) = src(n) converted (NaN stays NaN, overflow gives
     * inf; the same dtype copies) */
    fg_status (*cast)(void *state, void *queue, uint32_t dst_dtype /* dst */,
                      uint32_t src_dtype /* src */, void *dst, const void *src, size_t n,
                      fg_error *err);
    /* [required: optimizer sgd] Fused update over a flat range; the momentum buffer is f32
     * (NULL without momentum). Each element's update is computed in f32 from the widened
     * parameter and rounded to nearest even back into param. */
    fg_status (*sgd_update)(void *state, void *queue, uint32_t param_dtype /* param */,
                            uint32_t grad_dtype /* grad */, const fg_sgd_args *a, void *param,
                            const void *grad, float *momentum_buf, size_t n, fg_error *err);
    /* [required: optimizer adamw] As sgd_update; m and v are f32. */
    fg_status (*adamw_update)(void *state, void *queue, uint32_t param_dtype /* param */,
                              uint32_t grad_dtype /* grad */, const fg_adamw_args *a,
                              void *param, const void *grad, float *m, float *v, size_t n,
                              fg_error *err);

    /* ---- queues and events -------------------------------------------
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
    /* [required: [model] loss = mse | bce_with_logits] A pointwise loss (kind: an
     * fg_pointwise_loss_kind) of n values x against f32 targets t, one entry for the loss,
     * its metric and its gradient. loss_sum and metric_sum (f32 device scalars; NULL:
     * skipped) are accumulated into: += scale * sum(l), += scale * sum(metric). dx (x_dtype,
     * may alias x; NULL: skipped) = grad_scale * dl/dx. */
    fg_status (*pointwise_loss)(void *state, void *queue, uint32_t x_dtype /* x, dx */,
                                int kind, const void *x, const float *t, size_t n, float scale,
                                float *loss_sum, float *metric_sum, float grad_scale, void *dx,
                                fg_error *err);

    /* ---- transformer ops ([queue] unless said otherwise) ------------------------------ */
    /* [required: layernorm, rmsnorm] Over the last dimension of x (rows, cols). rms == 0:
     * PyTorch's LayerNorm (biased variance, eps inside the square root); gamma and beta may
     * be NULL (1 and 0). rms != 0: y = x / sqrt(mean(x^2) + eps) * gamma, beta and mean
     * unused (may be NULL). mean and rstd (rows, f32) are saved for backward. */
    fg_status (*layernorm_forward)(void *state, void *queue, uint32_t x_dtype /* x, y */,
                                   uint32_t param_dtype /* gamma, beta */, int rms, int rows,
                                   int cols, const void *x, const void *gamma,
                                   const void *beta, float eps, float *mean, float *rstd,
                                   void *y, fg_error *err);
    /* [required: layernorm, rmsnorm] dx overwritten (may be NULL); dgamma, dbeta (may be
     * NULL) overwritten or, when accumulate != 0, added to. */
    fg_status (*layernorm_backward)(void *state, void *queue, uint32_t x_dtype /* x, dy, dx */,
                                    uint32_t param_dtype /* gamma */,
                                    uint32_t grad_dtype /* dgamma, dbeta */, int rms, int rows,
                                    int cols, const void *x, const void *gamma,
                                    const float *mean, const float *rstd, const void *dy,
                                    void *dx, void *dgamma, void *dbeta, int accumulate,
                                    fg_error *err);
    /* [required: embedding] out(n, dim) = table(rows, dim)[ids] (accumulate != 0: +=).
     * An id outside [0, rows) fails with FG_INVALID_ARGUMENT naming it and its position. */
    fg_status (*embedding_forward)(void *state, void *queue, uint32_t table_dtype /* table */,
                                   uint32_t out_dtype /* out */, const int32_t *ids, int n,
                                   int dim, int rows, const void *table, void *out,
                                   int accumulate, fg_error *err);
    /* [required: embedding] dtable(rows, dim) (+)= the rows of dout(n, dim) added at ids;
     * repeated ids sum. */
    fg_status (*embedding_backward)(void *state, void *queue, uint32_t dout_dtype /* dout */,
                                    uint32_t grad_dtype /* dtable */, const int32_t *ids,
                                    int n, int dim, int rows, const void *dout, void *dtable,
                                    int accumulate, fg_error *err);
    /* [required with attention_forward; any thread] Bytes of device scratch
     * attention_forward and attention_backward need, for every dtype; 0 for a bad desc. */
    size_t (*attention_workspace)(void *state, const fg_attention_desc *d);
    /* [required: attention] y(B, T, C) from qkv(B, T, 3C); lse (B, heads, T, f32): each
     * row's log-sum-exp of the scaled scores, saved for backward. */
    fg_status (*attention_forward)(void *state, void *queue, uint32_t dtype /* qkv, y */,
                                   const fg_attention_desc *d, const void *qkv, void *y,
                                   float *lse, void *workspace, fg_error *err);
    /* [required: attention] dqkv overwritten. y and lse are the forward's. */
    fg_status (*attention_backward)(void *state, void *queue,
                                    uint32_t dtype /* qkv, y, dy, dqkv */,
                                    const fg_attention_desc *d, const void *qkv, const void *y,
                                    const float *lse, const void *dy, void *dqkv,
                                    void *workspace, fg_error *err);

    /* ---- ABI 1.1 ------------------------------------------------------------------------ */
    /* [optional: fulgur generate's KV cache] The attention of one new position against the
     * cached ones: qkv (B, seq, 3C) in attention_forward's layout holds rows [0, pos] of
     * each sample (row pos the new position's q | k | v, rows before it the K and V of the
     * earlier positions; seq is the rows the cache holds, > pos); y (B, C) = the causal
     * attention_forward's row pos: softmax(q K^T / sqrt(D)) V over keys 0..pos. d->causal
     * and d->dropout are not read (decoding never drops). workspace: attention_workspace(d)
     * bytes. NULL: the caller runs attention_forward over rows [0, pos] (every query of
     * them, not only the last). */
    fg_status (*attention_decode)(void *state, void *queue, uint32_t dtype /* qkv, y */,
                                  const fg_attention_desc *d, int pos, const void *qkv,
                                  void *y, void *workspace, fg_error *err);

    /* ---- ABI 1.2 ------------------------------------------------------------------------ */
    /* [optional: linear's forward] C(m,n) = op(A) op(B) + bias(n) broadcast over the rows,
     * row-major as gemm (C is not read). The product is accumulated in f32, the bias added
     * to it in f32, and the sum rounded once into C's dtype (PyTorch autocast's addmm);
     * bias has b's dtype (a layer's weight and bias are both parameters) and may be NULL
     * (no bias). NULL: the caller runs gemm (beta 0), then bias_add on C, which rounds C
     * before adding the bias when C is a half type. */
    fg_status (*gemm_bias)(void *state, void *queue, uint32_t a_dtype /* a */,
                           uint32_t b_dtype /* b, bias */, uint32_t c_dtype /* c */,
                           int trans_a, int trans_b, int m, int n, int k, const void *a,
                           int lda, const void *b, int ldb, const void *bias, void *c, int ldc,
                           fg_error *err);

    /* ---- ABI 1.3 ------------------------------------------------------------------------ */
    /* [optional; any thread] Nonzero when `device` computes on host memory synchronously:
     * any host pointer may stand where an op or a copy on its queues takes device memory,
     * and an op or a copy has completed when it returns (fulgur's CPU backend). The trainer
     * then hands the model a batch where the data loader staged it instead of copying it
     * into a device buffer first. NULL or 0: batches are copied. */
    int (*host_synchronous)(void *state, int device);
} fg_backend_vtable;

/* The five event entries (all or none: see "queues and events" above). */
#define FG_BACKEND_HAS_EVENTS(vt)                                                           \
    (FG_HAS_FIELD((vt), fg_backend_vtable, event_sync) && (vt)->event_create &&             \
     (vt)->event_destroy && (vt)->event_record && (vt)->queue_wait_event && (vt)->event_sync)

/* What an op id names: its vtable entry (name and byte offset in fg_backend_vtable) and its
 * dtype arguments, by name, in order. NULL for an unknown id. */
typedef struct fg_backend_op_desc {
    const char *name;
    size_t offset;
    int dtype_count;
    const char *dtype_names[FG_OP_MAX_DTYPES];
} fg_backend_op_desc;

static inline const fg_backend_op_desc *fg_backend_op_info(uint32_t op)
{
#define FG_OP_DESC_(entry, count, ...)                                                      \
    { #entry, offsetof(fg_backend_vtable, entry), count, { __VA_ARGS__ } }
    static const fg_backend_op_desc ops[FG_OP_COUNT] = {
        FG_OP_DESC_(gemm, 3, "a", "b", "c"),
        FG_OP_DESC_(bias_add, 2, "y", "bias"),
        FG_OP_DESC_(bias_grad, 2, "dbias", "dy"),
        FG_OP_DESC_(activation_forward, 1, "x"),
        FG_OP_DESC_(activation_backward, 1, "x"),
        FG_OP_DESC_(conv2d_forward, 2, "x", "param"),
        FG_OP_DESC_(conv2d_backward, 3, "x", "param", "grad"),
        FG_OP_DESC_(pool2d_forward, 1, "x"),
        FG_OP_DESC_(pool2d_backward, 1, "x"),
        FG_OP_DESC_(batchnorm_forward, 2, "x", "param"),
        FG_OP_DESC_(batchnorm_backward, 3, "x", "param", "grad"),
        FG_OP_DESC_(dropout_forward, 1, "x"),
        FG_OP_DESC_(dropout_backward, 1, "x"),
        FG_OP_DESC_(softmax_xent_forward, 1, "logits"),
        FG_OP_DESC_(softmax_xent_backward, 1, "dlogits"),
        FG_OP_DESC_(fill, 1, "x"),
        FG_OP_DESC_(scale, 1, "x"),
        FG_OP_DESC_(axpy, 2, "x", "y"),
        FG_OP_DESC_(clamp, 1, "x"),
        FG_OP_DESC_(sum_squares, 1, "x"),
        FG_OP_DESC_(cast, 2, "dst", "src"),
        FG_OP_DESC_(sgd_update, 2, "param", "grad"),
        FG_OP_DESC_(adamw_update, 2, "param", "grad"),
        FG_OP_DESC_(pointwise_loss, 1, "x"),
        FG_OP_DESC_(layernorm_forward, 2, "x", "param"),
        FG_OP_DESC_(layernorm_backward, 3, "x", "param", "grad"),
        FG_OP_DESC_(embedding_forward, 2, "table", "out"),
        FG_OP_DESC_(embedding_backward, 2, "dout", "grad"),
        FG_OP_DESC_(attention_forward, 1, "qkv"),
        FG_OP_DESC_(attention_backward, 1, "qkv"),
        FG_OP_DESC_(attention_decode, 1, "qkv"),
        FG_OP_DESC_(gemm_bias, 3, "a", "b", "c"),
    };
#undef FG_OP_DESC_
    return op < FG_OP_COUNT ? &ops[op] : NULL;
}

/* Whether a caller can run op with these dtypes on backend be (state): its entry is there
 * and supports() says yes (without supports(): every dtype FG_F32). */
static inline int fg_backend_can(const fg_backend_vtable *be, void *state, uint32_t op,
                                 const uint32_t *dtypes)
{
    const fg_backend_op_desc *d = fg_backend_op_info(op);
    void (*fn)(void) = NULL;
    if (!be || !d || d->offset + sizeof fn > be->struct_size)
        return 0;
    memcpy(&fn, (const char *)be + d->offset, sizeof fn);
    if (!fn)
        return 0;
    if (FG_HAS_FIELD(be, fg_backend_vtable, supports) && be->supports)
        return be->supports(state, op, dtypes) != 0;
    for (int i = 0; i < d->dtype_count; i++)
        if (dtypes[i] != FG_F32)
            return 0;
    return 1;
}

#ifdef __cplusplus
}
#endif
#endif
