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
#include "fulgur/precision.h"
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

/* gemm_epilogue's fused tails (ABI 1.5), each what cuBLASLt's epilogue of the same name
 * computes once fulgur's row-major gemm is mapped onto its column-major one (see the op). */
typedef enum fg_gemm_epilogue {
    FG_EPI_BIAS = 1,          /* C = P + bias(n): gemm_bias */
    FG_EPI_GELU_AUX_BIAS = 2, /* aux = P + bias(n), C = gelu(aux): an MLP's fc forward */
    FG_EPI_DGELU_BGRAD = 3,   /* C = P * gelu'(aux), bias(n) (+)= column sums of C */
    FG_EPI_BGRADB = 4         /* C (+)= P, bias(m) (+)= row sums of op(A): dW and db */
} fg_gemm_epilogue;

/* gemm_fp8's scaling (ABI 1.9): each operand's fp8 format, its scale pair and amax history
 * in device memory (f32), and the delayed-scaling recipe. An operand's scale pair is
 * {scale, 1/scale}; its history holds history_len amaxes, [0] the newest. */
typedef struct fg_fp8_gemm_args {
    uint32_t struct_size;
    uint32_t a_format, b_format; /* FG_F8E4M3 or FG_F8E5M2 (not both E5M2) */
    int32_t history_len;         /* >= 1 */
    int32_t amax_algo;           /* fg_fp8_amax_algo */
    float margin;
    float *a_scale, *a_history;
    float *b_scale, *b_history;
    int32_t update_a, update_b; /* 1: the operand's scale from its history, then its amax
                                 * pushed; 0: quantized with the scale it holds */
} fg_fp8_gemm_args;

typedef enum fg_pool_mode { FG_POOL_MAX = 1, FG_POOL_AVG = 2 } fg_pool_mode;

/* The memory order of a convolution's or pooling's 4-D activations (x, y and their
 * gradients); filters follow it (KCRS for NCHW, KRSC for NHWC). ABI 1.9. */
typedef enum fg_tensor_layout { FG_LAYOUT_NCHW = 0, FG_LAYOUT_NHWC = 1 } fg_tensor_layout;

/* A 2-D convolution or pooling window over NCHW tensors (NHWC where layout says so). */
typedef struct fg_conv2d_desc {
    uint32_t struct_size;
    int32_t n, c, h, w;      /* input */
    int32_t k;               /* output channels (conv only) */
    int32_t r, s;            /* window height, width */
    int32_t pad_h, pad_w;
    int32_t stride_h, stride_w;
    int32_t out_h, out_w;    /* filled by the caller */
    int32_t layout;          /* ABI 1.9: fg_tensor_layout; read only when struct_size covers it */
} fg_conv2d_desc;

/* The descriptor's layout: NCHW for a descriptor from before ABI 1.9. */
static inline int32_t fg_conv2d_layout(const fg_conv2d_desc *d)
{
    return d->struct_size >= offsetof(fg_conv2d_desc, layout) + sizeof d->layout ? d->layout
                                                                                  : FG_LAYOUT_NCHW;
}

typedef struct fg_sgd_args {
    uint32_t struct_size;
    float lr, momentum, dampening, weight_decay;
    int32_t nesterov;
    int32_t first_step; /* momentum buffer starts as the gradient, as in PyTorch */
    /* ABI 1.7 (CUDA graphs): NULL, or an f32 device scalar the fused update (sgd_fused)
     * reads the learning rate from instead of lr, so that a captured update takes each
     * step's rate. */
    const float *lr_dev;
    /* ABI 1.10 (the loss scaler on the device): NULL, or a device flag (the scaler's
     * fg_loss_scale_dev.found_inf) that makes the fused update (sgd_fused) write nothing
     * when nonzero: the step the scaler skips, decided on the device. */
    const int64_t *skip_dev;
} fg_sgd_args;

typedef struct fg_adamw_args {
    uint32_t struct_size;
    float lr, beta1, beta2, eps, weight_decay;
    int64_t step; /* 1-based, for bias correction */
    /* ABI 1.7 (CUDA graphs): NULL, or 3 f32 device values the fused update (adamw_fused)
     * reads instead of lr and step: lr, (float)(1.0 - pow((double)beta1, (double)step)) and
     * (float)sqrt(1.0 - pow((double)beta2, (double)step)) (what the backends compute from
     * step), so that a captured update takes each step's rate and bias corrections. */
    const float *step_dev;
    /* ABI 1.10: as fg_sgd_args.skip_dev, for adamw_fused (m, v and the parameters stay). */
    const int64_t *skip_dev;
} fg_adamw_args;

/* ABI 1.10: the dynamic loss scaler's state in device memory (loss_scale_update; its rule
 * is fg_loss_scale_rule, fulgur/precision.h), as fg_loss_scaler_state holds it on the host; found_inf is 1 when the last update's unscaled
 * gradients held an inf or NaN (the step it decided to skip), else 0. */
typedef struct fg_loss_scale_dev {
    double scale;
    int64_t growth_tracker, hysteresis_left, skipped_steps, found_inf;
} fg_loss_scale_dev;

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
 * the output (B, T, C) holds the heads side by side. Scores are scaled by 1/sqrt(D). With
 * kv_heads (ABI 1.6) fewer key/value heads than query heads: see the field. */
typedef struct fg_attention_desc {
    uint32_t struct_size;
    int32_t batch, seq, heads, head_dim;
    int32_t causal;          /* nonzero: query i sees keys 0..i */
    float dropout;           /* probability of dropping an attention weight (training); 0 */
    uint64_t seed, offset;   /* dropout's draws: position ((b*H + h)*T + i)*T + j + offset,
                              * reproducible as dropout_forward's */
    /* ABI 1.6: grouped-query attention. 0 (or a struct_size without the field) means heads.
     * Otherwise it divides heads, and qkv is (B, T, (heads + 2*kv_heads)*D): q's heads, then
     * kv_heads keys, then kv_heads values; query head h reads key/value head
     * h / (heads / kv_heads). The output stays (B, T, heads*D). A backend without grouped
     * attention refuses kv_heads != heads. */
    int32_t kv_heads;
} fg_attention_desc;

/* The key/value heads a descriptor asks for (fg_attention_desc.kv_heads; heads when unset). */
static inline int32_t fg_attention_kv_heads(const fg_attention_desc *d)
{
    size_t end = offsetof(fg_attention_desc, kv_heads) + sizeof d->kv_heads;
    return d->struct_size >= end && d->kv_heads > 0 ? d->kv_heads : d->heads;
}

/* ---- the op list -------------------------------------------------------------------------
 * Every op is written here once, in ABI order (its id is its position). Each has a signature
 * macro FG_OP_SIG_<entry>(P): its arguments between `queue` and `err`, as P(type, name); every op
 * is `fg_status entry(void *state, void *queue, <arguments>, fg_error *err)`. FG_BACKEND_OPS(X, ctx)
 * calls X(ctx, ID, entry, dtype argument names...) for each op, in id order. From them come the
 * op ids (fg_backend_op), the vtable's op entries (FG_OP_ENTRY), the info table
 * (fg_backend_op_info), the argument checks' trampolines (fulgur/backend_checks.h) and each
 * backend's prototypes and vtable initialiser (FG_BACKEND_OP_PROTOTYPES, FG_BACKEND_OP_INIT).
 * An op's semantics are documented at its entry in fg_backend_vtable. Appending an op: its
 * signature, its row at the end of FG_BACKEND_OPS, its entry at the end of the vtable, its
 * checks in backend_checks.h, then the backends' maths. */

