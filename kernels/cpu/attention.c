/* Multi-head scaled dot-product attention over a fused QKV tensor, flash-style: each
 * (batch, head) is one work item of the pool, and one thread runs it whole, by blocks of
 * FG_CPU_ATTN_BLOCK query rows: the scores against the keys the block may see are one
 * sgemm, the masked softmax a vectorised pass, the output a second sgemm. Only the block's
 * scores are held (BLOCK x T floats per thread), and the forward keeps the log-sum-exp of
 * each row (B, H, T) for backward, which recomputes the scores a block at a time
 * (FlashAttention-2's recurrence, with gemm tiles instead of a fused kernel): memory grows
 * with T, never with T^2. tests/kernel-lab/attention_lab.c, version 3: a head per thread
 * instead of every small gemm and softmax cut across the pool (two wake-ups per gemm), a
 * fast_exp softmax in 16 lanes, and a backward that runs the query blocks last to first so
 * that the first block written covers every key (no memset of dqkv); version 5, its
 * rowsum(dY * Y) in 16 lanes.
 *
 * qkv (B, T, 3C): q | k | v along the last dimension, head h at columns [h*D, (h+1)*D) of
 * each third, C = H*D. Grouped-query attention (kv_heads KV < H): rows of (H + 2 KV) D, the
 * H query heads, then KV keys, then KV values; query head h reads key/value head h / (H/KV).
 * Its backward runs one item per (batch, key/value head), the group's query heads in turn,
 * so a head's dK and dV are summed by one thread in a fixed order (with KV = H, the same
 * arithmetic as before). y (B, T, C), heads side by side. Scores are scaled by 1/sqrt(D).
 * Attention dropout drops probability (b, h, i, j) when the draw of (seed, offset +
 * ((b*H + h)*T + i)*T + j) says so (fg_cpu_dropout_keep), in forward and backward alike;
 * rowsum(dY * Y) is still the softmax backward's correction term with it.
 *
 * With several items, results do not depend on the thread count: an item's arithmetic is
 * the same on any thread (its gemms run whole on it). A single item runs its gemms on the
 * pool, which splits C into blocks by thread count; OpenBLAS rounds a block's edge tiles its
 * own way, so that case's bits follow the thread count (values within rounding:
 * kernels_cpu.attention_memory checks both). attention_bf16.c runs the same items on bf16
 * storage with bf16 products; attention_impl.h holds what the two share. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "attention_impl.h"
#include "fast_exp.h"
#include "half.h"

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

/* max of s[0, n), 16 lanes at a time */
FG_CPU_VECTOR_CLONES static float fg_cpu_attn_row_max(const float *s, int n)
{
    float lane[FG_CPU_ATTN_LANES];
    for (int l = 0; l < FG_CPU_ATTN_LANES; l++)
        lane[l] = -INFINITY;
    int j = 0;
    for (; j + FG_CPU_ATTN_LANES <= n; j += FG_CPU_ATTN_LANES)
        for (int l = 0; l < FG_CPU_ATTN_LANES; l++)
            lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
    float mx = -INFINITY;
    for (; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    for (int l = 0; l < FG_CPU_ATTN_LANES; l++)
        mx = lane[l] > mx ? lane[l] : mx;
    return mx;
}

/* s[j] = exp(s[j] - mx) over [0, n); returns their sum (16 float lanes, then double) */
FG_CPU_VECTOR_CLONES static double fg_cpu_attn_row_exp(float *s, int n, float mx)
{
    float lane[FG_CPU_ATTN_LANES] = {0};
    int j = 0;
    for (; j + FG_CPU_ATTN_LANES <= n; j += FG_CPU_ATTN_LANES)
        for (int l = 0; l < FG_CPU_ATTN_LANES; l++) {
            float e = fg_cpu_exp(s[j + l] - mx);
            s[j + l] = e;
            lane[l] += e;
        }
    double sum = 0.0;
    for (; j < n; j++) {
        s[j] = fg_cpu_exp(s[j] - mx);
        sum += s[j];
    }
    for (int l = 0; l < FG_CPU_ATTN_LANES; l++)
        sum += lane[l];
    return sum;
}

FG_CPU_VECTOR_CLONES static void fg_cpu_attn_row_scale(float *s, int n, float inv, int ld)
{
    for (int j = 0; j < n; j++)
        s[j] *= inv;
    for (int j = n; j < ld; j++)
        s[j] = 0.0f;
}

void fg_cpu_attn_softmax_rows(const fg_cpu_attn_rows *a, int rows)
{
    for (int r = 0; r < rows; r++) {
        float *s = a->s + (size_t)r * (size_t)a->ld;
        int lim = fg_cpu_attn_limit(a, (size_t)r);
        float mx = fg_cpu_attn_row_max(s, lim);
        double sum = fg_cpu_attn_row_exp(s, lim, mx);
        a->lse[r] = mx + (float)log(sum);
        fg_cpu_attn_row_scale(s, lim, (float)(1.0 / sum), a->ld);
        if (a->dropout > 0.0f)
            for (int j = 0; j < lim; j++)
                s[j] *= fg_cpu_attn_keep(a, (size_t)r, j);
    }
    if (a->p16) /* the block at once: one call, not one per row */
        fg_cpu_bf16_round(a->p16, a->s, (size_t)rows * (size_t)a->ld);
}

/* P = exp(S - lse) over [0, n), dS = P * (dP - delta); zeros to ld */
FG_CPU_VECTOR_CLONES static void fg_cpu_attn_row_grad(float *s, const float *dp, float *ds,
                                                      int n, int ld, float l, float d)
{
    for (int j = 0; j < n; j++) {
        float prob = fg_cpu_exp(s[j] - l);
        s[j] = prob;
        ds[j] = prob * (dp[j] - d);
    }
    for (int j = n; j < ld; j++)
        s[j] = ds[j] = 0.0f;
}

/* P = exp(S - lse) recomputed; with dropout, s keeps the dropped P (for dV) and dP is the
 * gradient through the mask; dS = P * (dP - delta). */
void fg_cpu_attn_backward_rows(const fg_cpu_attn_rows *a, int rows)
{
    for (int r = 0; r < rows; r++) {
        float *s = a->s + (size_t)r * (size_t)a->ld;
        const float *dp = a->dp + (size_t)r * (size_t)a->ld;
        float *ds = a->ds + (size_t)r * (size_t)a->ld;
        int lim = fg_cpu_attn_limit(a, (size_t)r);
        float l = a->lse[r], d = a->delta[r];
        if (a->dropout > 0.0f) {
            for (int j = 0; j < lim; j++) {
                float prob = fg_cpu_exp(s[j] - l), keep = fg_cpu_attn_keep(a, (size_t)r, j);
                s[j] = prob * keep;
                ds[j] = prob * (dp[j] * keep - d);
            }
            for (int j = lim; j < a->ld; j++)
                s[j] = ds[j] = 0.0f;
        } else {
            fg_cpu_attn_row_grad(s, dp, ds, lim, a->ld, l, d);
        }
    }
    if (a->p16) { /* the block at once: one call each, not two per row */
        size_t n = (size_t)rows * (size_t)a->ld;
        fg_cpu_bf16_round(a->p16, a->s, n);
        fg_cpu_bf16_round(a->ds16, a->ds, n);
    }
}

void fg_cpu_attn_set_dropout(fg_cpu_attn_rows *rows, const fg_cpu_attn_shape *a, int b,
                             int h, int i0)
{
    rows->seq = a->seq;
    rows->dropout = a->dropout;
    rows->seed = a->seed;
    rows->first_draw = a->offset + (((uint64_t)b * (uint64_t)a->heads + (uint64_t)h) *
                                         (uint64_t)a->seq + (uint64_t)i0) * (uint64_t)a->seq;
}

/* Workspace slots: one per thread that runs items at once. */
static int fg_cpu_attn_slots(const fg_cpu_attn_shape *a, int threads)
{
    int items = a->batch * a->heads;
    return threads < items ? threads : items;
}

size_t fg_cpu_attn_slot_floats(const fg_cpu_attn_shape *a)
{
    size_t B = FG_CPU_ATTN_BLOCK, T = (size_t)a->seq, D = (size_t)a->head_dim;
    return FG_CPU_ATTN_F32_SLOT(B, T) + FG_CPU_ATTN_BF16_SLOT(B, T, D);
}

size_t fg_cpu_attention_workspace(const fg_cpu_attn_shape *a, int threads)
{
    int slots = fg_cpu_attn_slots(a, threads > 1 ? threads : 1);
    return (size_t)slots * fg_cpu_attn_slot_floats(a) * sizeof(float);
}

static void fg_cpu_attn_forward_item(const fg_cpu_attn_job *j, int b, int h, int slot,
                                     float *s)
{
    const fg_cpu_attn_shape *a = j->a;
    int T = a->seq, D = a->head_dim, C = a->heads * a->head_dim, W = fg_cpu_attn_width(a);
    float scale = 1.0f / sqrtf((float)D);
    const float *row0 = (const float *)j->qkv + (size_t)b * T * W, *q = row0 + (size_t)h * D;
    const float *k = row0 + fg_cpu_attn_k_col(a, h), *v = k + (size_t)fg_cpu_attn_kv(a) * D;
    float *yb = (float *)j->out + (size_t)b * T * C + (size_t)h * D;
    float *lse_bh = j->lse + ((size_t)b * a->heads + (size_t)h) * (size_t)T;
    for (int i0 = 0; i0 < T; i0 += FG_CPU_ATTN_BLOCK) {
        int qn = T - i0 < FG_CPU_ATTN_BLOCK ? T - i0 : FG_CPU_ATTN_BLOCK;
        int kend = a->causal ? i0 + qn : T;
        fg_cpu_gemm_via(a->gemm, slot, j->pool, 0, 1, qn, kend, D, scale, q + (size_t)i0 * W, W,
                        k, W, 0.0f, s, kend);
        fg_cpu_attn_rows rows = {.s = s, .lse = lse_bh + i0, .first_row = i0, .ld = kend,
                                 .causal = a->causal};
        fg_cpu_attn_set_dropout(&rows, a, b, h, i0);
        fg_cpu_attn_softmax_rows(&rows, qn);
        fg_cpu_gemm_via(a->gemm, slot, j->pool, 0, 0, qn, D, kend, 1.0f, s, kend, v, W, 0.0f,
                        yb + (size_t)i0 * C, C);
    }
}

/* delta[i] = sum_d dY[i, d] * Y[i, d] for the head's rows, in 16 double lanes (one double
 * accumulator was a dependency chain: 6% of the backward); f32 rows, or bf16 ones (dy16,
 * y16: their widened values, the products exact in double). */
FG_CPU_VECTOR_CLONES static void fg_cpu_attn_delta_rows(const float *dy, const float *y,
                                                        const uint16_t *dy16,
                                                        const uint16_t *y16, int rows, int D,
                                                        int ld, float *delta)
{
    for (int i = 0; i < rows; i++) {
        size_t at = (size_t)i * ld;
        double lane[FG_CPU_ATTN_LANES] = {0}, acc = 0.0;
        int d = 0;
        if (dy16) {
            const uint16_t *a = dy16 + at, *b = y16 + at;
            for (; d + FG_CPU_ATTN_LANES <= D; d += FG_CPU_ATTN_LANES)
                for (int l = 0; l < FG_CPU_ATTN_LANES; l++)
                    lane[l] += (double)fg_bf16_to_f32(a[d + l]) *
                               (double)fg_bf16_to_f32(b[d + l]);
            for (; d < D; d++)
                acc += (double)fg_bf16_to_f32(a[d]) * (double)fg_bf16_to_f32(b[d]);
        } else {
            const float *a = dy + at, *b = y + at;
            for (; d + FG_CPU_ATTN_LANES <= D; d += FG_CPU_ATTN_LANES)
                for (int l = 0; l < FG_CPU_ATTN_LANES; l++)
                    lane[l] += (double)a[d + l] * (double)b[d + l];
            for (; d < D; d++)
                acc += (double)a[d] * (double)b[d];
        }
        for (int l = 0; l < FG_CPU_ATTN_LANES; l++)
            acc += lane[l];
        delta[i] = (float)acc;
    }
}

void fg_cpu_attn_delta_bf16(const uint16_t *dy, const uint16_t *y, int rows, int D, int ld,
                            float *delta)
{
    fg_cpu_attn_delta_rows(NULL, NULL, dy, y, rows, D, ld, delta);
}

/* One query head h of a (batch, key/value head) item. Query blocks last to first: the last
 * block sees every key (causal or not), so the group's first head overwrites dK and dV
 * (beta 0) and every later block and head adds to them. */
static void fg_cpu_attn_backward_head(const fg_cpu_attn_job *j, int b, int h, int first,
                                      int slot, float *s)
{
    const fg_cpu_attn_shape *a = j->a;
    int T = a->seq, D = a->head_dim, C = a->heads * a->head_dim, W = fg_cpu_attn_width(a);
    float scale = 1.0f / sqrtf((float)D);
    float *dp = s + (size_t)FG_CPU_ATTN_BLOCK * (size_t)T;
    float delta[FG_CPU_ATTN_BLOCK];
    size_t row0 = (size_t)b * T * W, kcol = fg_cpu_attn_k_col(a, h);
    size_t vcol = kcol + (size_t)fg_cpu_attn_kv(a) * D;
    const float *qkv = j->qkv, *y = j->y;
    float *dqkv = j->out;
    const float *q = qkv + row0 + (size_t)h * D, *k = qkv + row0 + kcol, *v = qkv + row0 + vcol;
    float *dq = dqkv + row0 + (size_t)h * D, *dk = dqkv + row0 + kcol, *dv = dqkv + row0 + vcol;
    size_t out = (size_t)b * T * C + (size_t)h * D;
    const float *lse_bh = j->lse + ((size_t)b * a->heads + (size_t)h) * (size_t)T;
    int last = (T - 1) / FG_CPU_ATTN_BLOCK * FG_CPU_ATTN_BLOCK;
    for (int i0 = last; i0 >= 0; i0 -= FG_CPU_ATTN_BLOCK) {
        int qn = T - i0 < FG_CPU_ATTN_BLOCK ? T - i0 : FG_CPU_ATTN_BLOCK;
        int kend = a->causal ? i0 + qn : T;
        float beta = first && i0 == last ? 0.0f : 1.0f;
        const float *dyb = (const float *)j->dy + out + (size_t)i0 * C, *qb = q + (size_t)i0 * W;
        fg_cpu_gemm_via(a->gemm, slot, j->pool, 0, 1, qn, kend, D, scale, qb, W, k, W, 0.0f, s,
                        kend);
        fg_cpu_gemm_via(a->gemm, slot, j->pool, 0, 1, qn, kend, D, 1.0f, dyb, C, v, W, 0.0f, dp,
                        kend);
        fg_cpu_attn_delta_rows(dyb, y + out + (size_t)i0 * C, NULL, NULL, qn, D, C, delta);
        fg_cpu_attn_rows rows = {.s = s, .dp = dp, .ds = dp, .delta = delta,
                                 .lse = (float *)(lse_bh + i0), .first_row = i0, .ld = kend,
                                 .causal = a->causal};
        fg_cpu_attn_set_dropout(&rows, a, b, h, i0);
        fg_cpu_attn_backward_rows(&rows, qn);
        /* dV (+)= P^T dY; dQ = scale dS K; dK (+)= scale dS^T Q */
        fg_cpu_gemm_via(a->gemm, slot, j->pool, 1, 0, kend, D, qn, 1.0f, s, kend, dyb, C, beta,
                        dv, W);
        fg_cpu_gemm_via(a->gemm, slot, j->pool, 0, 0, qn, D, kend, scale, dp, kend, k, W, 0.0f,
                    dq + (size_t)i0 * W, W);
        fg_cpu_gemm_via(a->gemm, slot, j->pool, 1, 0, kend, D, qn, scale, dp, kend, qb, W, beta,
                        dk, W);
    }
}

/* Item (b, kv): the query heads that share key/value head kv, in order. */
static void fg_cpu_attn_backward_item(const fg_cpu_attn_job *j, int b, int kv, int slot,
                                      float *s)
{
    int group = j->a->heads / fg_cpu_attn_kv(j->a);
    for (int g = 0; g < group; g++)
        fg_cpu_attn_backward_head(j, b, kv * group + g, g == 0, slot, s);
}

/* Slot s claims items until none is left; a slot is run by one thread at a time. */
static void fg_cpu_attn_run_slots(void *p, size_t s0, size_t s1)
{
    fg_cpu_attn_job *j = p;
    int items = j->a->batch * j->per_batch;
    for (size_t slot = s0; slot < s1; slot++) {
        float *s = j->ws + slot * fg_cpu_attn_slot_floats(j->a);
        for (;;) {
            int it = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
            if (it >= items)
                break;
            j->item(j, it / j->per_batch, it % j->per_batch, (int)slot, s);
        }
    }
}

/* One slot per thread (a single item's gemms then run on the pool themselves: the pool is
 * idle while one slot runs inline). */
void fg_cpu_attn_run(fg_cpu_attn_job *j)
{
    int slots = fg_cpu_attn_slots(j->a, fg_cpu_pool_threads(j->pool));
    atomic_init(&j->next, 0);
    fg_cpu_parallel_for(j->pool, (size_t)slots, 1, 1, fg_cpu_attn_run_slots, j);
}

void fg_cpu_attention_forward(fg_cpu_pool *pool, const fg_cpu_attn_shape *a, const float *qkv,
                              float *y, float *lse, void *workspace)
{
    fg_cpu_attn_job j = {.pool = pool, .a = a, .qkv = qkv, .out = y, .lse = lse,
                         .ws = workspace, .item = fg_cpu_attn_forward_item,
                         .per_batch = a->heads};
    fg_cpu_attn_run(&j);
}

void fg_cpu_attention_backward(fg_cpu_pool *pool, const fg_cpu_attn_shape *a,
                               const float *qkv, const float *y, const float *lse,
                               const float *dy, float *dqkv, void *workspace)
{
    fg_cpu_attn_job j = {.pool = pool, .a = a, .qkv = qkv, .y = y, .dy = dy, .out = dqkv,
                         .lse = (float *)lse, .ws = workspace,
                         .item = fg_cpu_attn_backward_item, .per_batch = fg_cpu_attn_kv(a)};
    fg_cpu_attn_run(&j);
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
 * rows: the max, fast_exp, a sum in double), then y = P V. */
static void fg_cpu_attn_decode_items(void *p, size_t i0, size_t i1)
{
    const fg_cpu_attn_decode *w = p;
    const fg_cpu_attn_shape *a = w->a;
    int T = a->seq, D = a->head_dim, C = a->heads * a->head_dim, n = w->pos + 1;
    size_t W = (size_t)fg_cpu_attn_width(a);
    float scale = 1.0f / sqrtf((float)D);
    for (size_t i = i0; i < i1; i++) {
        int item = w->h0 + (int)i, b = item / a->heads, h = item % a->heads;
        const float *row0 = w->qkv + (size_t)b * T * W;
        const float *q = row0 + (size_t)w->pos * W + (size_t)h * D;
        const float *k = row0 + fg_cpu_attn_k_col(a, h), *v = k + (size_t)fg_cpu_attn_kv(a) * D;
        float *s = w->s + i * (size_t)T, *y = w->y + (size_t)b * C + (size_t)h * D;
        float mx = -INFINITY;
        for (int j = 0; j < n; j++) {
            float dot = 0.0f;
            for (int d = 0; d < D; d++)
                dot += q[d] * k[(size_t)j * W + d];
            s[j] = dot * scale;
            mx = s[j] > mx ? s[j] : mx;
        }
        double sum = 0.0;
        for (int j = 0; j < n; j++) {
            s[j] = fg_cpu_exp(s[j] - mx); /* the forward's exponential */
            sum += s[j];
        }
        float inv = (float)(1.0 / sum);
        for (int d = 0; d < D; d++)
            y[d] = 0.0f;
        for (int j = 0; j < n; j++) {
            float pj = s[j] * inv;
            const float *vj = v + (size_t)j * W;
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
