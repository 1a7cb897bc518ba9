/* CUDA compute kernels of the CUDA backend, called from C. Every function enqueues its
 * work on `stream` and returns the launch's status (cudaGetLastError); errors inside a
 * kernel surface at the next synchronisation. Arguments are trusted: the plugin checks them
 * at its border.
 *
 * Element types are fg_dtype codes: 1 f32, 2 f16, 3 bf16 (anything else answers
 * cudaErrorInvalidValue). Arithmetic is f32 (reductions in f64), results are rounded to
 * nearest even into their storage, and each kernel follows the CPU backend's formula
 * (kernels/cpu) in the same order of operations; the kernels are built with --fmad=false so
 * a*b+c rounds twice there too. Reductions run in a fixed order that depends only on the
 * problem size: results do not change from run to run. */
#ifndef FG_CUDA_KERNELS_H
#define FG_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Doubles of reduction scratch a queue must own for sum_squares, softmax_xent_forward (rows
 * are processed in chunks of FG_CU_XENT_CHUNK) and the layernorm's parameter gradients. */
#define FG_CU_REDUCE_BLOCKS 1024
#define FG_CU_XENT_CHUNK 32768
/* (layernorm_backward's row chunks take 2 * cols doubles each, up to 256 of them: 4 MiB) */
#define FG_CU_SCRATCH_DOUBLES (1 << 19)

/* A bad index a kernel found, in the queue's mapped word: bit 63 set, bits 62..61 the op,
 * bits 60..32 the row or position, bits 31..0 the value (several bad ones: one is kept). */
#define FG_CU_BAD_XENT 0
#define FG_CU_BAD_EMBEDDING 1

/* ---- elementwise (elementwise.cu) ------------------------------------------------------ */
/* x(n) (type) = value */
cudaError_t fg_cu_fill(cudaStream_t s, int type, void *x, float value, size_t n);
/* x(n) (type) *= alpha */
cudaError_t fg_cu_scale(cudaStream_t s, int type, void *x, float alpha, size_t n);
/* y(n) (y_type) += alpha * x (x_type) */
cudaError_t fg_cu_axpy(cudaStream_t s, int x_type, int y_type, float alpha, const void *x,
                       void *y, size_t n);
/* As torch.clamp: max with lo, then min with hi; NaN stays NaN. */
cudaError_t fg_cu_clamp(cudaStream_t s, int type, void *x, float lo, float hi, size_t n);
/* dst(n) = src(n) converted (same type: a copy). */
cudaError_t fg_cu_convert(cudaStream_t s, void *dst, int dst_type, const void *src,
                          int src_type, size_t n);
/* dst(rows, cols; dst_ld) = src(rows, cols; src_ld) converted, in one launch. */
cudaError_t fg_cu_convert_rows(cudaStream_t s, void *dst, int dst_type, size_t dst_ld,
                               const void *src, int src_type, size_t src_ld, size_t rows,
                               size_t cols);
/* dst(n) = (accumulate ? dst : 0) + src, in f32, rounded into dst's type. */
cudaError_t fg_cu_accumulate(cudaStream_t s, void *dst, int dst_type, const void *src,
                             int src_type, size_t n, int accumulate);
/* c(rows, cols; ld) = beta * c, or 0 where beta == 0 (a gemm with k = 0). */
cudaError_t fg_cu_scale_matrix(cudaStream_t s, int type, void *c, int rows, int cols, int ld,
                               float beta);
/* act: 0 none, 1 relu, 2 gelu (tanh), 3 tanh, 4 sigmoid. */
cudaError_t fg_cu_act_forward(cudaStream_t s, int type, int act, const void *x, void *y,
                              size_t n);
cudaError_t fg_cu_act_backward(cudaStream_t s, int type, int act, const void *x,
                               const void *y, const void *dy, void *dx, size_t n);
/* y(rows, cols, spatial) (type) += bias(cols) (bias_type) */
cudaError_t fg_cu_bias_add(cudaStream_t s, int type, int bias_type, void *y, const void *bias,
                           int rows, int cols, int spatial);
/* Element i kept when the top 24 bits of mix64(key + (offset + i) * golden) >= threshold
 * (kernels/cpu/dropout.c); kept values are x * scale. */