#define FG_OP_SIG_gemm(P) P(uint32_t, a_dtype) /* a */ P(uint32_t, b_dtype) /* b */              \
    P(uint32_t, c_dtype) /* c */ P(int, trans_a) P(int, trans_b) P(int, m) P(int, n) P(int, k)   \
    P(float, alpha) P(const void *, a) P(int, lda) P(const void *, b) P(int, ldb)                \
    P(float, beta) P(void *, c) P(int, ldc)
#define FG_OP_SIG_bias_add(P) P(uint32_t, y_dtype) /* y */ P(uint32_t, bias_dtype) /* bias */    \
    P(void *, y) P(const void *, bias) P(int, rows) P(int, cols) P(int, spatial)
#define FG_OP_SIG_bias_grad(P) P(uint32_t, dbias_dtype) /* dbias */                              \
    P(uint32_t, dy_dtype) /* dy */ P(void *, dbias) P(const void *, dy) P(int, rows)             \
    P(int, cols) P(int, spatial) P(int, accumulate)
#define FG_OP_SIG_activation_forward(P) P(uint32_t, dtype) /* x, y */ P(int, act)                \
    P(const void *, x) P(void *, y) P(size_t, n)
#define FG_OP_SIG_activation_backward(P) P(uint32_t, dtype) /* x, y, dy, dx */ P(int, act)       \
    P(const void *, x) P(const void *, y) P(const void *, dy) P(void *, dx) P(size_t, n)
#define FG_OP_SIG_conv2d_forward(P) P(uint32_t, x_dtype) /* x, y */                              \
    P(uint32_t, param_dtype) /* w, bias */ P(const fg_conv2d_desc *, d) P(const void *, x)       \
    P(const void *, w) P(const void *, bias) P(void *, y) P(void *, workspace)
#define FG_OP_SIG_conv2d_backward(P) P(uint32_t, x_dtype) /* x, dy, dx */                        \
    P(uint32_t, param_dtype) /* w */ P(uint32_t, grad_dtype) /* dw, dbias */                     \
    P(const fg_conv2d_desc *, d) P(const void *, x) P(const void *, w) P(const void *, dy)       \
    P(void *, dx) P(void *, dw) P(void *, dbias) P(int, accumulate) P(void *, workspace)
#define FG_OP_SIG_pool2d_forward(P) P(uint32_t, dtype) /* x, y */ P(int, mode)                   \
    P(const fg_conv2d_desc *, d) P(const void *, x) P(void *, y) P(int32_t *, argmax)
#define FG_OP_SIG_pool2d_backward(P) P(uint32_t, dtype) /* dy, dx */ P(int, mode)                \
    P(const fg_conv2d_desc *, d) P(const void *, dy) P(const int32_t *, argmax) P(void *, dx)
#define FG_OP_SIG_batchnorm_forward(P) P(uint32_t, x_dtype) /* x, y */                           \
    P(uint32_t, param_dtype) /* gamma, beta */ P(int, training) P(int, n) P(int, c)              \
    P(int, spatial) P(const void *, x) P(const void *, gamma) P(const void *, beta)              \
    P(float *, running_mean) P(float *, running_var) P(float, momentum) P(float, eps)            \
    P(float *, saved_mean) P(float *, saved_invstd) P(void *, y)
#define FG_OP_SIG_batchnorm_backward(P) P(uint32_t, x_dtype) /* x, dy, dx */                     \
    P(uint32_t, param_dtype) /* gamma */ P(uint32_t, grad_dtype) /* dgamma, dbeta */ P(int, n)   \
    P(int, c) P(int, spatial) P(const void *, x) P(const void *, gamma)                          \
    P(const float *, saved_mean) P(const float *, saved_invstd) P(const void *, dy)              \
    P(void *, dx) P(void *, dgamma) P(void *, dbeta) P(int, accumulate)
#define FG_OP_SIG_dropout_forward(P) P(uint32_t, dtype) /* x, y */ P(float, p)                   \
    P(uint64_t, seed) P(uint64_t, offset) P(const void *, x) P(void *, y) P(uint8_t *, mask)     \
    P(size_t, n)
/* ABI 1.10: dropout whose step part of the offset lives in device memory (CUDA graphs) */
#define FG_OP_SIG_dropout_forward_dev(P) P(uint32_t, dtype) /* x, y */ P(float, p)               \
    P(uint64_t, seed) P(uint64_t, offset) P(uint64_t *, offset_dev) P(uint64_t, advance)         \
    P(const void *, x) P(void *, y) P(uint8_t *, mask) P(size_t, n)
#define FG_OP_SIG_dropout_backward(P) P(uint32_t, dtype) /* dy, dx */ P(float, p)                \
    P(const uint8_t *, mask) P(const void *, dy) P(void *, dx) P(size_t, n)
#define FG_OP_SIG_softmax_xent_forward(P) P(uint32_t, logits_dtype) /* logits */                 \
    P(const void *, logits) P(const int32_t *, labels) P(int, rows) P(int, classes)              \
    P(float *, probs) P(float *, loss_sum) P(float *, correct)
#define FG_OP_SIG_softmax_xent_backward(P) P(uint32_t, dlogits_dtype) /* dlogits */              \
    P(const float *, probs) P(const int32_t *, labels) P(int, rows) P(int, classes)              \
    P(float, scale) P(void *, dlogits)
#define FG_OP_SIG_fill(P) P(uint32_t, dtype) /* x */ P(void *, x) P(float, value) P(size_t, n)
#define FG_OP_SIG_scale(P) P(uint32_t, dtype) /* x */ P(void *, x) P(float, alpha) P(size_t, n)
#define FG_OP_SIG_axpy(P) P(uint32_t, x_dtype) /* x */ P(uint32_t, y_dtype) /* y */              \
    P(float, alpha) P(const void *, x) P(void *, y) P(size_t, n)
#define FG_OP_SIG_clamp(P) P(uint32_t, dtype) /* x */ P(void *, x) P(float, lo) P(float, hi)     \
    P(size_t, n)
#define FG_OP_SIG_sum_squares(P) P(uint32_t, dtype) /* x */ P(const void *, x) P(size_t, n)      \
    P(float *, out)
#define FG_OP_SIG_cast(P) P(uint32_t, dst_dtype) /* dst */ P(uint32_t, src_dtype) /* src */      \
    P(void *, dst) P(const void *, src) P(size_t, n)
#define FG_OP_SIG_sgd_update(P) P(uint32_t, param_dtype) /* param */                             \
    P(uint32_t, grad_dtype) /* grad */ P(const fg_sgd_args *, a) P(void *, param)                \
    P(const void *, grad) P(float *, momentum_buf) P(size_t, n)
#define FG_OP_SIG_adamw_update(P) P(uint32_t, param_dtype) /* param */                           \
    P(uint32_t, grad_dtype) /* grad */ P(const fg_adamw_args *, a) P(void *, param)              \
    P(const void *, grad) P(float *, m) P(float *, v) P(size_t, n)
#define FG_OP_SIG_pointwise_loss(P) P(uint32_t, x_dtype) /* x, dx */ P(int, kind)                \
    P(const void *, x) P(const float *, t) P(size_t, n) P(float, scale) P(float *, loss_sum)     \
    P(float *, metric_sum) P(float, grad_scale) P(void *, dx)
#define FG_OP_SIG_layernorm_forward(P) P(uint32_t, x_dtype) /* x, y */                           \
    P(uint32_t, param_dtype) /* gamma, beta */ P(int, rms) P(int, rows) P(int, cols)             \
    P(const void *, x) P(const void *, gamma) P(const void *, beta) P(float, eps)                \
    P(float *, mean) P(float *, rstd) P(void *, y)
