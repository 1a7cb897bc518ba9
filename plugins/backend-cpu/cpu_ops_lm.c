/* The transformer ops (layer and RMS norm, embedding, attention) in every dtype, behind the
 * checked trampolines (fulgur/backend_checks.h): f32 views of the operands (cpu_stage.h),
 * then kernels/cpu. bf16 activations skip the whole-tensor views for norms and embeddings
 * (kernels/cpu's _bf16 entry points: blocks widened on the stack, the same bits). */
#include <stdint.h>

#include "cpu_backend.h"
#include "fulgur/backend_checks.h"
#include "cpu_stage.h"

static size_t volume2(int a, int b)
{
    return a > 0 && b > 0 ? (size_t)a * (size_t)b : 0;
}

/* ---- layer and RMS norm --------------------------------------------------------------- */

/* bf16 activations in rows the kernels widen on the stack (kernels/cpu: bf16 storage, f32
 * math; the same bits as the staged emulation) */
static int bf16_rows(uint32_t x_dtype, int cols)
{
    return x_dtype == FG_BF16 && cols <= FG_CPU_BF16_MAX_COLS;
}

fg_status fg_cpu_op_layernorm_forward(void *state, void *queue, uint32_t x_dtype,
                                      uint32_t param_dtype, int rms, int rows, int cols,
                                      const void *x, const void *gamma, const void *beta,
                                      float eps, float *mean, float *rstd, void *y,
                                      fg_error *err)
{
    size_t n = volume2(rows, cols), c = (size_t)cols;
    if (bf16_rows(x_dtype, cols)) { /* only the parameters widened: c values each */
        fg_cpu_operand p[] = {ARG_IN(gamma, param_dtype, c),
                              ARG_IN(rms ? NULL : beta, param_dtype, c)};
        fg_status st = fg_cpu_stage(state, queue, "layernorm_forward", p, NARGS(p), err);
        if (st == FG_OK)
            fg_cpu_layernorm_forward_bf16(FG_CPU_POOL(state), rms, rows, cols, x, p[0].f,
                                          p[1].f, eps, rms ? NULL : mean, rstd, y);
        return st;
    }
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, n), ARG_IN(gamma, param_dtype, c),
                          ARG_IN(rms ? NULL : beta, param_dtype, c), ARG_OUT(y, x_dtype, n)};
    fg_status st = fg_cpu_stage(state, queue, "layernorm_forward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_layernorm_forward(FG_CPU_POOL(state), rms, rows, cols, o[0].f, o[1].f, o[2].f,
                                 eps, rms ? NULL : mean, rstd, o[3].f);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_layernorm_backward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, uint32_t grad_dtype, int rms,
                                       int rows, int cols, const void *x, const void *gamma,
                                       const float *mean, const float *rstd, const void *dy,
                                       void *dx, void *dgamma, void *dbeta, int accumulate,
                                       fg_error *err)
{
    size_t n = volume2(rows, cols), c = (size_t)cols;
    void *db = rms ? NULL : dbeta;
    if (bf16_rows(x_dtype, cols)) {
        fg_cpu_operand p[] = {ARG_IN(gamma, param_dtype, c),
                              ARG_ACC(dgamma, grad_dtype, c, accumulate),
                              ARG_ACC(db, grad_dtype, c, accumulate)};
        fg_status st = fg_cpu_stage(state, queue, "layernorm_backward", p, NARGS(p), err);
        if (st == FG_OK)
            fg_cpu_layernorm_backward_bf16(FG_CPU_POOL(state), rms, rows, cols, x, p[0].f, mean,
                                           rstd, dy, dx, p[1].f, p[2].f, accumulate);
        return fg_cpu_unstage(state, p, NARGS(p), st);
    }
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, n), ARG_IN(gamma, param_dtype, c),
                          ARG_IN(dy, x_dtype, n), ARG_OUT(dx, x_dtype, n),
                          ARG_ACC(dgamma, grad_dtype, c, accumulate),
                          ARG_ACC(db, grad_dtype, c, accumulate)};
    fg_status st = fg_cpu_stage(state, queue, "layernorm_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_layernorm_backward(FG_CPU_POOL(state), rms, rows, cols, o[0].f, o[1].f, mean,
                                  rstd, o[2].f, o[3].f, o[4].f, o[5].f, accumulate);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

/* The fused residual forms (ABI 1.5) are the two ops they fuse, run in turn: the same bits as
 * the model's axpy then layernorm_forward (layernorm_backward then axpy). */
