/* The transformer ops (layer and RMS norm, embedding, attention), each once for every dtype,
 * behind the checked trampolines (fulgur/backend_checks.h), then kernels/cuda; what is left
 * here are the kernels' own limits. Token ids live on the device, so a kernel flags a bad
 * one and the next queue_sync reports it with its position (the CPU backend refuses the
 * call). */
#include <math.h>
#include <stdint.h>

#include "cuda_backend.h"
#include "fulgur/backend_checks.h"
#include "cuda_checks.h"
#include "cuda_ops.h"
#include "cuda_attention_gemm.h"
#include "cuda_sdpa.h"

/* ---- layer and RMS norm --------------------------------------------------------------- */

fg_status fg_cuda_op_layernorm_forward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, int rms, int rows, int cols,
                                       const void *x, const void *gamma, const void *beta,
                                       float eps, float *mean, float *rstd, void *y,
                                       fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("layernorm_forward", x_dtype, param_dtype);
    return fg_cuda_launched(fg_cu_ln_forward(STREAM(queue), (int)x_dtype, (int)param_dtype, rms,
                                             rows, cols, x, gamma, beta, eps, mean, rstd, y),
                            "layernorm_forward", err);
}

fg_status fg_cuda_op_layernorm_backward(void *state, void *queue, uint32_t x_dtype,
                                        uint32_t param_dtype, uint32_t grad_dtype, int rms,
                                        int rows, int cols, const void *x, const void *gamma,
                                        const float *mean, const float *rstd, const void *dy,
                                        void *dx, void *dgamma, void *dbeta, int accumulate,
                                        fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("layernorm_backward", x_dtype, param_dtype, grad_dtype);
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_ln_backward(q->stream, (int)x_dtype, (int)param_dtype,
                                              (int)grad_dtype, rms, rows, cols, x, gamma,
                                              mean, rstd, dy, dx, dgamma, dbeta, accumulate,
                                              q->scratch),
                            "layernorm_backward", err);
}

/* The fused residual forms (ABI 1.5): one kernel each (fg_cu_ln_residual_*). */
fg_status fg_cuda_op_layernorm_residual_forward(void *state, void *queue, uint32_t x_dtype,
                                                uint32_t param_dtype, int rms, int rows,
                                                int cols, const void *a, const void *b,
                                                void *r, const void *gamma, const void *beta,
                                                float eps, float *mean, float *rstd, void *y,
                                                fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("layernorm_residual_forward", x_dtype, param_dtype);
    return fg_cuda_launched(fg_cu_ln_residual_forward(STREAM(queue), (int)x_dtype,
                                                      (int)param_dtype, rms, rows, cols, a, b, r,
                                                      gamma, beta, eps, mean, rstd, y),
                            "layernorm_residual_forward", err);
}

fg_status fg_cuda_op_layernorm_residual_backward(void *state, void *queue, uint32_t x_dtype,
                                                 uint32_t param_dtype, uint32_t grad_dtype,
                                                 int rms, int rows, int cols, const void *x,
                                                 const void *gamma, const float *mean,
                                                 const float *rstd, const void *dy,
                                                 const void *dres, void *dx, void *dgamma,
                                                 void *dbeta, int accumulate, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("layernorm_residual_backward", x_dtype, param_dtype, grad_dtype);
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_ln_residual_backward(q->stream, (int)x_dtype,
                                                       (int)param_dtype, (int)grad_dtype, rms,
                                                       rows, cols, x, gamma, mean, rstd, dy,
                                                       dres, dx, dgamma, dbeta, accumulate,
                                                       q->scratch),
                            "layernorm_residual_backward", err);
}

/* ---- embedding ------------------------------------------------------------------------ */

/* The kernels index positions in 32 bits, with room for their sort. */
static fg_status check_positions(const char *op, int n, fg_error *err)
{
    FG_CUDA_REQUIRE(n <= (1 << 29), "%s: n = %d: at most 2^29 positions a call", op, n);
    return FG_OK;
}

fg_status fg_cuda_op_embedding_forward(void *state, void *queue, uint32_t table_dtype,
                                       uint32_t out_dtype, const int32_t *ids, int n, int dim,
                                       int rows, const void *table, void *out, int accumulate,
                                       fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("embedding_forward", table_dtype, out_dtype);
    fg_status st = check_positions("embedding_forward", n, err);
    if (st != FG_OK)
        return st;
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_embedding_forward(q->stream, (int)table_dtype, (int)out_dtype,
                                                    ids, n, dim, rows, table, out, accumulate,
                                                    q->bad_dev),
                            "embedding_forward", err);
}