#define FG_OP_SIG_layernorm_backward(P) P(uint32_t, x_dtype) /* x, dy, dx */                     \
    P(uint32_t, param_dtype) /* gamma */ P(uint32_t, grad_dtype) /* dgamma, dbeta */             \
    P(int, rms) P(int, rows) P(int, cols) P(const void *, x) P(const void *, gamma)              \
    P(const float *, mean) P(const float *, rstd) P(const void *, dy) P(void *, dx)              \
    P(void *, dgamma) P(void *, dbeta) P(int, accumulate)
#define FG_OP_SIG_embedding_forward(P) P(uint32_t, table_dtype) /* table */                      \
    P(uint32_t, out_dtype) /* out */ P(const int32_t *, ids) P(int, n) P(int, dim) P(int, rows)  \
    P(const void *, table) P(void *, out) P(int, accumulate)
#define FG_OP_SIG_embedding_backward(P) P(uint32_t, dout_dtype) /* dout */                       \
    P(uint32_t, grad_dtype) /* dtable */ P(const int32_t *, ids) P(int, n) P(int, dim)           \
    P(int, rows) P(const void *, dout) P(void *, dtable) P(int, accumulate)
#define FG_OP_SIG_attention_forward(P) P(uint32_t, dtype) /* qkv, y */                           \
    P(const fg_attention_desc *, d) P(const void *, qkv) P(void *, y) P(float *, lse)            \
    P(void *, workspace)
#define FG_OP_SIG_attention_backward(P) P(uint32_t, dtype) /* qkv, y, dy, dqkv */                \
    P(const fg_attention_desc *, d) P(const void *, qkv) P(const void *, y)                      \
    P(const float *, lse) P(const void *, dy) P(void *, dqkv) P(void *, workspace)
#define FG_OP_SIG_attention_decode(P) P(uint32_t, dtype) /* qkv, y */                            \
    P(const fg_attention_desc *, d) P(int, pos) P(const void *, qkv) P(void *, y)                \
    P(void *, workspace)
#define FG_OP_SIG_gemm_bias(P) P(uint32_t, a_dtype) /* a */ P(uint32_t, b_dtype) /* b, bias */   \
    P(uint32_t, c_dtype) /* c */ P(int, trans_a) P(int, trans_b) P(int, m) P(int, n) P(int, k)   \
    P(const void *, a) P(int, lda) P(const void *, b) P(int, ldb) P(const void *, bias)          \
    P(void *, c) P(int, ldc)
#define FG_OP_SIG_classifier(P) P(uint32_t, dtype) /* logits, dlogits */                        \
    P(const void *, logits) P(int, ld) P(const int32_t *, labels) P(int, rows) P(int, classes)   \
    P(float *, loss_sum) P(float *, correct) P(float, grad_scale) P(void *, dlogits)
#define FG_OP_SIG_gemm_epilogue(P) P(uint32_t, ab_dtype) /* a, b */                             \
    P(uint32_t, c_dtype) /* c, aux */ P(uint32_t, bias_dtype) /* bias */ P(int, epilogue)        \
    P(int, trans_a) P(int, trans_b) P(int, m) P(int, n) P(int, k) P(const void *, a)             \
    P(int, lda) P(const void *, b) P(int, ldb) P(void *, c) P(int, ldc) P(void *, aux)           \
    P(int, ldaux) P(void *, bias) P(int, accumulate)
#define FG_OP_SIG_grad_clip_coef(P) P(uint32_t, dtype) /* x */ P(const void *, x) P(size_t, n) \
    P(double, max_norm) P(float *, sq) P(float *, coef)
#define FG_OP_SIG_sgd_fused(P) P(uint32_t, param_dtype) /* param */                              \
    P(uint32_t, grad_dtype) /* grad */ P(uint32_t, work_dtype) /* work */                        \
    P(const fg_sgd_args *, a) P(void *, param) P(const void *, grad) P(float *, momentum_buf)    \
    P(const float *, grad_scale) P(void *, work) P(size_t, n)
#define FG_OP_SIG_adamw_fused(P) P(uint32_t, param_dtype) /* param */                            \
    P(uint32_t, grad_dtype) /* grad */ P(uint32_t, work_dtype) /* work */                        \
    P(const fg_adamw_args *, a) P(void *, param) P(const void *, grad) P(float *, m)             \
    P(float *, v) P(const float *, grad_scale) P(void *, work) P(size_t, n)
#define FG_OP_SIG_layernorm_residual_forward(P) P(uint32_t, x_dtype) /* a, b, r, y */           \
    P(uint32_t, param_dtype) /* gamma, beta */ P(int, rms) P(int, rows) P(int, cols)             \
    P(const void *, a) P(const void *, b) P(void *, r) P(const void *, gamma)                    \
    P(const void *, beta) P(float, eps) P(float *, mean) P(float *, rstd) P(void *, y)
#define FG_OP_SIG_layernorm_residual_backward(P) P(uint32_t, x_dtype) /* x, dy, dres, dx */      \
    P(uint32_t, param_dtype) /* gamma */ P(uint32_t, grad_dtype) /* dgamma, dbeta */             \
    P(int, rms) P(int, rows) P(int, cols) P(const void *, x) P(const void *, gamma)              \
    P(const float *, mean) P(const float *, rstd) P(const void *, dy) P(const void *, dres)      \
    P(void *, dx) P(void *, dgamma) P(void *, dbeta) P(int, accumulate)

#define FG_OP_SIG_rope_forward(P) P(uint32_t, dtype) /* x */ P(int, rows) P(int, seq)          \
    P(int, pos0) P(int, heads) P(int, head_dim) P(int, ld) P(float, theta) P(void *, x)
#define FG_OP_SIG_rope_backward(P) FG_OP_SIG_rope_forward(P)
/* ABI 1.9: rope with a table of inverse frequencies (rope scaling) */
#define FG_OP_SIG_rope_freq_forward(P) P(uint32_t, dtype) /* x */ P(int, rows) P(int, seq)     \
    P(int, pos0) P(int, heads) P(int, head_dim) P(int, ld) P(const double *, inv_freq)           \
    P(void *, x)
#define FG_OP_SIG_rope_freq_backward(P) FG_OP_SIG_rope_freq_forward(P)
#define FG_OP_SIG_swiglu_forward(P) P(uint32_t, dtype) /* gate, up, y */                         \
    P(const void *, gate) P(const void *, up) P(void *, y) P(size_t, n)
#define FG_OP_SIG_swiglu_backward(P) P(uint32_t, dtype) /* gate, up, dy, dgate, dup */           \
    P(const void *, gate) P(const void *, up) P(const void *, dy) P(void *, dgate)               \
    P(void *, dup) P(size_t, n)

/* ABI 1.8: batch norm split for statistics reduced across replicas ([model] sync_batchnorm) */
#define FG_OP_SIG_batchnorm_stats(P) P(uint32_t, x_dtype) /* x */ P(int, n) P(int, c)            \
    P(int, spatial) P(const void *, x) P(double *, stats)
#define FG_OP_SIG_batchnorm_apply(P) P(uint32_t, x_dtype) /* x, y */                             \
    P(uint32_t, param_dtype) /* gamma, beta */ P(int, n) P(int, c) P(int, spatial)               \
    P(const void *, x) P(const double *, stats) P(const void *, gamma) P(const void *, beta)     \
    P(float *, running_mean) P(float *, running_var) P(float, momentum) P(float, eps)            \
    P(float *, saved_mean) P(float *, saved_invstd) P(void *, y)