cudaError_t fg_cu_dropout_forward(cudaStream_t s, int type, uint64_t key, uint64_t offset,
                                  uint32_t threshold, float scale, const void *x, void *y,
                                  uint8_t *mask, size_t n);
/* The same with offset + *offset_dev (read on the stream), then *offset_dev += advance. */
cudaError_t fg_cu_dropout_forward_dev(cudaStream_t s, int type, uint64_t key, uint64_t offset,
                                      uint64_t *offset_dev, uint64_t advance,
                                      uint32_t threshold, float scale, const void *x, void *y,
                                      uint8_t *mask, size_t n);
cudaError_t fg_cu_dropout_backward(cudaStream_t s, int type, float scale, const uint8_t *mask,
                                   const void *dy, void *dx, size_t n);

typedef struct fg_cu_sgd {
    float lr, momentum, dampening, weight_decay;
    int nesterov, first_step;
    const float *lr_dev; /* fused only: non-NULL, the device scalar read instead of lr */
    const int64_t *skip_dev; /* fused only: non-NULL and nonzero, nothing is written */
} fg_cu_sgd;

typedef struct fg_cu_adamw {
    float lr, beta1, beta2, eps, weight_decay;
    float bc1, bc2_sqrt; /* 1 - beta1^step, sqrt(1 - beta2^step), computed as the CPU does */
    const float *step_dev; /* fused only: non-NULL, lr, bc1, bc2_sqrt read from the device */
    const int64_t *skip_dev; /* fused only: non-NULL and nonzero, nothing is written */
} fg_cu_adamw;

/* The fused updates: param (param_type) and grad (grad_type), the state (buf; m, v) f32;
 * each element's update in f32 from the widened parameter, rounded back into param. */
cudaError_t fg_cu_sgd_update(cudaStream_t s, const fg_cu_sgd *a, void *param, int param_type,
                             const void *grad, int grad_type, float *buf, size_t n);
cudaError_t fg_cu_adamw_update(cudaStream_t s, const fg_cu_adamw *a, void *param,
                               int param_type, const void *grad, int grad_type, float *m,
                               float *v, size_t n);

/* ---- the optimizer step without a host round trip (optimizer.cu) ---------------------- */
/* *sq = sum of x^2 (fg_cu_sum_squares, scratch its), then *coef = clip_grad_norm_'s factor
 * max_norm / (sqrt(*sq) + 1e-6) in double, 1 when that is not below 1: all on the device. */
cudaError_t fg_cu_grad_clip_coef(cudaStream_t s, int type, const void *x, size_t n,
                                 double max_norm, float *sq, float *coef, double *scratch);
/* fg_cu_sgd_update / fg_cu_adamw_update from grad * *grad_scale (rounded into grad_type;
 * grad_scale NULL: 1; grad not written), and work (work_type; NULL: none) = the stored
 * parameter cast, in the same pass. */
cudaError_t fg_cu_sgd_fused(cudaStream_t s, const fg_cu_sgd *a, void *param, int param_type,
                            const void *grad, int grad_type, float *buf,
                            const float *grad_scale, void *work, int work_type, size_t n);
cudaError_t fg_cu_adamw_fused(cudaStream_t s, const fg_cu_adamw *a, void *param,
                              int param_type, const void *grad, int grad_type, float *m,
                              float *v, const float *grad_scale, void *work, int work_type,
                              size_t n);

/* ---- the dynamic loss scaler's step (loss_scale.cu, ABI 1.10) ---------------------------- */
/* fg_loss_scale_dev and fg_loss_scale_rule's values, laid out as the SDK's (the plugin
 * checks the sizes). */
typedef struct fg_cu_loss_scale {
    double scale;
    int64_t growth_tracker, hysteresis_left, skipped_steps, found_inf;
} fg_cu_loss_scale;
typedef struct fg_cu_loss_scale_rule {
    double growth_factor, backoff_factor, min_scale;
    int64_t growth_interval, hysteresis;
} fg_cu_loss_scale_rule;
/* x (type, device) *= 1.0f / (float)scaler->scale (untouched at factor 1), *sq = their sum
 * of squares (fg_cu_sum_squares, scratch its), then scaler's found_inf, tracker, hysteresis
 * and scale from *sq as the host scaler: all on the device. */
