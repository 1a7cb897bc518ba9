/* The transformer ops (layer and RMS norm, embedding, attention) in every dtype: argument
 * checks at the border, f32 views of the operands (cpu_stage.h), then kernels/cpu. */
#include <stdint.h>

#include "cpu_backend.h"
#include "cpu_checks.h"
#include "cpu_stage.h"

static size_t volume2(int a, int b)
{
    return a > 0 && b > 0 ? (size_t)a * (size_t)b : 0;
}

/* ---- layer and RMS norm --------------------------------------------------------------- */

static fg_status check_norm(const char *op, void *queue, int rows, int cols, const void *x,
                            const float *rstd, fg_error *err)
{
    FG_CPU_QUEUE(op);
    FG_CPU_REQUIRE(rows >= 1 && cols >= 1, "%s: rows = %d, cols = %d must be >= 1", op, rows,
                   cols);
    FG_CPU_NOT_NULL(op, x);
    FG_CPU_NOT_NULL(op, rstd);
    return FG_OK;
}

fg_status fg_cpu_op_layernorm_forward(void *state, void *queue, uint32_t x_dtype,
                                      uint32_t param_dtype, int rms, int rows, int cols,
                                      const void *x, const void *gamma, const void *beta,
                                      float eps, float *mean, float *rstd, void *y,
                                      fg_error *err)
{
    fg_status st = check_norm("layernorm_forward", queue, rows, cols, x, rstd, err);
    if (st != FG_OK)
        return st;
    FG_CPU_NOT_NULL("layernorm_forward", y);
    FG_CPU_REQUIRE(rms || mean, "layernorm_forward: mean is NULL (needed unless rms)");
    FG_CPU_REQUIRE(eps >= 0.0f, "layernorm_forward: eps = %g must be >= 0", (double)eps);
    size_t n = volume2(rows, cols), c = (size_t)cols;
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, n), ARG_IN(gamma, param_dtype, c),
                          ARG_IN(rms ? NULL : beta, param_dtype, c), ARG_OUT(y, x_dtype, n)};
    st = fg_cpu_stage(state, queue, "layernorm_forward", o, NARGS(o), err);
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
    fg_status st = check_norm("layernorm_backward", queue, rows, cols, x, rstd, err);
    if (st != FG_OK)
        return st;
    FG_CPU_NOT_NULL("layernorm_backward", dy);
    FG_CPU_REQUIRE(rms || mean, "layernorm_backward: mean is NULL (needed unless rms)");
    size_t n = volume2(rows, cols), c = (size_t)cols;
    void *db = rms ? NULL : dbeta;
    fg_cpu_operand o[] = {ARG_IN(x, x_dtype, n), ARG_IN(gamma, param_dtype, c),
                          ARG_IN(dy, x_dtype, n), ARG_OUT(dx, x_dtype, n),
                          ARG_ACC(dgamma, grad_dtype, c, accumulate),
                          ARG_ACC(db, grad_dtype, c, accumulate)};
    st = fg_cpu_stage(state, queue, "layernorm_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_layernorm_backward(FG_CPU_POOL(state), rms, rows, cols, o[0].f, o[1].f, mean,
                                  rstd, o[2].f, o[3].f, o[4].f, o[5].f, accumulate);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

/* ---- embedding ------------------------------------------------------------------------ */

static fg_status check_embedding(const char *op, void *queue, const int32_t *ids, int n,
                                 int dim, int rows, fg_error *err)
{
    FG_CPU_QUEUE(op);
    FG_CPU_REQUIRE(n >= 0 && dim >= 1 && rows >= 1,
                   "%s: n = %d must be >= 0, dim = %d and rows = %d >= 1", op, n, dim, rows);
    FG_CPU_REQUIRE(n == 0 || ids, "%s: ids is NULL", op);
    int64_t bad = n > 0 ? fg_cpu_find_bad_label(ids, n, rows, 0) : -1;
    FG_CPU_REQUIRE(bad < 0, "%s: id %d at position %lld is outside the table's %d rows", op,
                   bad >= 0 ? ids[bad] : 0, (long long)bad, rows);
    return FG_OK;
}