fg_status fg_cpu_op_layernorm_residual_forward(void *state, void *queue, uint32_t x_dtype,
                                               uint32_t param_dtype, int rms, int rows,
                                               int cols, const void *a, const void *b, void *r,
                                               const void *gamma, const void *beta, float eps,
                                               float *mean, float *rstd, void *y,
                                               fg_error *err)
{
    size_t n = volume2(rows, cols);
    fg_status st = FG_OK;
    if (r == a) { /* r = a + 1 * b: the same sum */
        st = fg_cpu_op_axpy(state, queue, x_dtype, x_dtype, 1.0f, b, r, n, err);
    } else {
        if (r != b)
            st = fg_cpu_op_cast(state, queue, x_dtype, x_dtype, r, b, n, err);
        if (st == FG_OK)
            st = fg_cpu_op_axpy(state, queue, x_dtype, x_dtype, 1.0f, a, r, n, err);
    }
    if (st != FG_OK)
        return st;
    return fg_cpu_op_layernorm_forward(state, queue, x_dtype, param_dtype, rms, rows, cols, r,
                                       gamma, beta, eps, mean, rstd, y, err);
}

fg_status fg_cpu_op_layernorm_residual_backward(void *state, void *queue, uint32_t x_dtype,
                                                uint32_t param_dtype, uint32_t grad_dtype,
                                                int rms, int rows, int cols, const void *x,
                                                const void *gamma, const float *mean,
                                                const float *rstd, const void *dy,
                                                const void *dres, void *dx, void *dgamma,
                                                void *dbeta, int accumulate, fg_error *err)
{
    fg_status st = fg_cpu_op_layernorm_backward(state, queue, x_dtype, param_dtype, grad_dtype,
                                                rms, rows, cols, x, gamma, mean, rstd, dy, dx,
                                                dgamma, dbeta, accumulate, err);
    if (st == FG_OK && dx)
        st = fg_cpu_op_axpy(state, queue, x_dtype, x_dtype, 1.0f, dres, dx,
                            volume2(rows, cols), err);
    return st;
}

/* ---- embedding ------------------------------------------------------------------------ */

/* Every id in [0, rows) (the values: the shapes are checked). */
static fg_status check_ids(const char *op, const int32_t *ids, int n, int rows, fg_error *err)
{
    int64_t bad = n > 0 ? fg_cpu_find_bad_label(ids, n, rows, 0) : -1;
    if (bad >= 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: %s: id %d at position %lld "
                            "is outside the table's %d rows", op, ids[bad], (long long)bad, rows);
    return FG_OK;
}