#define FG_OP_SIG_batchnorm_backward_reduce(P) P(uint32_t, x_dtype) /* x, dy */                  \
    P(uint32_t, grad_dtype) /* dgamma, dbeta */ P(int, n) P(int, c) P(int, spatial)              \
    P(const void *, x) P(const float *, saved_mean) P(const float *, saved_invstd)               \
    P(const void *, dy) P(double *, sums) P(void *, dgamma) P(void *, dbeta) P(int, accumulate)
#define FG_OP_SIG_batchnorm_backward_apply(P) P(uint32_t, x_dtype) /* x, dy, dx */               \
    P(uint32_t, param_dtype) /* gamma */ P(int, n) P(int, c) P(int, spatial) P(const void *, x)  \
    P(const void *, gamma) P(const float *, saved_mean) P(const float *, saved_invstd)           \
    P(const void *, dy) P(const double *, sums) P(void *, dx)

/* ABI 1.9: a gemm with fp8 operands and per-tensor scales (precision.fp8-mixed) */
#define FG_OP_SIG_gemm_fp8(P) P(uint32_t, ab_dtype) /* a, b as stored */                       \
    P(uint32_t, c_dtype) /* c */ P(int, trans_a) P(int, trans_b) P(int, m) P(int, n) P(int, k)   \
    P(const void *, a) P(int, lda) P(const void *, b) P(int, ldb) P(float, beta) P(void *, c)    \
    P(int, ldc) P(const fg_fp8_gemm_args *, f8)

/* ABI 1.10: the NCHW <-> NHWC transpose of activations ([model] memory_format) */
#define FG_OP_SIG_transpose_batched(P) P(uint32_t, dtype) /* x, y */ P(int, batch)             \
    P(int, rows) P(int, cols) P(const void *, x) P(void *, y)

/* ABI 1.10: the loss scaler's step on the device */
#define FG_OP_SIG_loss_scale_update(P) P(uint32_t, dtype) /* x */ P(void *, x) P(size_t, n)     \
    P(const fg_loss_scale_rule *, rule) P(float *, sq) P(fg_loss_scale_dev *, scaler)
#define FG_OP_SIG_softmax_xent_backward_scaled(P) P(uint32_t, dlogits_dtype) /* dlogits */     \
    P(const float *, probs) P(const int32_t *, labels) P(int, rows) P(int, classes)              \
    P(float, scale) P(float, divisor) P(const fg_loss_scale_dev *, scaler) P(void *, dlogits)
/* ABI 1.11: the classifier with label smoothing ([model] label_smoothing) */
#define FG_OP_SIG_classifier_smoothed(P) P(uint32_t, dtype) /* logits, dlogits */             \
    P(const void *, logits) P(int, ld) P(const int32_t *, labels) P(int, rows) P(int, classes)   \
    P(float, smoothing) P(float *, loss_sum) P(float *, correct) P(float, grad_scale)            \
    P(float, divisor) P(const fg_loss_scale_dev *, scaler) P(void *, dlogits)

#define FG_BACKEND_OPS(X, ctx)                                                                   \
    X(ctx, GEMM, gemm, "a", "b", "c")                                                            \
    X(ctx, BIAS_ADD, bias_add, "y", "bias")                                                      \
    X(ctx, BIAS_GRAD, bias_grad, "dbias", "dy")                                                  \
    X(ctx, ACTIVATION_FORWARD, activation_forward, "x")                                          \
    X(ctx, ACTIVATION_BACKWARD, activation_backward, "x")                                        \
    X(ctx, CONV2D_FORWARD, conv2d_forward, "x", "param")                                         \
    X(ctx, CONV2D_BACKWARD, conv2d_backward, "x", "param", "grad")                               \
    X(ctx, POOL2D_FORWARD, pool2d_forward, "x")                                                  \
    X(ctx, POOL2D_BACKWARD, pool2d_backward, "x")                                                \
    X(ctx, BATCHNORM_FORWARD, batchnorm_forward, "x", "param")                                   \
    X(ctx, BATCHNORM_BACKWARD, batchnorm_backward, "x", "param", "grad")                         \
    X(ctx, DROPOUT_FORWARD, dropout_forward, "x")                                                \
    X(ctx, DROPOUT_BACKWARD, dropout_backward, "x")                                              \
    X(ctx, SOFTMAX_XENT_FORWARD, softmax_xent_forward, "logits")                                 \
    X(ctx, SOFTMAX_XENT_BACKWARD, softmax_xent_backward, "dlogits")                              \
    X(ctx, FILL, fill, "x")                                                                      \
    X(ctx, SCALE, scale, "x")                                                                    \
    X(ctx, AXPY, axpy, "x", "y")                                                                 \
    X(ctx, CLAMP, clamp, "x")                                                                    \
    X(ctx, SUM_SQUARES, sum_squares, "x")                                                        \
    X(ctx, CAST, cast, "dst", "src")                                                             \
    X(ctx, SGD_UPDATE, sgd_update, "param", "grad")                                              \
    X(ctx, ADAMW_UPDATE, adamw_update, "param", "grad")                                          \
    X(ctx, POINTWISE_LOSS, pointwise_loss, "x")                                                  \
    X(ctx, LAYERNORM_FORWARD, layernorm_forward, "x", "param")                                   \
    X(ctx, LAYERNORM_BACKWARD, layernorm_backward, "x", "param", "grad")                         \
    X(ctx, EMBEDDING_FORWARD, embedding_forward, "table", "out")                                 \
    X(ctx, EMBEDDING_BACKWARD, embedding_backward, "dout", "grad")                               \
    X(ctx, ATTENTION_FORWARD, attention_forward, "qkv")                                          \
    X(ctx, ATTENTION_BACKWARD, attention_backward, "qkv")                                        \
    X(ctx, ATTENTION_DECODE, attention_decode, "qkv") /* ABI 1.1 */                              \
    X(ctx, GEMM_BIAS, gemm_bias, "a", "b", "c") /* ABI 1.2 */                                   \
    X(ctx, CLASSIFIER, classifier, "logits") /* ABI 1.4 */                                       \
    X(ctx, GEMM_EPILOGUE, gemm_epilogue, "ab", "c", "bias") /* ABI 1.5 */                    \
    X(ctx, GRAD_CLIP_COEF, grad_clip_coef, "x") /* ABI 1.5 */                                    \
    X(ctx, SGD_FUSED, sgd_fused, "param", "grad", "work") /* ABI 1.5 */                          \
    X(ctx, ADAMW_FUSED, adamw_fused, "param", "grad", "work") /* ABI 1.5 */                      \
    X(ctx, LAYERNORM_RESIDUAL_FORWARD, layernorm_residual_forward, "x", "param") /* ABI 1.5 */    \
    X(ctx, LAYERNORM_RESIDUAL_BACKWARD, layernorm_residual_backward, "x", "param",                \
      "grad") /* ABI 1.5 */                                                                      \
    X(ctx, ROPE_FORWARD, rope_forward, "x") /* ABI 1.6 */                                        \
    X(ctx, ROPE_BACKWARD, rope_backward, "x") /* ABI 1.6 */                                      \
    X(ctx, SWIGLU_FORWARD, swiglu_forward, "x") /* ABI 1.6 */                                    \
    X(ctx, SWIGLU_BACKWARD, swiglu_backward, "x") /* ABI 1.6 */                                  \
    X(ctx, BATCHNORM_STATS, batchnorm_stats, "x") /* ABI 1.8 */                                  \
    X(ctx, BATCHNORM_APPLY, batchnorm_apply, "x", "param") /* ABI 1.8 */                         \
    X(ctx, BATCHNORM_BACKWARD_REDUCE, batchnorm_backward_reduce, "x", "grad") /* ABI 1.8 */      \
    X(ctx, BATCHNORM_BACKWARD_APPLY, batchnorm_backward_apply, "x", "param") /* ABI 1.8 */    \
    X(ctx, GEMM_FP8, gemm_fp8, "ab", "c") /* ABI 1.9 */                                          \
    X(ctx, ROPE_FREQ_FORWARD, rope_freq_forward, "x") /* ABI 1.9 */                              \
    X(ctx, ROPE_FREQ_BACKWARD, rope_freq_backward, "x") /* ABI 1.9 */                            \
    X(ctx, TRANSPOSE_BATCHED, transpose_batched, "x") /* ABI 1.10 */                             \
    X(ctx, DROPOUT_FORWARD_DEV, dropout_forward_dev, "x") /* ABI 1.10 */                         \
    X(ctx, LOSS_SCALE_UPDATE, loss_scale_update, "x") /* ABI 1.10 */                             \
    X(ctx, SOFTMAX_XENT_BACKWARD_SCALED, softmax_xent_backward_scaled, "dlogits") /* ABI 1.10 */\
    X(ctx, CLASSIFIER_SMOOTHED, classifier_smoothed, "logits") /* ABI 1.11 */

