/* Multi-head scaled dot-product attention over a fused QKV tensor, tiled by blocks of
 * query rows: for each (batch, head) and block of FG_CPU_ATTN_BLOCK queries, the scores
 * against the keys the block may see are one sgemm, the masked softmax runs on the pool,
 * and the output is a second sgemm. Only the block's scores are held (BLOCK x T floats),
 * and the forward keeps the log-sum-exp of each row (B, H, T) for backward, which
 * recomputes the scores a block at a time (FlashAttention-2's recurrence, with gemm tiles
 * instead of a fused kernel): memory grows with T, never with T^2.
 *
 * qkv (B, T, 3C): q | k | v along the last dimension, head h at columns [h*D, (h+1)*D) of
 * each third, C = H*D. y (B, T, C), heads side by side. Scores are scaled by 1/sqrt(D).
 * Attention dropout drops probability (b, h, i, j) when the draw of (seed, offset +
 * ((b*H + h)*T + i)*T + j) says so (fg_cpu_dropout_keep), in forward and backward alike;
 * rowsum(dY * Y) is still the softmax backward's correction term with it. */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

typedef struct fg_cpu_attn_rows {
    float *s;              /* (rows, ld) scores in, probabilities out */
    const float *dp;       /* backward: dP (rows, ld), or NULL in forward */
    float *ds;             /* backward: dS out (may alias dp) */
    const float *delta;    /* backward: rowsum(dY * Y) per row */
    float *lse;            /* forward: out; backward: in */
    int first_row, ld, causal, seq;
    float dropout;         /* p; 0: none */
    uint64_t seed, first_draw; /* draw of row 0, column 0 of the block */
} fg_cpu_attn_rows;

/* keep / (1 - p) of probability (r, j) of the block: 0 or the dropout scale. */
static inline float fg_cpu_attn_keep(const fg_cpu_attn_rows *a, size_t r, int j)
{
    uint64_t draw = a->first_draw + (uint64_t)r * (uint64_t)a->seq + (uint64_t)j;
    return fg_cpu_dropout_keep(a->seed, draw, a->dropout) ? 1.0f / (1.0f - a->dropout) : 0.0f;
}

/* Keys row r (absolute query first_row + r) may see: [0, limit). */
static inline int fg_cpu_attn_limit(const fg_cpu_attn_rows *a, size_t r)
{
    return a->causal ? a->first_row + (int)r + 1 : a->ld;
}