cudaError_t fg_cu_loss_scale_update(cudaStream_t s, int type, void *x, size_t n,
                                    const fg_cu_loss_scale_rule *rule, float *sq,
                                    fg_cu_loss_scale *scaler, double *scratch);

/* ---- reductions (reduce.cu) ------------------------------------------------------------- */
/* *out = (float) sum of x^2 (type) in f64; scratch: FG_CU_REDUCE_BLOCKS doubles. */
cudaError_t fg_cu_sum_squares(cudaStream_t s, int type, const void *x, size_t n, float *out,
                              double *scratch);
/* dbias(cols) (dbias_type) (+)= sum over rows and spatial of dy (type), in f64. */
cudaError_t fg_cu_bias_grad(cudaStream_t s, int type, int dbias_type, void *dbias,
                            const void *dy, int rows, int cols, int spatial, int accumulate);
/* Softmax cross-entropy over rows of logits (type); probs f32; loss_sum and correct (f32
 * device scalars, may be NULL) += the rows' losses and argmax hits. A label outside
 * [0, classes) makes the row's loss NaN and is reported in *bad (row << 32 | label, plus
 * 1 in bit 63), a word the host reads after synchronising. scratch: FG_CU_SCRATCH_DOUBLES. */
cudaError_t fg_cu_xent_forward(cudaStream_t s, int type, const void *logits,
                               const int32_t *labels, int rows, int classes, float *probs,
                               float *loss_sum, float *correct, double *scratch,
                               unsigned long long *bad);
/* dlogits (type) = (probs - onehot(label)) * scale */
/* The fused classifier (softmax cross-entropy, hits and dlogits in one pass over rows of
 * stride ld_row, dlogits NULL or of the logits' type, may alias them); loss_sum and correct
 * as fg_cu_xent_forward; a bad label reported as there. scratch: FG_CU_SCRATCH_DOUBLES. */
cudaError_t fg_cu_classifier(cudaStream_t s, int type, const void *logits, int ld_row,
                             const int32_t *labels, int rows, int classes, float *loss_sum,
                             float *correct, float scale, void *dlogits, double *scratch,
                             unsigned long long *bad);
cudaError_t fg_cu_xent_backward(cudaStream_t s, int type, const float *probs,
                                const int32_t *labels, int rows, int classes, float scale,
                                void *dlogits, unsigned long long *bad);
/* fg_cu_xent_backward with scale replaced, on the device, by (scale * (float)ls->scale) /
 * divisor (0 when divisor is 0): the loss scale the device scaler left (loss_scale.cu). */
cudaError_t fg_cu_xent_backward_scaled(cudaStream_t s, int type, const float *probs,
                                       const int32_t *labels, int rows, int classes,
                                       float scale, float divisor,
                                       const fg_cu_loss_scale *ls, void *dlogits,
                                       unsigned long long *bad);

/* ---- channels-last (channels_last.cu) ---------------------------------------------------- */
/* dst = src permuted from (outer, c, inner) to (outer, inner, c) when to_last, else back;
 * converted into dst's type, added to dst when accumulate (f32, one rounding). */
cudaError_t fg_cu_channels_permute(cudaStream_t s, void *dst, int dst_type, const void *src,
                                   int src_type, size_t outer, size_t c, size_t inner,
                                   int to_last, int accumulate);

/* ---- pooling (pool2d.cu) ------------------------------------------------------------------ */
typedef struct fg_cu_window {
    int n, c, h, w, r, s, pad_h, pad_w, stride_h, stride_w, out_h, out_w;
    int nhwc; /* activations channels-last: (n, h, w, c) */
} fg_cu_window;

/* As kernels/cpu/pool2d.c: max keeps argmax h*W+w in its plane (-1 and y = 0 when the
 * window lies in padding; the first maximum wins, NaN propagates); avg divides by r*s. */
cudaError_t fg_cu_pool_forward(cudaStream_t s, int type, int is_max, const fg_cu_window *d,
                               const void *x, void *y, int32_t *argmax);
/* dx overwritten; each input gathers its outputs in ascending order (no atomics). */
cudaError_t fg_cu_pool_backward(cudaStream_t s, int type, int is_max, const fg_cu_window *d,
                                const void *dy, const int32_t *argmax, void *dx);