/* The generators' helpers: each argument as a declaration or as its name, after a comma. */
#define FG_OP_DECL_(type, name) , type name
#define FG_OP_NAME_(type, name) , name
/* An op's parameter list, and its argument list (the parameters' names in order). */
#define FG_OP_PARAMS(entry) (void *state, void *queue FG_OP_SIG_##entry(FG_OP_DECL_), fg_error *err)
#define FG_OP_ARGS(entry) (state, queue FG_OP_SIG_##entry(FG_OP_NAME_), err)
/* An op's vtable entry. */
#define FG_OP_ENTRY(entry) fg_status(*entry) FG_OP_PARAMS(entry)

/* Op ids: the capability query (supports) names an op by its id. The ids are the ABI's and
 * never change: an op's position in FG_BACKEND_OPS. fg_backend_op_info gives each one's entry
 * name and dtype arguments. */
#define FG_OP_ID_(ctx, id, ...) FG_OP_##id,
typedef enum fg_backend_op { FG_BACKEND_OPS(FG_OP_ID_, ~) FG_OP_COUNT } fg_backend_op;
#undef FG_OP_ID_

/* A backend's prototypes of its op functions, PREFIX<entry> (FG_BACKEND_OP_PROTOTYPES(fg_cpu_op_)
 * declares fg_cpu_op_gemm, ...), and the designated initialisers of its vtable's op entries
 * (.gemm = fg_cpu_op_gemm, ...). A backend that leaves ops out writes its entries by hand. */
