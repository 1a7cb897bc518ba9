/* The transformer ops (layer and RMS norm, embedding, attention), each once for every dtype:
 * the CPU backend's checks (plugins/backend-cpu/cpu_ops_lm.c), then kernels/cuda. Token ids
 * live on the device, so a kernel flags a bad one and the next queue_sync reports it with
 * its position (the CPU backend refuses the call). */
#include <math.h>
#include <stdint.h>

#include "cuda_backend.h"
#include "cuda_checks.h"
#include "cuda_ops.h"
#include "cuda_sdpa.h"

/* ---- layer and RMS norm --------------------------------------------------------------- */

static fg_status check_norm(const char *op, int rows, int cols, const void *x,
                            const float *rstd, fg_error *err)
{
    FG_CUDA_REQUIRE(rows >= 1 && cols >= 1, "%s: rows = %d, cols = %d must be >= 1", op, rows,
                    cols);
    FG_CUDA_NOT_NULL(op, x);
    FG_CUDA_NOT_NULL(op, rstd);
    return FG_OK;
}

fg_status fg_cuda_op_layernorm_forward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, int rms, int rows, int cols,
                                       const void *x, const void *gamma, const void *beta,
                                       float eps, float *mean, float *rstd, void *y,
                                       fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("layernorm_forward", x_dtype, param_dtype);
    fg_status st = check_norm("layernorm_forward", rows, cols, x, rstd, err);
    if (st != FG_OK)
        return st;
    FG_CUDA_NOT_NULL("layernorm_forward", y);
    FG_CUDA_REQUIRE(rms || mean, "layernorm_forward: mean is NULL (needed unless rms)");
    FG_CUDA_REQUIRE(eps >= 0.0f, "layernorm_forward: eps = %g must be >= 0", (double)eps);
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
    fg_status st = check_norm("layernorm_backward", rows, cols, x, rstd, err);
    if (st != FG_OK)
        return st;
    FG_CUDA_NOT_NULL("layernorm_backward", dy);
    FG_CUDA_REQUIRE(rms || mean, "layernorm_backward: mean is NULL (needed unless rms)");
    fg_cuda_queue *q = queue;
    return fg_cuda_launched(fg_cu_ln_backward(q->stream, (int)x_dtype, (int)param_dtype,
                                              (int)grad_dtype, rms, rows, cols, x, gamma,
                                              mean, rstd, dy, dx, dgamma, dbeta, accumulate,
                                              q->scratch),
                            "layernorm_backward", err);
}

/* ---- embedding ------------------------------------------------------------------------ */

static fg_status check_embedding(const char *op, const int32_t *ids, int n, int dim,
                                 int rows, fg_error *err)
{
    FG_CUDA_REQUIRE(n >= 0 && dim >= 1 && rows >= 1,
                    "%s: n = %d must be >= 0, dim = %d and rows = %d >= 1", op, n, dim, rows);
    FG_CUDA_REQUIRE(n == 0 || ids, "%s: ids is NULL", op);
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
    fg_status st = check_embedding("embedding_forward", ids, n, dim, rows, err);
    if (st != FG_OK || n == 0)
        return st;
    FG_CUDA_NOT_NULL("embedding_forward", table);
    FG_CUDA_NOT_NULL("embedding_forward", out);
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
    fg_status st = check_embedding("embedding_backward", ids, n, dim, rows, err);
    if (st != FG_OK)
        return st;
    FG_CUDA_NOT_NULL("embedding_backward", dtable);
    FG_CUDA_REQUIRE(n == 0 || dout, "embedding_backward: dout is NULL");
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

/* The kernels' view of a valid descriptor; 0 for a bad one (the CPU backend's rules, plus
 * the kernels' head_dim limit). */
static int attention_shape(const fg_attention_desc *d, fg_cu_attn *a)
{
    if (!d || d->struct_size < sizeof *d || d->batch < 1 || d->seq < 1 || d->heads < 1 ||
        d->head_dim < 1 || d->head_dim > FG_CU_ATTN_MAX_HEAD_DIM ||
        !(d->dropout >= 0.0f && d->dropout < 1.0f))
        return 0;
    if ((double)d->batch * d->seq * 3.0 * d->heads * d->head_dim > (double)INT32_MAX ||
        (double)d->batch * d->heads * ((d->seq + 3) / 4) > (double)INT32_MAX)
        return 0;
    *a = (fg_cu_attn){.batch = d->batch, .seq = d->seq, .heads = d->heads,
                      .head_dim = d->head_dim, .causal = d->causal != 0,
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
                                 const void *qkv, const float *lse, const void *workspace,
                                 fg_error *err)
{
    FG_CUDA_REQUIRE(attention_shape(d, a),
                    "%s: bad descriptor (batch, seq, heads, head_dim >= 1, head_dim <= %d on "
                    "this backend, dropout in [0, 1), struct_size >= %zu)", op,
                    FG_CU_ATTN_MAX_HEAD_DIM, sizeof *d);
    FG_CUDA_NOT_NULL(op, qkv);
    FG_CUDA_NOT_NULL(op, lse);
    FG_CUDA_NOT_NULL(op, workspace);
    return FG_OK;
}

fg_status fg_cuda_op_attention_forward(void *state, void *queue, uint32_t dtype,
                                       const fg_attention_desc *d, const void *qkv, void *y,
                                       float *lse, void *workspace, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("attention_forward", dtype);
    fg_cu_attn a;
    fg_status st = check_attention("attention_forward", d, &a, qkv, lse, workspace, err);
    if (st != FG_OK)
        return st;
    FG_CUDA_NOT_NULL("attention_forward", y);
    int done = 0;
    st = fg_cuda_sdpa_forward(state, queue, dtype, d, qkv, y, lse, &done, err);
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
    fg_status st = check_attention("attention_backward", d, &a, qkv, lse, workspace, err);
    if (st != FG_OK)
        return st;
    FG_CUDA_NOT_NULL("attention_backward", y);
    FG_CUDA_NOT_NULL("attention_backward", dy);
    FG_CUDA_NOT_NULL("attention_backward", dqkv);
    int done = 0;
    st = fg_cuda_sdpa_backward(state, queue, dtype, d, qkv, y, lse, dy, dqkv, &done, err);
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
    fg_status st = check_attention("attention_decode", d, &a, qkv, &(float){0}, workspace,
                                   err);
    if (st != FG_OK)
        return st;
    FG_CUDA_NOT_NULL("attention_decode", y);
    FG_CUDA_REQUIRE(pos >= 0 && pos < a.seq,
                    "attention_decode: pos = %d is outside the cache's %d rows", pos, a.seq);
    return fg_cuda_launched(fg_cu_attention_decode(STREAM(queue), (int)dtype, &a, pos, qkv, y,
                                                   workspace),
                            "attention_decode", err);
}