/* ---- batch norm (batchnorm.cu) ------------------------------------------------------------ */
/* As kernels/cpu/batchnorm.c over x (n, c, spatial) in `type`; gamma/beta (param_type) may
 * be NULL (1 and 0); running stats and saved stats are f32. One block per channel. */
cudaError_t fg_cu_bn_forward(cudaStream_t s, int type, int param_type, int training, int n,
                             int c, int spatial, const void *x, const void *gamma,
                             const void *beta, float *running_mean, float *running_var,
                             float momentum, float eps, float *saved_mean,
                             float *saved_invstd, void *y);
/* dx (type, may be NULL) overwritten; dgamma, dbeta (grad_type, may be NULL) overwritten
 * or accumulated into. */
cudaError_t fg_cu_bn_backward(cudaStream_t s, int type, int param_type, int grad_type, int n,
                              int c, int spatial, const void *x, const void *gamma,
                              const float *saved_mean, const float *saved_invstd,
                              const void *dy, void *dx, void *dgamma, void *dbeta,
                              int accumulate);

/* ---- batch norm across replicas (batchnorm_sync.cu) ------------------------------------- */
/* As kernels/cpu/batchnorm_sync.c ([model] sync_batchnorm), one block per channel: stats and
 * sums are (2c + 1) f64 in device memory (per-channel sums, then the count n * spatial). */
cudaError_t fg_cu_bn_stats(cudaStream_t s, int type, int n, int c, int spatial, const void *x,
                           double *stats);
/* Normalises with summed stats; saved stats written, running stats (may be NULL) updated. */
cudaError_t fg_cu_bn_apply(cudaStream_t s, int type, int param_type, int n, int c, int spatial,
                           const void *x, const double *stats, const void *gamma,
                           const void *beta, float *running_mean, float *running_var,
                           float momentum, float eps, float *saved_mean, float *saved_invstd,
                           void *y);
/* This replica's sums of dy and dy * xhat; dgamma, dbeta (may be NULL) written or
 * accumulated into. */
cudaError_t fg_cu_bn_backward_reduce(cudaStream_t s, int type, int grad_type, int n, int c,
                                     int spatial, const void *x, const float *saved_mean,
                                     const float *saved_invstd, const void *dy, double *sums,
                                     void *dgamma, void *dbeta, int accumulate);
/* dx from sums summed over the replicas. */
cudaError_t fg_cu_bn_backward_apply(cudaStream_t s, int type, int param_type, int n, int c,
                                    int spatial, const void *x, const void *gamma,
                                    const float *saved_mean, const float *saved_invstd,
                                    const void *dy, const double *sums, void *dx);

/* ---- pointwise losses (reduce.cu) -------------------------------------------------- */
/* kind: 1 mse, 2 bce with logits (kernels/cpu/pointwise_loss.c's formulas). loss_sum and
 * metric_sum (may be NULL) += scale * the sums (f64); dx (type, may alias x, may be NULL) =
 * grad_scale * dl/dx. scratch: FG_CU_SCRATCH_DOUBLES. */
cudaError_t fg_cu_pointwise_loss(cudaStream_t s, int type, int kind, const void *x,
                                 const float *t, size_t n, float scale, float *loss_sum,
                                 float *metric_sum, float grad_scale, void *dx,
                                 double *scratch);

/* ---- layer and RMS norm (layernorm.cu) ------------------------------------------------------ */
/* As kernels/cpu/layernorm.c over x (rows, cols) in `type`, gamma and beta (param_type) may
 * be NULL; mean (NULL with rms) and rstd (rows) f32. One block per row. */
cudaError_t fg_cu_ln_forward(cudaStream_t s, int type, int param_type, int rms, int rows,
                             int cols, const void *x, const void *gamma, const void *beta,
                             float eps, float *mean, float *rstd, void *y);
/* dx (type, may be NULL) overwritten; dgamma and dbeta (grad_type, may be NULL) overwritten
 * or accumulated into: partial column sums over row chunks into scratch
 * (FG_CU_SCRATCH_DOUBLES), then the chunks in order. */