fg_status fg_cuda_op_embedding_backward(void *state, void *queue, uint32_t dout_dtype,
                                        uint32_t grad_dtype, const int32_t *ids, int n,
                                        int dim, int rows, const void *dout, void *dtable,
                                        int accumulate, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("embedding_backward", dout_dtype, grad_dtype);
    fg_status st = check_positions("embedding_backward", n, err);
    if (st != FG_OK)
        return st;
    fg_cuda_queue *q = queue;
    st = fg_cuda_stage(q, fg_cu_embedding_workspace(n, rows), "embedding_backward", err);
    if (st != FG_OK)
        return st;
    return fg_cuda_launched(fg_cu_embedding_backward(q->stream, (int)dout_dtype,
                                                     (int)grad_dtype, ids, n, dim, rows, dout,
                                                     dtable, accumulate, q->stage, q->bad_dev),
                            "embedding_backward", err);
}

/* ---- attention ------------------------------------------------------------------------ */

/* The kernels' view of a descriptor; 0 for one they cannot run: one every backend refuses
 * (fg_attention_desc_valid), a head_dim above theirs, a grid too large. Grouped-query
 * attention (kv_heads < heads) is the kernels' own: they index the shared head in place. */
static int attention_shape(const fg_attention_desc *d, fg_cu_attn *a)
{
    if (!fg_attention_desc_valid(d) || d->head_dim > FG_CU_ATTN_MAX_HEAD_DIM ||
        (double)d->batch * d->heads * ((d->seq + 3) / 4) > (double)INT32_MAX)
        return 0;
    *a = (fg_cu_attn){.batch = d->batch, .seq = d->seq, .heads = d->heads,
                      .head_dim = d->head_dim, .causal = d->causal != 0,
                      .kv_heads = fg_attention_kv_heads(d),
                      .scale = 1.0f / sqrtf((float)d->head_dim), .dropout = d->dropout > 0.0f,
                      .key = fg_cuda_dropout_key(d->seed), .offset = d->offset,
                      .threshold = fg_cuda_dropout_threshold(d->dropout),
                      .drop_scale = 1.0f / (1.0f - d->dropout)};
    return 1;
}

size_t fg_cuda_op_attention_workspace(void *state, const fg_attention_desc *d)
{
    (void)state;
    fg_cu_attn a;
    return attention_shape(d, &a) ? fg_cu_attention_workspace(&a) : 0;
}

static fg_status check_attention(const char *op, const fg_attention_desc *d, fg_cu_attn *a,
                                 fg_error *err)
{
    FG_CUDA_REQUIRE(attention_shape(d, a), "%s: head_dim = %d: at most %d on this backend", op,
                    d->head_dim, FG_CU_ATTN_MAX_HEAD_DIM);
    return FG_OK;
}

fg_status fg_cuda_op_attention_forward(void *state, void *queue, uint32_t dtype,
                                       const fg_attention_desc *d, const void *qkv, void *y,
                                       float *lse, void *workspace, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("attention_forward", dtype);
    fg_cu_attn a;
    fg_status st = check_attention("attention_forward", d, &a, err);
    if (st != FG_OK)
        return st;
    int done = 0;
    st = fg_cuda_sdpa_forward(state, queue, dtype, d, qkv, y, lse, &done, err);
    if (st == FG_OK && !done)
        st = fg_cuda_attn_gemm_forward(state, queue, dtype, d, qkv, y, lse, &done, err);
    if (st != FG_OK || done)
        return st;
    return fg_cuda_launched(fg_cu_attention_forward(STREAM(queue), (int)dtype, &a, qkv, y, lse),
                            "attention_forward", err);
}

fg_status fg_cuda_op_attention_backward(void *state, void *queue, uint32_t dtype,
                                        const fg_attention_desc *d, const void *qkv,
                                        const void *y, const float *lse, const void *dy,
                                        void *dqkv, void *workspace, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("attention_backward", dtype);
    fg_cu_attn a;
    fg_status st = check_attention("attention_backward", d, &a, err);
    if (st != FG_OK)
        return st;
    int done = 0;
    st = fg_cuda_sdpa_backward(state, queue, dtype, d, qkv, y, lse, dy, dqkv, &done, err);
    if (st == FG_OK && !done)
        st = fg_cuda_attn_gemm_backward(state, queue, dtype, d, qkv, lse, dy, dqkv, &done, err);
    if (st != FG_OK || done)
        return st;
    return fg_cuda_launched(fg_cu_attention_backward(STREAM(queue), (int)dtype, &a, qkv, y, lse,
                                                     dy, dqkv, workspace),
                            "attention_backward", err);
}

fg_status fg_cuda_op_attention_decode(void *state, void *queue, uint32_t dtype,
                                      const fg_attention_desc *d, int pos, const void *qkv,
                                      void *y, void *workspace, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("attention_decode", dtype);
    fg_cu_attn a;
    fg_status st = check_attention("attention_decode", d, &a, err);
    if (st != FG_OK)
        return st;
    return fg_cuda_launched(fg_cu_attention_decode(STREAM(queue), (int)dtype, &a, pos, qkv, y,
                                                   workspace),
                            "attention_decode", err);
}