fg_status fg_cpu_op_embedding_forward(void *state, void *queue, uint32_t table_dtype,
                                      uint32_t out_dtype, const int32_t *ids, int n, int dim,
                                      int rows, const void *table, void *out, int accumulate,
                                      fg_error *err)
{
    fg_status st = check_ids("embedding_forward", ids, n, rows, err);
    if (st != FG_OK)
        return st;
    if (table_dtype == FG_BF16 && out_dtype == FG_BF16) { /* the rows used, not the table */
        fg_cpu_embedding_forward_bf16(FG_CPU_POOL(state), ids, n, dim, table, out, accumulate);
        return FG_OK;
    }
    fg_cpu_operand o[] = {ARG_IN(table, table_dtype, volume2(rows, dim)),
                          ARG_ACC(out, out_dtype, volume2(n, dim), accumulate)};
    st = fg_cpu_stage(state, queue, "embedding_forward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_embedding_forward(FG_CPU_POOL(state), ids, n, dim, o[0].f, o[1].f, accumulate);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_embedding_backward(void *state, void *queue, uint32_t dout_dtype,
                                       uint32_t grad_dtype, const int32_t *ids, int n, int dim,
                                       int rows, const void *dout, void *dtable, int accumulate,
                                       fg_error *err)
{
    fg_status st = check_ids("embedding_backward", ids, n, rows, err);
    if (st != FG_OK)
        return st;
    if (dout_dtype == FG_BF16 && grad_dtype == FG_F32) {
        fg_cpu_embedding_backward_bf16(FG_CPU_POOL(state), ids, n, dim, rows, dout, dtable,
                                       accumulate);
        return FG_OK;
    }
    fg_cpu_operand o[] = {ARG_IN(dout, dout_dtype, volume2(n, dim)),
                          ARG_ACC(dtable, grad_dtype, volume2(rows, dim), accumulate)};
    st = fg_cpu_stage(state, queue, "embedding_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_embedding_backward(FG_CPU_POOL(state), ids, n, dim, rows, o[0].f, o[1].f,
                                  accumulate);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

/* ---- attention ------------------------------------------------------------------------ */

/* The kernels' view of a checked descriptor. */
static fg_cpu_attn_shape attention_shape(const fg_attention_desc *d)
{
    return (fg_cpu_attn_shape){.batch = d->batch, .seq = d->seq, .heads = d->heads,
                               .head_dim = d->head_dim, .causal = d->causal != 0,
                               .kv_heads = fg_attention_kv_heads(d),
                               .dropout = d->dropout, .seed = d->seed, .offset = d->offset};
}

size_t fg_cpu_op_attention_workspace(void *state, const fg_attention_desc *d)
{
    if (!fg_attention_desc_valid(d))
        return 0;
    fg_cpu_attn_shape a = attention_shape(d);
    return fg_cpu_attention_workspace(&a, fg_cpu_pool_threads(FG_CPU_POOL(state)));
}

fg_status fg_cpu_op_attention_forward(void *state, void *queue, uint32_t dtype,
                                      const fg_attention_desc *d, const void *qkv, void *y,
                                      float *lse, void *workspace, fg_error *err)
{
    fg_cpu_attn_shape a = attention_shape(d);
    size_t rows = (size_t)a.batch * (size_t)a.seq, c = (size_t)a.heads * (size_t)a.head_dim;
    size_t w = (size_t)(a.heads + 2 * a.kv_heads) * (size_t)a.head_dim; /* a qkv row */
    fg_cpu_gemm_route route;
    a.gemm = fg_cpu_gemm_route_begin(&route, state, queue, "attention_forward", dtype,
                                     fg_cpu_pool_threads(FG_CPU_POOL(state)));
    if (dtype == FG_BF16) { /* no staging: bf16 products on the tensors (attention_bf16.c) */
        fg_cpu_attention_forward_bf16(FG_CPU_POOL(state), &a, qkv, y, lse, workspace);
        return fg_cpu_gemm_route_end(&route, FG_OK, err);
    }
    fg_cpu_operand o[] = {ARG_IN(qkv, dtype, rows * w), ARG_OUT(y, dtype, rows * c)};
    fg_status st = fg_cpu_stage(state, queue, "attention_forward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_attention_forward(FG_CPU_POOL(state), &a, o[0].f, o[1].f, lse, workspace);
    st = fg_cpu_gemm_route_end(&route, st, err);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_attention_backward(void *state, void *queue, uint32_t dtype,
                                       const fg_attention_desc *d, const void *qkv,
                                       const void *y, const float *lse, const void *dy,
                                       void *dqkv, void *workspace, fg_error *err)
{
    fg_cpu_attn_shape a = attention_shape(d);
    size_t rows = (size_t)a.batch * (size_t)a.seq, c = (size_t)a.heads * (size_t)a.head_dim;
    size_t w = (size_t)(a.heads + 2 * a.kv_heads) * (size_t)a.head_dim; /* a qkv row */
    fg_cpu_gemm_route route;
    a.gemm = fg_cpu_gemm_route_begin(&route, state, queue, "attention_backward", dtype,
                                     fg_cpu_pool_threads(FG_CPU_POOL(state)));
    if (dtype == FG_BF16) {
        fg_cpu_attention_backward_bf16(FG_CPU_POOL(state), &a, qkv, y, lse, dy, dqkv,
                                       workspace);
        return fg_cpu_gemm_route_end(&route, FG_OK, err);
    }
    fg_cpu_operand o[] = {ARG_IN(qkv, dtype, rows * w), ARG_IN(y, dtype, rows * c),
                          ARG_IN(dy, dtype, rows * c), ARG_OUT(dqkv, dtype, rows * w)};
    fg_status st = fg_cpu_stage(state, queue, "attention_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_attention_backward(FG_CPU_POOL(state), &a, o[0].f, o[1].f, lse, o[2].f, o[3].f,
                                  workspace);
    st = fg_cpu_gemm_route_end(&route, st, err);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_attention_decode(void *state, void *queue, uint32_t dtype,
                                     const fg_attention_desc *d, int pos, const void *qkv,
                                     void *y, void *workspace, fg_error *err)
{
    fg_cpu_attn_shape a = attention_shape(d);
    size_t rows = (size_t)a.batch * (size_t)a.seq, c = (size_t)a.heads * (size_t)a.head_dim;
    size_t w = (size_t)(a.heads + 2 * a.kv_heads) * (size_t)a.head_dim; /* a qkv row */
    fg_cpu_operand o[] = {ARG_IN(qkv, dtype, rows * w),
                          ARG_OUT(y, dtype, (size_t)a.batch * c)};
    fg_status st = fg_cpu_stage(state, queue, "attention_decode", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_attention_decode(FG_CPU_POOL(state), &a, pos, o[0].f, o[1].f, workspace);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}