cudaError_t fg_cu_ln_backward(cudaStream_t s, int type, int param_type, int grad_type,
                              int rms, int rows, int cols, const void *x, const void *gamma,
                              const float *mean, const float *rstd, const void *dy, void *dx,
                              void *dgamma, void *dbeta, int accumulate, double *scratch);
/* The residual add fused into the forward: r = b + a rounded into `type` (as axpy(1, a, b);
 * r may alias a or b), then y = the norm of r as fg_cu_ln_forward. One kernel. */
cudaError_t fg_cu_ln_residual_forward(cudaStream_t s, int type, int param_type, int rms,
                                      int rows, int cols, const void *a, const void *b, void *r,
                                      const void *gamma, const void *beta, float eps,
                                      float *mean, float *rstd, void *y);
/* fg_cu_ln_backward with dx = dres + the norm's dx (rounded into `type` first, as axpy
 * after layernorm_backward; dres NULL: none). Rows up to 3072 columns: one kernel for dx
 * and the parameter gradients' chunk sums (then one small launch adding the chunks in
 * order when there are several). */
cudaError_t fg_cu_ln_residual_backward(cudaStream_t s, int type, int param_type, int grad_type,
                                       int rms, int rows, int cols, const void *x,
                                       const void *gamma, const float *mean, const float *rstd,
                                       const void *dy, const void *dres, void *dx,
                                       void *dgamma, void *dbeta, int accumulate,
                                       double *scratch);

/* ---- embedding (embedding.cu) --------------------------------------------------------------- */
/* out(n, dim) (out_type) (+)= table(rows, dim) (table_type) [ids]. An id outside [0, rows)
 * writes NaN into its row and is reported in *bad (fg_cu_bad_word(FG_CU_BAD_EMBEDDING, ...)). */
cudaError_t fg_cu_embedding_forward(cudaStream_t s, int table_type, int out_type,
                                    const int32_t *ids, int n, int dim, int rows,
                                    const void *table, void *out, int accumulate,
                                    unsigned long long *bad);
/* Bytes of device workspace embedding_backward needs for n ids into a table of rows. */
size_t fg_cu_embedding_workspace(int n, int rows);
/* dtable(rows, dim) (grad_type) (+)= dout rows (type) at ids. Deterministic: the positions
 * are grouped by id with a counting sort in the workspace, and one block per id adds that
 * id's positions in position order, in f32, as the CPU does. */
cudaError_t fg_cu_embedding_backward(cudaStream_t s, int type, int grad_type,
                                     const int32_t *ids, int n, int dim, int rows,
                                     const void *dout, void *dtable, int accumulate,
                                     void *workspace, unsigned long long *bad);

/* ---- attention (attention.cu) --------------------------------------------------------------- */
/* The largest head_dim the attention kernels take (their shared-memory tiles). */
#define FG_CU_ATTN_MAX_HEAD_DIM 128

typedef struct fg_cu_attn {
    int batch, seq, heads, head_dim, causal;
    int kv_heads;          /* divides heads: query head h reads key/value head h / (H / KV) */
    float scale;           /* 1 / sqrtf(head_dim) */
    int dropout;           /* nonzero: draws below threshold drop a probability */
    uint64_t key, offset;  /* the draws: dropout_keep(key, offset + ((b*H + h)*T + i)*T + j) */
    uint32_t threshold;
    float drop_scale;      /* 1 / (1 - p) */
} fg_cu_attn;

/* Bytes of workspace forward and backward need: B*H*T floats (backward's rowsum(dY*Y)). */
size_t fg_cu_attention_workspace(const fg_cu_attn *a);
/* qkv is (B, T, (H + 2 KV) D): q's H heads, then KV keys, then KV values (KV = H: 3C).
 * y (B, T, C) and lse (B, H, T) from qkv, flash-style: online softmax over tiles
 * of keys in shared memory, no (T, T) matrix anywhere. */
cudaError_t fg_cu_attention_forward(cudaStream_t s, int type, const fg_cu_attn *a,
                                    const void *qkv, void *y, float *lse);
/* dqkv overwritten: one pass over query rows (dQ and rowsum(dY*Y) into the workspace), one
 * over key rows (dK, dV, summed over the query heads that share the key/value head), each
 * recomputing the probabilities from lse: no atomics. */