static void fg_cpu_attn_softmax_rows(void *p, size_t r0, size_t r1)
{
    const fg_cpu_attn_rows *a = p;
    for (size_t r = r0; r < r1; r++) {
        float *s = a->s + r * (size_t)a->ld;
        int lim = fg_cpu_attn_limit(a, r);
        float mx = -INFINITY;
        for (int j = 0; j < lim; j++)
            mx = s[j] > mx ? s[j] : mx;
        double sum = 0.0;
        for (int j = 0; j < lim; j++) {
            s[j] = expf(s[j] - mx);
            sum += s[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < lim; j++)
            s[j] *= inv;
        for (int j = lim; j < a->ld; j++)
            s[j] = 0.0f;
        a->lse[r] = mx + (float)log(sum);
        if (a->dropout > 0.0f)
            for (int j = 0; j < lim; j++)
                s[j] *= fg_cpu_attn_keep(a, r, j);
    }
}

/* P = exp(S - lse) recomputed; with dropout, s keeps the dropped P (for dV) and dP is the
 * gradient through the mask; dS = P * (dP - delta). */
static void fg_cpu_attn_backward_rows(void *p, size_t r0, size_t r1)
{
    const fg_cpu_attn_rows *a = p;
    for (size_t r = r0; r < r1; r++) {
        float *s = a->s + r * (size_t)a->ld;
        const float *dp = a->dp + r * (size_t)a->ld;
        float *ds = a->ds + r * (size_t)a->ld;
        int lim = fg_cpu_attn_limit(a, r);
        float l = a->lse[r], d = a->delta[r];
        if (a->dropout > 0.0f)
            for (int j = 0; j < lim; j++) {
                float prob = expf(s[j] - l), keep = fg_cpu_attn_keep(a, r, j);
                s[j] = prob * keep;
                ds[j] = prob * (dp[j] * keep - d);
            }
        else
            for (int j = 0; j < lim; j++) {
                s[j] = expf(s[j] - l);
                ds[j] = s[j] * (dp[j] - d);
            }
        for (int j = lim; j < a->ld; j++)
            s[j] = ds[j] = 0.0f;
    }
}

static void fg_cpu_attn_rows_run(fg_cpu_pool *pool, fg_cpu_attn_rows *a, int rows,
                                 fg_cpu_range_fn fn)
{
    /* exp per element: an eighth of the grain's arithmetic */
    size_t grain = (FG_CPU_GRAIN / 8) / (size_t)a->ld + 1;
    fg_cpu_parallel_for(pool, (size_t)rows, grain, 1, fn, a);
}

static void fg_cpu_attn_set_dropout(fg_cpu_attn_rows *rows, const fg_cpu_attn_shape *a, int b,
                                    int h, int i0)
{
    rows->seq = a->seq;
    rows->dropout = a->dropout;
    rows->seed = a->seed;
    rows->first_draw = a->offset + (((uint64_t)b * (uint64_t)a->heads + (uint64_t)h) *
                                         (uint64_t)a->seq + (uint64_t)i0) * (uint64_t)a->seq;
}

size_t fg_cpu_attention_workspace(const fg_cpu_attn_shape *a)
{
    return 2 * (size_t)FG_CPU_ATTN_BLOCK * (size_t)a->seq * sizeof(float);
}

void fg_cpu_attention_forward(fg_cpu_pool *pool, const fg_cpu_attn_shape *a, const float *qkv,
                              float *y, float *lse, void *workspace)
{
    int T = a->seq, D = a->head_dim, C = a->heads * a->head_dim;
    float scale = 1.0f / sqrtf((float)D);
    float *s = workspace;
    for (int b = 0; b < a->batch; b++)
        for (int h = 0; h < a->heads; h++) {
            const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * D;
            const float *k = q + C, *v = q + 2 * C;
            float *yb = y + (size_t)b * T * C + (size_t)h * D;
            float *lse_bh = lse + ((size_t)b * a->heads + (size_t)h) * (size_t)T;
            for (int i0 = 0; i0 < T; i0 += FG_CPU_ATTN_BLOCK) {
                int qn = T - i0 < FG_CPU_ATTN_BLOCK ? T - i0 : FG_CPU_ATTN_BLOCK;
                int kend = a->causal ? i0 + qn : T;
                fg_cpu_gemm(0, 1, qn, kend, D, scale, q + (size_t)i0 * 3 * C, 3 * C, k,
                            3 * C, 0.0f, s, kend);
                fg_cpu_attn_rows rows = {.s = s, .lse = lse_bh + i0, .first_row = i0,
                                         .ld = kend, .causal = a->causal};
                fg_cpu_attn_set_dropout(&rows, a, b, h, i0);
                fg_cpu_attn_rows_run(pool, &rows, qn, fg_cpu_attn_softmax_rows);
                fg_cpu_gemm(0, 0, qn, D, kend, 1.0f, s, kend, v, 3 * C, 0.0f,
                            yb + (size_t)i0 * C, C);
            }
        }
}

/* delta[i] = sum_d dY[i, d] * Y[i, d] for the head's rows. */
static void fg_cpu_attn_delta(const float *dy, const float *y, int rows, int D, int ld,
                              float *delta)
{
    for (int i = 0; i < rows; i++) {
        double acc = 0.0;
        for (int d = 0; d < D; d++)
            acc += (double)dy[(size_t)i * ld + d] * (double)y[(size_t)i * ld + d];
        delta[i] = (float)acc;
    }
}

void fg_cpu_attention_backward(fg_cpu_pool *pool, const fg_cpu_attn_shape *a,
                               const float *qkv, const float *y, const float *lse,
                               const float *dy, float *dqkv, void *workspace)
{
    int T = a->seq, D = a->head_dim, C = a->heads * a->head_dim;
    float scale = 1.0f / sqrtf((float)D);
    float *s = workspace, *dp = s + (size_t)FG_CPU_ATTN_BLOCK * (size_t)T;
    float delta[FG_CPU_ATTN_BLOCK];
    memset(dqkv, 0, (size_t)a->batch * T * 3 * C * sizeof *dqkv);
    for (int b = 0; b < a->batch; b++)
        for (int h = 0; h < a->heads; h++) {
            size_t base = (size_t)b * T * 3 * C + (size_t)h * D;
            const float *q = qkv + base, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
            size_t out = (size_t)b * T * C + (size_t)h * D;
            const float *lse_bh = lse + ((size_t)b * a->heads + (size_t)h) * (size_t)T;
            for (int i0 = 0; i0 < T; i0 += FG_CPU_ATTN_BLOCK) {
                int qn = T - i0 < FG_CPU_ATTN_BLOCK ? T - i0 : FG_CPU_ATTN_BLOCK;
                int kend = a->causal ? i0 + qn : T;
                const float *dyb = dy + out + (size_t)i0 * C;
                fg_cpu_gemm(0, 1, qn, kend, D, scale, q + (size_t)i0 * 3 * C, 3 * C, k,
                            3 * C, 0.0f, s, kend);
                fg_cpu_gemm(0, 1, qn, kend, D, 1.0f, dyb, C, v, 3 * C, 0.0f, dp, kend);
                fg_cpu_attn_delta(dyb, y + out + (size_t)i0 * C, qn, D, C, delta);
                fg_cpu_attn_rows rows = {.s = s, .dp = dp, .ds = dp, .delta = delta,
                                         .lse = (float *)(lse_bh + i0), .first_row = i0,
                                         .ld = kend, .causal = a->causal};
                fg_cpu_attn_set_dropout(&rows, a, b, h, i0);
                fg_cpu_attn_rows_run(pool, &rows, qn, fg_cpu_attn_backward_rows);
                /* dV += P^T dY; dQ = scale dS K; dK += scale dS^T Q */
                fg_cpu_gemm(1, 0, kend, D, qn, 1.0f, s, kend, dyb, C, 1.0f, dv, 3 * C);
                fg_cpu_gemm(0, 0, qn, D, kend, scale, dp, kend, k, 3 * C, 0.0f,
                            dq + (size_t)i0 * 3 * C, 3 * C);
                fg_cpu_gemm(1, 0, kend, D, qn, scale, dp, kend, q + (size_t)i0 * 3 * C, 3 * C,
                            1.0f, dk, 3 * C);
            }
        }
}

/* ---- one query against the cache (fulgur generate) ------------------------------------- */

typedef struct fg_cpu_attn_decode {
    const fg_cpu_attn_shape *a;
    int pos, h0;     /* the query row; the first (batch * heads) item of this chunk */
    const float *qkv;
    float *y;
    float *s;        /* (chunk, seq) scores, one row per item */
} fg_cpu_attn_decode;

/* Items [i0, i1) of the chunk, each a (batch, head): scores, softmax (as the forward's
 * rows: the max, exp, a double sum), then y = P V. */
static void fg_cpu_attn_decode_items(void *p, size_t i0, size_t i1)
{
    const fg_cpu_attn_decode *w = p;
    const fg_cpu_attn_shape *a = w->a;
    int T = a->seq, D = a->head_dim, C = a->heads * a->head_dim, n = w->pos + 1;
    float scale = 1.0f / sqrtf((float)D);
    for (size_t i = i0; i < i1; i++) {
        int item = w->h0 + (int)i, b = item / a->heads, h = item % a->heads;
        const float *base = w->qkv + (size_t)b * T * 3 * C + (size_t)h * D;
        const float *q = base + (size_t)w->pos * 3 * C, *k = base + C, *v = base + 2 * C;
        float *s = w->s + i * (size_t)T, *y = w->y + (size_t)b * C + (size_t)h * D;
        float mx = -INFINITY;
        for (int j = 0; j < n; j++) {
            float dot = 0.0f;
            for (int d = 0; d < D; d++)
                dot += q[d] * k[(size_t)j * 3 * C + d];
            s[j] = dot * scale;
            mx = s[j] > mx ? s[j] : mx;
        }
        double sum = 0.0;
        for (int j = 0; j < n; j++) {
            s[j] = expf(s[j] - mx);
            sum += s[j];
        }
        float inv = (float)(1.0 / sum);
        for (int d = 0; d < D; d++)
            y[d] = 0.0f;
        for (int j = 0; j < n; j++) {
            float pj = s[j] * inv;
            const float *vj = v + (size_t)j * 3 * C;
            for (int d = 0; d < D; d++)
                y[d] += pj * vj[d];
        }
    }
}

void fg_cpu_attention_decode(fg_cpu_pool *pool, const fg_cpu_attn_shape *a, int pos,
                             const float *qkv, float *y, void *workspace)
{
    /* the workspace holds 2 * BLOCK rows of seq scores: that many heads at a time */
    int items = a->batch * a->heads, chunk = 2 * FG_CPU_ATTN_BLOCK;
    size_t grain = (FG_CPU_GRAIN / 4) / ((size_t)(pos + 1) * (size_t)a->head_dim) + 1;
    for (int h0 = 0; h0 < items; h0 += chunk) {
        int count = items - h0 < chunk ? items - h0 : chunk;
        fg_cpu_attn_decode w = {a, pos, h0, qkv, y, workspace};
        fg_cpu_parallel_for(pool, (size_t)count, grain, 1, fg_cpu_attn_decode_items, &w);
    }
}