#define FG_OP_PROTOTYPE_(prefix, id, entry, ...) fg_status prefix##entry FG_OP_PARAMS(entry);
#define FG_BACKEND_OP_PROTOTYPES(prefix) FG_BACKEND_OPS(FG_OP_PROTOTYPE_, prefix)
#define FG_OP_INIT_(prefix, id, entry, ...) .entry = prefix##entry,
#define FG_BACKEND_OP_INIT(prefix) FG_BACKEND_OPS(FG_OP_INIT_, prefix)


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
     * All [queue]; each op's signature is its FG_OP_SIG_ in the op list above. Tensors
     * are `void *` with their element type in a dtype argument (FG_F32, FG_F16, FG_BF16);
     * the comment after a dtype argument there lists the tensors it types. Typed pointers have a fixed type whatever the dtypes: float * is f32 (running
     * and saved statistics, probabilities, loss sums, optimizer state), int32_t * is int32
     * (labels, argmax indices), uint8_t * a byte (dropout masks). An op's dtype arguments
     * come right after `queue`, in the order their tensors first appear.
     *
     * Arithmetic is f32 (sums in f32 or wider); each result is rounded to nearest even into
     * its storage type. With every dtype FG_F32 an op is the plain fp32 op. A dtype the
     * backend does not run fails with FG_UNAVAILABLE (supports() says so beforehand). */

    /* [required: linear] C(m,n) = alpha * op(A) op(B) + beta * C, row-major; op(A) is
     * (m,k), op(B) is (k,n). beta == 0: C is not read. */
    FG_OP_ENTRY(gemm); /* op 0 */
    /* [required: linear] y(rows, cols, spatial) += bias(cols) broadcast over rows and
     * spatial positions */
    FG_OP_ENTRY(bias_add); /* op 1 */
    /* [required: linear] dbias(cols) (+)= sum over rows (and spatial positions) of dy;
     * accumulate != 0 adds */
    FG_OP_ENTRY(bias_grad); /* op 2 */
    /* [required: activation layers] act: fg_activation */
    FG_OP_ENTRY(activation_forward); /* op 3 */
    /* [required: activation layers] dx = dy * act'(x); x is the activation's input, y its
     * output (relu and gelu read x, tanh and sigmoid y; the other may be NULL) */
    FG_OP_ENTRY(activation_backward); /* op 4 */
    /* [required with conv2d_forward; any thread] Bytes of scratch conv2d_forward and
     * conv2d_backward need on the queue's device, for every dtype; 0 for a bad desc. */
    size_t (*conv2d_workspace)(void *state, const fg_conv2d_desc *d);
    /* [required: conv2d] bias may be NULL. */
    FG_OP_ENTRY(conv2d_forward); /* op 5 */
    /* [required: conv2d] dx may be NULL (first layer), dbias too (no bias); dw and dbias
     * are accumulated into when accumulate != 0 */
    FG_OP_ENTRY(conv2d_backward); /* op 6 */
    /* [required: maxpool2d, avgpool2d] mode: fg_pool_mode; argmax: (n,c,out_h,out_w)
     * scratch for max pooling, NULL for avg */
    FG_OP_ENTRY(pool2d_forward); /* op 7 */
    /* [required: maxpool2d, avgpool2d] dx overwritten */
    FG_OP_ENTRY(pool2d_backward); /* op 8 */
    /* [required: batchnorm] Batch norm over (n, c, spatial). training != 0: batch
     * statistics, saved_mean and saved_invstd written, running stats updated with momentum
     * (PyTorch's unbiased var). gamma and beta may be NULL (1 and 0). */
    FG_OP_ENTRY(batchnorm_forward); /* op 9 */
    /* [required: batchnorm] dx, dgamma, dbeta may be NULL; dgamma and dbeta accumulated
     * into when accumulate != 0 */
    FG_OP_ENTRY(batchnorm_backward); /* op 10 */
    /* [required: dropout] mask(n) bytes; keep with probability 1-p, scale 1/(1-p);
     * reproducible from (seed, offset): element i's draw depends only on seed, offset + i. */
    FG_OP_ENTRY(dropout_forward); /* op 11 */
    /* [required: dropout] */
    FG_OP_ENTRY(dropout_backward); /* op 12 */
    /* [required: the loss] Mean softmax cross-entropy over rows with int32 labels, the
     * softmax in f32. loss_sum and correct (f32 device scalars, may be NULL) are
     * accumulated into: += sum of row losses, += argmax hits. probs(rows, classes) keeps
     * the softmax for backward. Since ABI 1.1 a label of FG_IGNORED_LABEL (-1) marks an
     * ignored row: it adds no loss and no hit, and backward writes zeros in its gradient
     * row; any other label outside [0, classes) is an error. */
    FG_OP_ENTRY(softmax_xent_forward); /* op 13 */
    /* [required: the loss] dlogits = (probs - onehot(labels)) * scale; 0 in an ignored
     * row (ABI 1.1) */
    FG_OP_ENTRY(softmax_xent_backward); /* op 14 */
    /* [required: replicas, optimizers, metrics] x(n) = value (rounded into dtype) */
    FG_OP_ENTRY(fill); /* op 15 */
    /* [required: loss scaling, gradient clipping, strategies] x(n) *= alpha */
    FG_OP_ENTRY(scale); /* op 16 */
    /* [required: strategies that sum gradients across devices] y(n) += alpha * x */
    FG_OP_ENTRY(axpy); /* op 17 */
    /* [required: gradient_clip_algorithm = value] x(n) = min(max(x, lo), hi), as
     * torch.clamp: NaN stays NaN; lo > hi gives hi */
    FG_OP_ENTRY(clamp); /* op 18 */
    /* [required: gradient norms (clipping, loss scaling, nan_guard)] *out = sum of x^2, an
     * f32 device scalar, accumulated in f32 or wider; n == 0 gives 0 */
    FG_OP_ENTRY(sum_squares); /* op 19 */
    /* [required: half precisions] dst(n) = src(n) converted (NaN stays NaN, overflow gives
     * inf; the same dtype copies) */
    FG_OP_ENTRY(cast); /* op 20 */
    /* [required: optimizer sgd] Fused update over a flat range; the momentum buffer is f32
     * (NULL without momentum). Each element's update is computed in f32 from the widened
     * parameter and rounded to nearest even back into param. */
    FG_OP_ENTRY(sgd_update); /* op 21 */
    /* [required: optimizer adamw] As sgd_update; m and v are f32. */
    FG_OP_ENTRY(adamw_update); /* op 22 */

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
    FG_OP_ENTRY(pointwise_loss); /* op 23 */

    /* ---- transformer ops ([queue] unless said otherwise) ------------------------------ */
    /* [required: layernorm, rmsnorm] Over the last dimension of x (rows, cols). rms == 0:
     * PyTorch's LayerNorm (biased variance, eps inside the square root); gamma and beta may
     * be NULL (1 and 0). rms != 0: y = x / sqrt(mean(x^2) + eps) * gamma, beta and mean
     * unused (may be NULL). mean and rstd (rows, f32) are saved for backward. */
    FG_OP_ENTRY(layernorm_forward); /* op 24 */
    /* [required: layernorm, rmsnorm] dx overwritten (may be NULL); dgamma, dbeta (may be
     * NULL) overwritten or, when accumulate != 0, added to. */
    FG_OP_ENTRY(layernorm_backward); /* op 25 */
    /* [required: embedding] out(n, dim) = table(rows, dim)[ids] (accumulate != 0: +=).
     * An id outside [0, rows) fails with FG_INVALID_ARGUMENT naming it and its position. */
    FG_OP_ENTRY(embedding_forward); /* op 26 */
    /* [required: embedding] dtable(rows, dim) (+)= the rows of dout(n, dim) added at ids;
     * repeated ids sum. */
    FG_OP_ENTRY(embedding_backward); /* op 27 */
    /* [required with attention_forward; any thread] Bytes of device scratch
     * attention_forward and attention_backward need, for every dtype; 0 for a bad desc. */
    size_t (*attention_workspace)(void *state, const fg_attention_desc *d);
    /* [required: attention] y(B, T, C) from qkv(B, T, 3C) (with kv_heads, ABI 1.6:
     * (B, T, (heads + 2 kv_heads) head_dim)); lse (B, heads, T, f32): each row's
     * log-sum-exp of the scaled scores, saved for backward. */
    FG_OP_ENTRY(attention_forward); /* op 28 */
    /* [required: attention] dqkv overwritten. y and lse are the forward's. */
    FG_OP_ENTRY(attention_backward); /* op 29 */

    /* ---- ABI 1.1 ------------------------------------------------------------------------ */
    /* [optional: fulgur generate's KV cache] The attention of one new position against the
     * cached ones: qkv (B, seq, 3C) in attention_forward's layout holds rows [0, pos] of
     * each sample (row pos the new position's q | k | v, rows before it the K and V of the
     * earlier positions; seq is the rows the cache holds, > pos); y (B, C) = the causal
     * attention_forward's row pos: softmax(q K^T / sqrt(D)) V over keys 0..pos. d->causal
     * and d->dropout are not read (decoding never drops). workspace: attention_workspace(d)
     * bytes. NULL: the caller runs attention_forward over rows [0, pos] (every query of
     * them, not only the last). */
    FG_OP_ENTRY(attention_decode); /* op 30 */

    /* ---- ABI 1.2 ------------------------------------------------------------------------ */
    /* [optional: linear's forward] C(m,n) = op(A) op(B) + bias(n) broadcast over the rows,
     * row-major as gemm (C is not read). The product is accumulated in f32, the bias added
     * to it in f32, and the sum rounded once into C's dtype (PyTorch autocast's addmm);
     * bias has b's dtype (a layer's weight and bias are both parameters) and may be NULL
     * (no bias). NULL: the caller runs gemm (beta 0), then bias_add on C, which rounds C
     * before adding the bias when C is a half type. */
    FG_OP_ENTRY(gemm_bias); /* op 31 */

    /* ---- ABI 1.3 ------------------------------------------------------------------------ */
    /* [optional; any thread] Nonzero when `device` computes on host memory synchronously:
     * any host pointer may stand where an op or a copy on its queues takes device memory,
     * and an op or a copy has completed when it returns (fulgur's CPU backend). The trainer
     * then hands the model a batch where the data loader staged it instead of copying it
     * into a device buffer first. NULL or 0: batches are copied. */
    int (*host_synchronous)(void *state, int device);

    /* ---- ABI 1.4 ------------------------------------------------------------------------ */
    /* [optional: the loss] Softmax cross-entropy, its argmax hits and its logit gradients in
     * one pass over the logits, in their own dtype, with no probability buffer. logits
     * (rows, ld): the first `classes` columns of a row are its classes, columns [classes,
     * ld) padding (a vocabulary padded for aligned gemms) that no softmax sees. Labels,
     * FG_IGNORED_LABEL, the loss and hits (loss_sum and correct may be NULL) as
     * softmax_xent_forward, with the same sums. dlogits (rows, ld; may alias logits; NULL:
     * no gradient, as in evaluation) = (softmax - onehot(label)) * grad_scale in the class
     * columns, 0 in the padding and in an ignored row: bitwise what softmax_xent_forward
     * then softmax_xent_backward give when ld == classes. NULL: the model runs those two
     * and keeps (rows, classes) f32 probabilities between them. */
    FG_OP_ENTRY(classifier); /* op 32 */

    /* ---- ABI 1.5 ------------------------------------------------------------------------ */
    /* [optional; queue] The platform's own handle of a queue, for a library that enqueues
     * work on it itself (CUDA: the queue's cudaStream_t, which comm.nccl takes as its
     * `queue`). NULL, or a NULL result: the queue has none (the CPU backend). */
    void *(*queue_native)(void *state, void *queue);
    /* [optional, with the five event entries; as event_sync's rule] 1 when the event's
     * recorded point has completed (or it was never recorded), 0 while it is pending, and
     * never waits; a failure of the work before it is left to event_sync. NULL: callers
     * wait with event_sync. The data loader asks it first, so a batch copy that finished
     * long ago costs no host synchronisation. */
    int (*event_query)(void *state, void *event);
    /* [optional: linear layers, the transformer block's MLP] A gemm with a fused tail
     * (epilogue: fg_gemm_epilogue). P(m,n) = op(A) op(B) as gemm (row-major, product in
     * f32); a and b have ab_dtype, c and aux c_dtype, bias bias_dtype. accumulate must be 0
     * for the forward epilogues.
     *   FG_EPI_BIAS: C = P + bias(n), rounded once (gemm_bias). aux unused.
     *   FG_EPI_GELU_AUX_BIAS: aux(m,n; ldaux) = P + bias(n), rounded once; C = gelu(aux)
     *     (tanh, FG_ACT_GELU). In a half c_dtype the gelu reads the f32 sum before aux's
     *     rounding (cuBLASLt) or aux as stored (activation_forward over aux: the CPU
     *     backend); in f32 the two are the same.
     *   FG_EPI_DGELU_BGRAD: C = P * gelu'(aux(m,n; ldaux)), the GELU's input gradient for
     *     the forward's aux; bias(n) = (accumulate: +=) the sums of C's columns over its m
     *     rows: the bias gradient of the linear whose output C is the gradient of. In a
     *     half c_dtype, P may be rounded before the product (gemm then
     *     activation_backward: the CPU backend) and the sums may read C unrounded.
     *   FG_EPI_BGRADB: C = P (accumulate: C += P, as gemm with beta 1) and bias(m) =
     *     (accumulate: +=) the sums of op(A)'s rows over k: with trans_a, A (k, m) is a
     *     linear's output gradient dy, C = dy^T x its weight gradient and bias its bias
     *     gradient (cuBLASLt's BGRADB: its B is fulgur's a, see cuda_gemm.c).
     * aux and ldaux (>= n) are read only by the two GELU epilogues; bias is never NULL. A
     * call with m or n zero does nothing. Sums run in f32 or wider. NULL: the caller runs
     * gemm (or gemm_bias), activation_forward/activation_backward and bias_grad. */
    FG_OP_ENTRY(gemm_epilogue); /* op 33 */
    /* ABI 1.5, the optimizer step without a host round trip: */
    /* [optional: gradient clipping by norm on the device] *sq = sum of x(n)^2 (an f32 device
     * scalar, as sum_squares writes it), then *coef (an f32 device scalar) = the factor
     * torch.nn.utils.clip_grad_norm_ multiplies the gradients by, computed in double as the
     * host would: c = max_norm / (sqrt((double)*sq) + 1e-6), *coef = (float)c when c < 1,
     * else 1 (also when c is NaN). The host reads neither. NULL: the trainer reads the norm
     * to the host (sum_squares) and scales the gradients (scale). */
    FG_OP_ENTRY(grad_clip_coef); /* op 34 */
    /* [optional: the optimizer step in one pass] sgd_update (adamw_fused: adamw_update) of
     * param from grad * *grad_scale, and the working copy written in the same pass: bitwise
     * the sequence scale(grad_dtype, grad, *grad_scale) when grad_scale is not NULL (the
     * product rounded into grad_dtype), the update, then cast(work_dtype, param_dtype,
     * work, param) when work is not NULL; but grad is not modified. grad_scale: an f32
     * device scalar (NULL: 1), read by the device; work: n values of work_dtype (NULL:
     * none; work_dtype is then not read). NULL: the trainer runs that sequence. */
    FG_OP_ENTRY(sgd_fused);   /* op 35 */
    FG_OP_ENTRY(adamw_fused); /* op 36 */
    /* [optional: transformer_block] The residual add fused into the layer norm that follows
     * it (a pre-norm block's x2 = x + attn, then ln_2(x2)): r(rows, cols) = b + a, rounded
     * into x_dtype as axpy(1, a, b) rounds it (r may alias a or b), and y = the norm of r
     * with mean and rstd saved, exactly as layernorm_forward of r (same arguments, same
     * rules). NULL: the caller runs axpy, then layernorm_forward. */
    FG_OP_ENTRY(layernorm_residual_forward); /* op 37 */
    /* [optional: transformer_block] layernorm_backward that adds the residual stream's
     * gradient: dx = dres + the norm's dx, that dx rounded into x_dtype first (exactly
     * layernorm_backward into dx, then axpy(1, dres, dx)); dx may be NULL (then dres is not
     * read: only dgamma, dbeta), otherwise dres must be given and be another buffer than dx.
     * dgamma, dbeta as layernorm_backward (accumulate). NULL: the caller runs
     * layernorm_backward, then axpy. */
    FG_OP_ENTRY(layernorm_residual_backward); /* op 38 */

    /* ---- ABI 1.6: Llama-family transformer blocks ---------------------------------------- */
    /* [required: transformer_block position = rope] Rotary position embedding in place, as
     * Hugging Face Llama's (rotate_half: the first and second halves of each head pair up):
     * x (rows, ld) holds in each row `heads` heads of head_dim (even) values side by side
     * from column 0; row r is at position p = pos0 + r % seq, and for i < head_dim/2 with
     * a = p * theta^(-2i/head_dim): (x_i, x_{i+D/2}) <- (x_i cos a - x_{i+D/2} sin a,
     * x_{i+D/2} cos a + x_i sin a). Columns past heads*head_dim are not touched (a fused qkv:
     * q's and k's heads are rotated, v's are not). */
    FG_OP_ENTRY(rope_forward); /* op 39 */
    /* [required: rope while training] The transpose of rope_forward (the rotation by -a), in
     * place: a gradient with respect to rotated values becomes one with respect to the
     * values before rotation. */
    FG_OP_ENTRY(rope_backward); /* op 40 */
    /* [required: transformer_block mlp = swiglu] y(n) = silu(gate) * up, silu(g) = g /
     * (1 + exp(-g)); y may alias neither input. */
    FG_OP_ENTRY(swiglu_forward); /* op 41 */
    /* [required: swiglu while training] dgate = dy * up * silu'(gate), dup = dy * silu(gate);
     * dgate may alias dy (each element is read before it is written). */
    FG_OP_ENTRY(swiglu_backward); /* op 42 */

    /* ---- ABI 1.7: CUDA graphs ------------------------------------------------------------ */
    /* [optional, all four or none; queue] Capture of a queue's work into a graph that is
     * replayed later (`[backend] cuda_graphs`): between graph_begin and graph_end, the ops,
     * copies and fills enqueued on `queue` by this thread are recorded, not run; nothing
     * may allocate device memory, wait for the device or read an event recorded inside.
     * graph_end gives *graph (the capture's work, ready to launch; NULL on failure, and a
     * failure of anything inside the capture is reported here if not before). graph_launch
     * enqueues the whole graph on queue: its work runs in capture order, reading what the
     * device buffers hold then (per-step values live in device memory: lr_dev, step_dev).
     * graph_destroy frees it (NULL: nothing). NULL entries: the backend cannot capture. */
    fg_status (*graph_begin)(void *state, void *queue, fg_error *err);
    fg_status (*graph_end)(void *state, void *queue, void **graph, fg_error *err);
    fg_status (*graph_launch)(void *state, void *queue, void *graph, fg_error *err);
    void (*graph_destroy)(void *state, void *graph);
    /* ---- ABI 1.8: batch norm with statistics reduced across replicas ------------------------
     * batchnorm_forward / _backward split where [model] sync_batchnorm sums a few doubles per
     * layer over the replicas in between (fg_train_services.set_replica_allreduce). Each
     * vector below is (2c + 1) f64 in device memory: two per-channel sums, then a count. */
    /* [required: batchnorm under sync_batchnorm] This replica's statistics of x (n, c,
     * spatial): stats[ch] = sum of x, stats[c + ch] = sum of x^2 over the channel's n *
     * spatial values, stats[2c] = n * spatial; in double, in a fixed order. */
    FG_OP_ENTRY(batchnorm_stats); /* op 43 */
    /* [required: batchnorm under sync_batchnorm] Training batch norm from statistics summed
     * over the replicas (batchnorm_stats' layout): mean = sum / count, biased var =
     * sumsq / count - mean^2 (0 when negative), both in double; saved_mean and saved_invstd
     * written, running stats (may be NULL, both or neither) updated with momentum and the
     * unbiased var (count / (count - 1)), y = (x - mean) * invstd * gamma + beta as
     * batchnorm_forward computes it. gamma and beta may be NULL (1 and 0). */
    FG_OP_ENTRY(batchnorm_apply); /* op 44 */
    /* [required: batchnorm under sync_batchnorm, training] This replica's sums for
     * backward: sums[ch] = sum of dy, sums[c + ch] = sum of dy * xhat (xhat = (x - mean) *
     * invstd from saved_mean and saved_invstd), sums[2c] = n * spatial; and from them this
     * replica's dbeta and dgamma (each may be NULL; accumulated into when accumulate != 0),
     * as batchnorm_backward writes them. */
    FG_OP_ENTRY(batchnorm_backward_reduce); /* op 45 */
    /* [required: batchnorm under sync_batchnorm, training] dx = gamma * invstd * (dy -
     * sum_dy / count - xhat * sum_dy_xhat / count) from sums summed over the replicas
     * (batchnorm_backward_reduce's layout). gamma may be NULL (1). */
    FG_OP_ENTRY(batchnorm_backward_apply); /* op 46 */

    /* ---- ABI 1.9 ------------------------------------------------------------------------ */
    /* [required: linear layers under an fp8 precision] C(m,n) = beta C + op(A) op(B) as gemm,
     * with A and B (stored in ab_dtype) first quantized to fp8: for each operand X (a with
     * f8->a_*, b with f8->b_*), when its update flag is set, amax_h = the max (or newest,
     * amax_algo) of its history; if amax_h is finite and > 0, scale = fp8_max(format) /
     * amax_h / 2^margin (f32), else the scale it holds is kept; {scale, 1/scale} written;
     * then Xq = fp8(X * scale), rounded to nearest even and saturated to +-fp8_max (NaN stays
     * NaN); the history shifted by one ([i] = [i-1]) and [0] = max |X| (f32). Without the
     * flag X is quantized with the scale it holds and nothing is written. The product
     * accumulates the fp8 values exactly in f32, is multiplied by 1/scale_a and 1/scale_b and
     * rounded once into c_dtype. Shapes the backend's fp8 gemm cannot take (cuBLASLt: m, n,
     * k multiples of 16; the CUDA backend transposes operands as the TN layout needs) are
     * refused with FG_UNAVAILABLE naming the dimension. NULL: no fp8 (the precision is
     * refused at setup). */
    FG_OP_ENTRY(gemm_fp8); /* op 47 */
    /* ABI 1.9: rope scaling */
    /* [required: position = rope with rope_scaling] rope_forward with the angle of pair i at
     * position p given as p * inv_freq[i] instead of p * theta^(-2i/head_dim): inv_freq
     * holds head_dim/2 finite positive values in host memory, read before the call returns
     * (Llama 3's or linear scaling computes them once, at setup). */
    FG_OP_ENTRY(rope_freq_forward); /* op 48 */
    /* [required: rope_scaling while training] rope_backward with such a table. */
    FG_OP_ENTRY(rope_freq_backward); /* op 49 */

    /* ---- ABI 1.10: channels-last activations ------------------------------------------- */
    /* [required: [model] memory_format = channels_last] y(batch, cols, rows) = x(batch, rows,
     * cols): each of batch matrices transposed, bits unchanged (NCHW -> NHWC is rows = c,
     * cols = h*w; NHWC -> NCHW the reverse). x and y do not overlap. A backend that runs no
     * NHWC op (the CPU backend) says no in supports(), so the key fails at setup. */
    FG_OP_ENTRY(transpose_batched); /* op 50 */

    /* ABI 1.10: dropout under CUDA graphs */
    /* [required: dropout with [backend] cuda_graphs] dropout_forward whose draws start at
     * *offset_dev + offset (offset_dev: one uint64_t in the queue's device memory, read when
     * the op runs on the queue, not when it is called), then *offset_dev += advance, ordered
     * after the draws. The same (seed, *offset_dev + offset) gives dropout_forward's mask
     * bit for bit; a captured step that advances its counter draws new masks each replay. */
    FG_OP_ENTRY(dropout_forward_dev); /* op 51 */

    /* ABI 1.10: the dynamic loss scaler without a host round trip */
    /* [optional; precision.fp16-mixed] torch.cuda.amp's unscale, inf check and
     * _amp_update_scale_ in one: x (n gradients, device) is multiplied by
     * 1.0f / (float)scaler->scale as the scale op would; *sq (device f32) = their sum of
     * squares as sum_squares computes it; scaler->found_inf = !isfinite(*sq); then the
     * scale moves as precision.fp16-mixed's host scaler moves it (rule, read at the call):
     * an overflow counts a skipped step, zeroes growth_tracker and spends one hysteresis
     * step or multiplies the scale by backoff_factor (never below min_scale); a clean step
     * grows the scale by growth_factor (never past FLT_MAX) after growth_interval in a row
     * and restores hysteresis_left. scaler lies in device memory; nothing is read back. */
    FG_OP_ENTRY(loss_scale_update); /* op 52 */
    /* [optional; precision.fp16-mixed with the scaler on the device] softmax_xent_backward
     * with the factor (scale * (float)scaler->scale) / divisor (0 when divisor is 0)
     * computed where the device reads the scale: the loss scale the last loss_scale_update
     * left, bitwise the host's (scale * loss scale) / rows in f32. */
    FG_OP_ENTRY(softmax_xent_backward_scaled); /* op 53 */

    /* ---- ABI 1.11 ----------------------------------------------------------------------- */
    /* [optional: [model] label_smoothing] Softmax cross-entropy with label smoothing eps =
     * smoothing (0 <= eps < 1), torch.nn.CrossEntropyLoss(label_smoothing=eps): a row's loss
     * is (1 - eps) * -log p[label] + (eps / classes) * sum_j -log p[j], p the row's softmax
     * over its `classes` columns (f32, no probability buffer). logits, ld, labels,
     * FG_IGNORED_LABEL (no loss, no hit, a zero gradient row), loss_sum and correct (may be
     * NULL; += the rows' losses and argmax hits, summed in f64) as classifier. dlogits
     * (rows, ld; may alias logits; NULL: no gradient) = (p - (1 - eps) * onehot(label) -
     * eps / classes) * factor in the class columns, 0 in the padding and in an ignored row,
     * where factor = grad_scale when scaler is NULL, else softmax_xent_backward_scaled's
     * (grad_scale * (float)scaler->scale) / divisor (0 when divisor is 0), read on the device
     * (the fp16 scaler). At eps = 0 with scaler NULL: classifier's bits. */
    FG_OP_ENTRY(classifier_smoothed); /* op 54 */
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

/* The count of an op's dtype arguments (1 to FG_OP_MAX_DTYPES). */
#define FG_OP_NARGS_(...) FG_OP_NARGS_I_(__VA_ARGS__, 3, 2, 1, 0)
#define FG_OP_NARGS_I_(a, b, c, n, ...) n
#define FG_OP_DESC_(ctx, id, entry, ...)                                                    \
    { #entry, offsetof(fg_backend_vtable, entry), FG_OP_NARGS_(__VA_ARGS__), { __VA_ARGS__ } },

static inline const fg_backend_op_desc *fg_backend_op_info(uint32_t op)
{
    static const fg_backend_op_desc ops[FG_OP_COUNT] = { FG_BACKEND_OPS(FG_OP_DESC_, ~) };
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