fg_status fg_cpu_op_embedding_forward(void *state, void *queue, uint32_t table_dtype,
                                      uint32_t out_dtype, const int32_t *ids, int n, int dim,
                                      int rows, const void *table, void *out, int accumulate,
                                      fg_error *err)
{
    fg_status st = check_embedding("embedding_forward", queue, ids, n, dim, rows, err);
    if (st != FG_OK || n == 0)
        return st;
    FG_CPU_NOT_NULL("embedding_forward", table);
    FG_CPU_NOT_NULL("embedding_forward", out);
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
    fg_status st = check_embedding("embedding_backward", queue, ids, n, dim, rows, err);
    if (st != FG_OK)
        return st;
    FG_CPU_NOT_NULL("embedding_backward", dtable);
    FG_CPU_REQUIRE(n == 0 || dout, "embedding_backward: dout is NULL");
    fg_cpu_operand o[] = {ARG_IN(dout, dout_dtype, volume2(n, dim)),
                          ARG_ACC(dtable, grad_dtype, volume2(rows, dim), accumulate)};
    st = fg_cpu_stage(state, queue, "embedding_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_embedding_backward(FG_CPU_POOL(state), ids, n, dim, rows, o[0].f, o[1].f,
                                  accumulate);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

/* ---- attention ------------------------------------------------------------------------ */

static int attention_shape(const fg_attention_desc *d, fg_cpu_attn_shape *out)
{
    if (!d || d->struct_size < sizeof *d || d->batch < 1 || d->seq < 1 || d->heads < 1 ||
        d->head_dim < 1 || !(d->dropout >= 0.0f && d->dropout < 1.0f))
        return 0;
    if ((double)d->batch * d->seq * 3.0 * d->heads * d->head_dim > (double)INT32_MAX)
        return 0;
    *out = (fg_cpu_attn_shape){.batch = d->batch, .seq = d->seq, .heads = d->heads,
                               .head_dim = d->head_dim, .causal = d->causal != 0,
                               .dropout = d->dropout, .seed = d->seed, .offset = d->offset};
    return 1;
}

size_t fg_cpu_op_attention_workspace(void *state, const fg_attention_desc *d)
{
    fg_cpu_attn_shape a;
    return attention_shape(d, &a)
               ? fg_cpu_attention_workspace(&a, fg_cpu_pool_threads(FG_CPU_POOL(state)))
               : 0;
}

static fg_status check_attention(const char *op, void *queue, const fg_attention_desc *d,
                                 fg_cpu_attn_shape *a, const void *qkv, const float *lse,
                                 const void *workspace, fg_error *err)
{
    FG_CPU_QUEUE(op);
    FG_CPU_REQUIRE(attention_shape(d, a),
                   "%s: bad descriptor (batch, seq, heads, head_dim >= 1, dropout in [0, 1), "
                   "struct_size >= %zu)", op, sizeof *d);
    FG_CPU_NOT_NULL(op, qkv);
    FG_CPU_NOT_NULL(op, lse);
    FG_CPU_NOT_NULL(op, workspace);
    return FG_OK;
}

fg_status fg_cpu_op_attention_forward(void *state, void *queue, uint32_t dtype,
                                      const fg_attention_desc *d, const void *qkv, void *y,
                                      float *lse, void *workspace, fg_error *err)
{
    fg_cpu_attn_shape a;
    fg_status st = check_attention("attention_forward", queue, d, &a, qkv, lse, workspace, err);
    if (st != FG_OK)
        return st;
    FG_CPU_NOT_NULL("attention_forward", y);
    size_t rows = (size_t)a.batch * (size_t)a.seq, c = (size_t)a.heads * (size_t)a.head_dim;
    fg_cpu_operand o[] = {ARG_IN(qkv, dtype, rows * 3 * c), ARG_OUT(y, dtype, rows * c)};
    st = fg_cpu_stage(state, queue, "attention_forward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_attention_forward(FG_CPU_POOL(state), &a, o[0].f, o[1].f, lse, workspace);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_attention_backward(void *state, void *queue, uint32_t dtype,
                                       const fg_attention_desc *d, const void *qkv,
                                       const void *y, const float *lse, const void *dy,
                                       void *dqkv, void *workspace, fg_error *err)
{
    fg_cpu_attn_shape a;
    fg_status st = check_attention("attention_backward", queue, d, &a, qkv, lse, workspace,
                                   err);
    if (st != FG_OK)
        return st;
    FG_CPU_NOT_NULL("attention_backward", y);
    FG_CPU_NOT_NULL("attention_backward", dy);
    FG_CPU_NOT_NULL("attention_backward", dqkv);
    size_t rows = (size_t)a.batch * (size_t)a.seq, c = (size_t)a.heads * (size_t)a.head_dim;
    fg_cpu_operand o[] = {ARG_IN(qkv, dtype, rows * 3 * c), ARG_IN(y, dtype, rows * c),
                          ARG_IN(dy, dtype, rows * c), ARG_OUT(dqkv, dtype, rows * 3 * c)};
    st = fg_cpu_stage(state, queue, "attention_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_attention_backward(FG_CPU_POOL(state), &a, o[0].f, o[1].f, lse, o[2].f, o[3].f,
                                  workspace);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_attention_decode(void *state, void *queue, uint32_t dtype,
                                     const fg_attention_desc *d, int pos, const void *qkv,
                                     void *y, void *workspace, fg_error *err)
{
    fg_cpu_attn_shape a;
    fg_status st = check_attention("attention_decode", queue, d, &a, qkv, &(float){0},
                                   workspace, err);
    if (st != FG_OK)
        return st;
    FG_CPU_NOT_NULL("attention_decode", y);
    FG_CPU_REQUIRE(pos >= 0 && pos < a.seq, "attention_decode: pos = %d is outside the cache's "
                   "%d rows", pos, a.seq);
    size_t rows = (size_t)a.batch * (size_t)a.seq, c = (size_t)a.heads * (size_t)a.head_dim;
    fg_cpu_operand o[] = {ARG_IN(qkv, dtype, rows * 3 * c),
                          ARG_OUT(y, dtype, (size_t)a.batch * c)};
    st = fg_cpu_stage(state, queue, "attention_decode", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_attention_decode(FG_CPU_POOL(state), &a, pos, o[0].f, o[1].f, workspace);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}