cudaError_t fg_cu_attention_backward(cudaStream_t s, int type, const fg_cu_attn *a,
                                     const void *qkv, const void *y, const float *lse,
                                     const void *dy, void *dqkv, void *workspace);
/* y (B, C): query row pos of every (batch, head) against keys [0, pos], the scores in the
 * workspace (fg_cu_attention_workspace bytes); never drops. */
cudaError_t fg_cu_attention_decode(cudaStream_t s, int type, const fg_cu_attn *a, int pos,
                                   const void *qkv, void *y, void *workspace);

/* ---- f32 attention on gemms (attention_gemm.cu) ------------------------------------------ */
/* scores (rows, seq), a row per (head, query i = row % seq), scaled already: causal rows see
 * keys 0..i. softmax: probabilities in place, lse[row] saved; probs: exp(score - lse[row]);
 * dsoftmax: dprobs = probs (dprobs - rowsum(probs dprobs)) scale. Masked entries become 0. */
cudaError_t fg_cu_attn_softmax(cudaStream_t s, float *scores, float *lse, int rows, int seq,
                               int causal);
cudaError_t fg_cu_attn_probs(cudaStream_t s, float *scores, const float *lse, int rows, int seq,
                             int causal);
cudaError_t fg_cu_attn_dsoftmax(cudaStream_t s, const float *probs, float *dprobs, int rows,
                                int seq, int causal, float scale);

/* ---- rotary embedding (rope.cu) and SwiGLU (swiglu.cu) ---------------------------------- */
/* x (rows, ld) (type) rotated in place as kernels/cpu/rope.c: heads heads of head_dim (even)
 * values from column 0, row r at position pos0 + r % seq; backward turns the other way. */
cudaError_t fg_cu_rope(cudaStream_t s, int type, int backward, int rows, int seq, int pos0,
                       int heads, int head_dim, int ld, float theta, void *x);
/* The same with pair i turned by p * inv_freq[i] (host memory, head_dim/2 values, copied
 * into the launch's parameters): rope scaling. head_dim/2 > FG_CU_ROPE_MAX_PAIRS:
 * cudaErrorInvalidValue. */
#define FG_CU_ROPE_MAX_PAIRS 256
cudaError_t fg_cu_rope_freq(cudaStream_t s, int type, int backward, int rows, int seq,
                            int pos0, int heads, int head_dim, int ld, const double *inv_freq,
                            void *x);
/* y(n) = silu(gate) * up; y aliases neither input. */
cudaError_t fg_cu_swiglu_forward(cudaStream_t s, int type, const void *gate, const void *up,
                                 void *y, size_t n);
/* dgate = dy * up * silu'(gate), dup = dy * silu(gate); dgate may alias dy. */
cudaError_t fg_cu_swiglu_backward(cudaStream_t s, int type, const void *gate, const void *up,
                                  const void *dy, void *dgate, void *dup, size_t n);

/* ---- fp8 quantization (fp8_quantize.cu) -------------------------------------------------- */
/* format: FG_CU_F8E4M3 or FG_CU_F8E5M2 (fulgur's FG_F8E4M3 / FG_F8E5M2 codes); algo:
 * FG_CU_AMAX_MAX or FG_CU_AMAX_MOST_RECENT. */
enum { FG_CU_F8E4M3 = 8, FG_CU_F8E5M2 = 9, FG_CU_AMAX_MAX = 0, FG_CU_AMAX_MOST_RECENT = 1 };
/* scale[0..1] = {s, 1/s}, s = fp8_max / amax / 2^margin from history[len] (max or [0]; the
 * old s when amax is 0 or not finite); then the history shifted by one and [0] = 0. */
cudaError_t fg_cu_fp8_scale_update(cudaStream_t s, float *scale, float *history, int len,
                                   int algo, float margin, int format);
/* dst = fp8(src * scale[0]) (rows, cols) packed, or transposed to (cols, rows); amax (NULL:
 * none) = max(amax, max |src|), atomically. */
cudaError_t fg_cu_fp8_quantize(cudaStream_t s, int type, const void *src, int rows, int cols,
                               int ld, int transpose, const float *scale, int format, void *dst,
                               float *amax);

#ifdef __cplusplus
}
#endif
#endif
