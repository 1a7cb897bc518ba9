/* f32 attention on batched cuBLASLt gemms (cuda_attention_gemm.h). */
#include <math.h>

#include "cuda_attention_gemm.h"
#include "cuda_sdpa.h"

/* One call's geometry: heads go `group` at a time through the staging buffer. */
typedef struct attn_gemm_shape {
    int B, T, H, D, C, causal, group;
    float scale;
} attn_gemm_shape;

static size_t head_bytes(int seq)
{
    return (size_t)seq * (size_t)seq * sizeof(float);
}

/* Why this call cannot run here, or NULL. */
static const char *refusal(uint32_t dtype, const fg_attention_desc *d)
{
    if (dtype != FG_F32)
        return "it runs f32 (f16 and bf16 go to cuDNN or the kernels)";
    if (d->dropout > 0.0f)
        return "attention dropout draws fulgur's masks in the kernels";
    if (fg_attention_kv_heads(d) != d->heads)
        return "grouped-query attention (kv_heads < heads) runs in the kernels";
    if (2 * head_bytes(d->seq) > FG_CUDA_ATTN_GEMM_HEAD_MAX)
        return "a head's two T x T f32 buffers pass 1 GiB";
    return NULL;
}

/* *take = 1 when this call runs on gemms; an error when attention = gemm and it cannot. */
static fg_status choose(const fg_cuda_backend *be, const char *op, uint32_t dtype,
                        const fg_attention_desc *d, int *take, fg_error *err)
{
    *take = 0;
    if (be->attention != FG_CUDA_ATTN_GEMM && be->attention != FG_CUDA_ATTN_AUTO)
        return FG_OK;
    const char *why = refusal(dtype, d);
    if (!why) {
        *take = 1;
        return FG_OK;
    }
    if (be->attention == FG_CUDA_ATTN_AUTO)
        return FG_OK;
    return fg_error_set(err, FG_UNAVAILABLE, "backend.cuda: %s: [backend] attention = gemm "
                        "cannot run %s T=%d: %s (attention = auto falls back)", op,
                        fg_dtype_name((fg_dtype)dtype), d->seq, why);
}

static attn_gemm_shape shape_of(const fg_attention_desc *d)
{
    attn_gemm_shape s = { d->batch, d->seq, d->heads, d->head_dim, d->heads * d->head_dim,
                          d->causal != 0, 1, 1.0f / sqrtf((float)d->head_dim) };
    size_t fit = FG_CUDA_ATTN_GEMM_BUDGET / (2 * head_bytes(s.T));
    s.group = fit < 1 ? 1 : fit > (size_t)s.H ? s.H : (int)fit;
    return s;
}

/* The staging buffer's two score areas, each `group` heads of T x T. */
static fg_status scratch(fg_cuda_queue *q, const attn_gemm_shape *s, int areas, float **a,
                         float **b, const char *op, fg_error *err)
{
    size_t area = (size_t)s->group * head_bytes(s->T);
    fg_status st = fg_cuda_stage(q, (size_t)areas * area, op, err);
    *a = q->stage;
    *b = (float *)((char *)q->stage + area);
    return st;
}

/* C_h = alpha op(A_h) op(B_h) for `heads` heads: A and B from (B, T, ...) tensors whose
 * heads lie D floats apart along a row of ld floats, or from the T x T score areas. */
static fg_status heads_gemm(const fg_cuda_backend *be, fg_cuda_queue *q, int heads,
                            fg_cuda_batched_gemm g, fg_error *err)
{
    g.batch = heads;
    g.beta = 0.0f;
    return fg_cuda_matmul_batched(be, q, &g, err);
}

/* The operands of sample b, heads [h, h + n). */
typedef struct attn_gemm_heads {
    const float *q, *k, *v; /* in qkv: ld 3C, heads D apart */
    float *dq, *dk, *dv;    /* in dqkv */
    const float *dy;        /* ld C */
    float *y;
    float *lse;             /* (n, T) */
} attn_gemm_heads;

static fg_cuda_batched_gemm scores_gemm(const attn_gemm_shape *s, const attn_gemm_heads *h,
                                        float *out)
{
    /* S = scale Q K^T: (T x D) (D x T) */
    return (fg_cuda_batched_gemm){ .trans_b = 1, .m = s->T, .n = s->T, .k = s->D,
                                   .alpha = s->scale, .a = h->q, .lda = 3 * s->C,
                                   .stride_a = s->D, .b = h->k, .ldb = 3 * s->C,
                                   .stride_b = s->D, .c = out, .ldc = s->T,
                                   .stride_c = s->T * s->T };
}

static fg_status forward_heads(const fg_cuda_backend *be, fg_cuda_queue *q,
                               const attn_gemm_shape *s, const attn_gemm_heads *h, int n,
                               float *sc, fg_error *err)
{
    fg_status st = heads_gemm(be, q, n, scores_gemm(s, h, sc), err);
    if (st != FG_OK)
        return st;
    cudaError_t e = fg_cu_attn_softmax(q->stream, sc, h->lse, n * s->T, s->T, s->causal);
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "attention_forward: softmax");
    /* Y = P V: (T x T) (T x D), into y's heads */
    fg_cuda_batched_gemm pv = { .m = s->T, .n = s->D, .k = s->T, .alpha = 1.0f, .a = sc,
                                .lda = s->T, .stride_a = s->T * s->T, .b = h->v,
                                .ldb = 3 * s->C, .stride_b = s->D, .c = h->y, .ldc = s->C,
                                .stride_c = s->D };
    return heads_gemm(be, q, n, pv, err);
}

static fg_status backward_heads(const fg_cuda_backend *be, fg_cuda_queue *q,
                                const attn_gemm_shape *s, const attn_gemm_heads *h, int n,
                                float *p, float *dp, fg_error *err)
{
    int T = s->T, D = s->D, ld3 = 3 * s->C, TT = s->T * s->T;
    fg_status st = heads_gemm(be, q, n, scores_gemm(s, h, p), err);
    cudaError_t e = st == FG_OK ? fg_cu_attn_probs(q->stream, p, h->lse, n * T, T, s->causal)
                                : cudaSuccess;
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "attention_backward: probabilities");
    /* dV = P^T dY; dP = dY V^T */
    fg_cuda_batched_gemm dv = { .trans_a = 1, .m = T, .n = D, .k = T, .alpha = 1.0f, .a = p,
                                .lda = T, .stride_a = TT, .b = h->dy, .ldb = s->C,
                                .stride_b = D, .c = h->dv, .ldc = ld3, .stride_c = D };
    fg_cuda_batched_gemm dpg = { .trans_b = 1, .m = T, .n = T, .k = D, .alpha = 1.0f,
                                 .a = h->dy, .lda = s->C, .stride_a = D, .b = h->v,
                                 .ldb = ld3, .stride_b = D, .c = dp, .ldc = T, .stride_c = TT };
    if (st == FG_OK)
        st = heads_gemm(be, q, n, dv, err);
    if (st == FG_OK)
        st = heads_gemm(be, q, n, dpg, err);
    e = st == FG_OK ? fg_cu_attn_dsoftmax(q->stream, p, dp, n * T, T, s->causal, s->scale)
                    : cudaSuccess;
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "attention_backward: softmax gradient");
    /* dQ = dS K; dK = dS^T Q */
    fg_cuda_batched_gemm dq = { .m = T, .n = D, .k = T, .alpha = 1.0f, .a = dp, .lda = T,
                                .stride_a = TT, .b = h->k, .ldb = ld3, .stride_b = D,
                                .c = h->dq, .ldc = ld3, .stride_c = D };
    fg_cuda_batched_gemm dk = { .trans_a = 1, .m = T, .n = D, .k = T, .alpha = 1.0f, .a = dp,
                                .lda = T, .stride_a = TT, .b = h->q, .ldb = ld3, .stride_b = D,
                                .c = h->dk, .ldc = ld3, .stride_c = D };
    if (st == FG_OK)
        st = heads_gemm(be, q, n, dq, err);
    if (st == FG_OK)
        st = heads_gemm(be, q, n, dk, err);
    return st;
}

/* Sample b, heads from h0: where each operand starts. */
static attn_gemm_heads heads_at(const attn_gemm_shape *s, int b, int h0, const float *qkv,
                                float *dqkv, const float *dy, float *y, const float *lse)
{
    size_t row3 = (size_t)b * (size_t)s->T * (size_t)(3 * s->C) + (size_t)h0 * (size_t)s->D;
    size_t row = (size_t)b * (size_t)s->T * (size_t)s->C + (size_t)h0 * (size_t)s->D;
    attn_gemm_heads h = { qkv + row3, qkv + row3 + s->C, qkv + row3 + 2 * s->C, NULL, NULL,
                          NULL, dy ? dy + row : NULL, y ? y + row : NULL,
                          (float *)lse + ((size_t)b * (size_t)s->H + (size_t)h0) * (size_t)s->T };
    if (dqkv) {
        h.dq = dqkv + row3;
        h.dk = h.dq + s->C;
        h.dv = h.dq + 2 * s->C;
    }
    return h;
}

fg_status fg_cuda_attn_gemm_forward(const fg_cuda_backend *be, fg_cuda_queue *q,
                                    uint32_t dtype, const fg_attention_desc *d,
                                    const void *qkv, void *y, float *lse, int *done,
                                    fg_error *err)
{
    fg_status st = choose(be, "attention_forward", dtype, d, done, err);
    if (st != FG_OK || !*done)
        return st;
    attn_gemm_shape s = shape_of(d);
    float *sc, *unused;
    st = scratch(q, &s, 1, &sc, &unused, "attention_forward", err);
    for (int b = 0; st == FG_OK && b < s.B; b++)
        for (int h0 = 0; st == FG_OK && h0 < s.H; h0 += s.group) {
            int n = s.H - h0 < s.group ? s.H - h0 : s.group;
            attn_gemm_heads h = heads_at(&s, b, h0, qkv, NULL, NULL, y, lse);
            st = forward_heads(be, q, &s, &h, n, sc, err);
        }
    return st;
}

fg_status fg_cuda_attn_gemm_backward(const fg_cuda_backend *be, fg_cuda_queue *q,
                                     uint32_t dtype, const fg_attention_desc *d,
                                     const void *qkv, const float *lse, const void *dy,
                                     void *dqkv, int *done, fg_error *err)
{
    fg_status st = choose(be, "attention_backward", dtype, d, done, err);
    if (st != FG_OK || !*done)
        return st;
    attn_gemm_shape s = shape_of(d);
    float *p, *dp;
    st = scratch(q, &s, 2, &p, &dp, "attention_backward", err);
    for (int b = 0; st == FG_OK && b < s.B; b++)
        for (int h0 = 0; st == FG_OK && h0 < s.H; h0 += s.group) {
            int n = s.H - h0 < s.group ? s.H - h0 : s.group;
            attn_gemm_heads h = heads_at(&s, b, h0, qkv, dqkv, dy, NULL, lse);
            st = backward_heads(be, q, &s, &h, n, p, dp, err);
        }
    return st;
}
