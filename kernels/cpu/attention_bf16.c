/* Attention in bf16 storage (cpu_kernels.h's fg_cpu_attention_forward_bf16): attention.c's
 * items, flash-style by blocks of query rows, with the products on bf16 operands. The
 * scores and dP come from the bf16 tensors themselves (strided, no copies); P and dS are
 * rounded to bf16 in the slot before the products that take them, as FlashAttention rounds
 * them on a GPU; every product accumulates in f32. The softmax, its backward and the
 * dropout draws are attention.c's f32 row passes, so bf16 only changes what the products
 * read. Each output is rounded once: a block of Y or dQ after its product, and dK and dV,
 * which every block and every query head of a group add to, after the item's last one (the
 * slot holds them in f32). With several items the bits do not depend on the thread count,
 * as in attention.c. */
#include <math.h>

#include "attention_impl.h"
#include "half.h"

/* A slot's parts after the f32 path's scores and dP (attention_impl.h's layout). */
typedef struct bf16_slot {
    uint16_t *p, *ds; /* BLOCK x seq each */
    float *blk;       /* BLOCK x D: a block of Y or dQ before its rounding */
    float *dk, *dv;   /* seq x D: the item's dK and dV */
    float *wide;      /* a product's operands widened, where no bf16 product runs */
} bf16_slot;

static bf16_slot slot_parts(const fg_cpu_attn_shape *a, float *s)
{
    size_t B = FG_CPU_ATTN_BLOCK, T = (size_t)a->seq, D = (size_t)a->head_dim;
    bf16_slot p;
    p.p = (uint16_t *)(s + FG_CPU_ATTN_F32_SLOT(B, T));
    p.ds = p.p + B * T;
    p.blk = s + FG_CPU_ATTN_F32_SLOT(B, T) + B * T;
    p.dk = p.blk + B * D;
    p.dv = p.dk + T * D;
    p.wide = p.dv + T * D;
    return p;
}

/* rows x cols of src (leading dimension ld) widened into dst (leading dimension cols) */
static void widen_block(float *dst, const uint16_t *src, int rows, int cols, int ld)
{
    for (int r = 0; r < rows; r++)
        fg_cpu_bf16_widen(dst + (size_t)r * (size_t)cols, src + (size_t)r * (size_t)ld,
                          (size_t)cols);
}

/* C = alpha op(A) op(B) + beta C of bf16 A and B into f32 C: the hook's bf16 product where
 * it runs, else A and B widened (exactly) into wide and the f32 product. */
static void product(const fg_cpu_attn_job *j, int slot, int trans_a, int trans_b, int m, int n,
                    int k, float alpha, const uint16_t *a, int lda, const uint16_t *b, int ldb,
                    float beta, float *c, int ldc, float *wide)
{
    const fg_cpu_gemm_hook *hook = j->a->gemm;
    if (hook && hook->run_bf16 &&
        hook->run_bf16(hook->ctx, slot, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                       c, ldc))
        return;
    int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    float *wa = wide, *wb = wide + (size_t)m * (size_t)k;
    widen_block(wa, a, a_rows, a_cols, lda);
    widen_block(wb, b, b_rows, b_cols, ldb);
    fg_cpu_gemm_via(hook, slot, j->pool, trans_a, trans_b, m, n, k, alpha, wa, a_cols, wb,
                    b_cols, beta, c, ldc);
}

/* rows x cols of src (leading dimension cols) rounded into dst (leading dimension ld) */
static void round_rows(uint16_t *dst, int ld, const float *src, int rows, int cols)
{
    fg_cpu_bf16_round_rows(dst, (size_t)ld, src, (size_t)cols, (size_t)rows, (size_t)cols);
}

static void forward_item(const fg_cpu_attn_job *j, int b, int h, int slot, float *s)
{
    const fg_cpu_attn_shape *a = j->a;
    int T = a->seq, D = a->head_dim, C = a->heads * a->head_dim, W = fg_cpu_attn_width(a);
    float scale = 1.0f / sqrtf((float)D);
    const uint16_t *row0 = (const uint16_t *)j->qkv + (size_t)b * T * W;
    const uint16_t *q = row0 + (size_t)h * D, *k = row0 + fg_cpu_attn_k_col(a, h);
    const uint16_t *v = k + (size_t)fg_cpu_attn_kv(a) * D;
    uint16_t *yb = (uint16_t *)j->out + (size_t)b * T * C + (size_t)h * D;
    float *lse_bh = j->lse + ((size_t)b * a->heads + (size_t)h) * (size_t)T;
    bf16_slot w = slot_parts(a, s);
    for (int i0 = 0; i0 < T; i0 += FG_CPU_ATTN_BLOCK) {
        int qn = T - i0 < FG_CPU_ATTN_BLOCK ? T - i0 : FG_CPU_ATTN_BLOCK;
        int kend = a->causal ? i0 + qn : T;
        product(j, slot, 0, 1, qn, kend, D, scale, q + (size_t)i0 * W, W, k, W, 0.0f, s, kend,
                w.wide);
        fg_cpu_attn_rows rows = {.s = s, .lse = lse_bh + i0, .first_row = i0, .ld = kend,
                                 .causal = a->causal, .p16 = w.p};
        fg_cpu_attn_set_dropout(&rows, a, b, h, i0);
        fg_cpu_attn_softmax_rows(&rows, qn);
        product(j, slot, 0, 0, qn, D, kend, 1.0f, w.p, kend, v, W, 0.0f, w.blk, D, w.wide);
        round_rows(yb + (size_t)i0 * C, C, w.blk, qn, D);
    }
}

/* Query head h of a (batch, key/value head) item, its blocks last to first (attention.c's
 * order): the group's first head's last block overwrites the slot's dK and dV (beta 0), every
 * later product adds to them. */
static void backward_head(const fg_cpu_attn_job *j, int b, int h, int first, int slot,
                          float *s)
{
    const fg_cpu_attn_shape *a = j->a;
    int T = a->seq, D = a->head_dim, C = a->heads * a->head_dim, W = fg_cpu_attn_width(a);
    float scale = 1.0f / sqrtf((float)D);
    float *dp = s + (size_t)FG_CPU_ATTN_BLOCK * (size_t)T;
    float delta[FG_CPU_ATTN_BLOCK];
    bf16_slot w = slot_parts(a, s);
    size_t row0 = (size_t)b * T * W, kcol = fg_cpu_attn_k_col(a, h);
    const uint16_t *qkv = j->qkv, *y = j->y, *dy = j->dy;
    const uint16_t *q = qkv + row0 + (size_t)h * D, *k = qkv + row0 + kcol;
    const uint16_t *v = k + (size_t)fg_cpu_attn_kv(a) * D;
    uint16_t *dq = (uint16_t *)j->out + row0 + (size_t)h * D;
    size_t out = (size_t)b * T * C + (size_t)h * D;
    const float *lse_bh = j->lse + ((size_t)b * a->heads + (size_t)h) * (size_t)T;
    int last = (T - 1) / FG_CPU_ATTN_BLOCK * FG_CPU_ATTN_BLOCK;
    for (int i0 = last; i0 >= 0; i0 -= FG_CPU_ATTN_BLOCK) {
        int qn = T - i0 < FG_CPU_ATTN_BLOCK ? T - i0 : FG_CPU_ATTN_BLOCK;
        int kend = a->causal ? i0 + qn : T;
        float beta = first && i0 == last ? 0.0f : 1.0f;
        const uint16_t *dyb = dy + out + (size_t)i0 * C, *qb = q + (size_t)i0 * W;
        product(j, slot, 0, 1, qn, kend, D, scale, qb, W, k, W, 0.0f, s, kend, w.wide);
        product(j, slot, 0, 1, qn, kend, D, 1.0f, dyb, C, v, W, 0.0f, dp, kend, w.wide);
        fg_cpu_attn_delta_bf16(dyb, y + out + (size_t)i0 * C, qn, D, C, delta);
        fg_cpu_attn_rows rows = {.s = s, .dp = dp, .ds = dp, .delta = delta,
                                 .lse = (float *)(lse_bh + i0), .first_row = i0, .ld = kend,
                                 .causal = a->causal, .p16 = w.p, .ds16 = w.ds};
        fg_cpu_attn_set_dropout(&rows, a, b, h, i0);
        fg_cpu_attn_backward_rows(&rows, qn);
        /* dV (+)= P^T dY; dQ = scale dS K; dK (+)= scale dS^T Q */
        product(j, slot, 1, 0, kend, D, qn, 1.0f, w.p, kend, dyb, C, beta, w.dv, D, w.wide);
        product(j, slot, 0, 0, qn, D, kend, scale, w.ds, kend, k, W, 0.0f, w.blk, D, w.wide);
        round_rows(dq + (size_t)i0 * W, W, w.blk, qn, D);
        product(j, slot, 1, 0, kend, D, qn, scale, w.ds, kend, qb, W, beta, w.dk, D, w.wide);
    }
}

/* Item (b, kv): the query heads that share key/value head kv, then dK and dV rounded. */
static void backward_item(const fg_cpu_attn_job *j, int b, int kv, int slot, float *s)
{
    const fg_cpu_attn_shape *a = j->a;
    int T = a->seq, D = a->head_dim, W = fg_cpu_attn_width(a);
    int group = a->heads / fg_cpu_attn_kv(a);
    for (int g = 0; g < group; g++)
        backward_head(j, b, kv * group + g, g == 0, slot, s);
    bf16_slot w = slot_parts(a, s);
    uint16_t *dk = (uint16_t *)j->out + (size_t)b * T * W + (size_t)(a->heads + kv) * D;
    round_rows(dk, W, w.dk, T, D);
    round_rows(dk + (size_t)fg_cpu_attn_kv(a) * D, W, w.dv, T, D);
}

void fg_cpu_attention_forward_bf16(fg_cpu_pool *pool, const fg_cpu_attn_shape *a,
                                   const uint16_t *qkv, uint16_t *y, float *lse,
                                   void *workspace)
{
    fg_cpu_attn_job j = {.pool = pool, .a = a, .qkv = qkv, .out = y, .lse = lse,
                         .ws = workspace, .item = forward_item, .per_batch = a->heads};
    fg_cpu_attn_run(&j);
}

void fg_cpu_attention_backward_bf16(fg_cpu_pool *pool, const fg_cpu_attn_shape *a,
                                    const uint16_t *qkv, const uint16_t *y, const float *lse,
                                    const uint16_t *dy, uint16_t *dqkv, void *workspace)
{
    fg_cpu_attn_job j = {.pool = pool, .a = a, .qkv = qkv, .y = y, .dy = dy, .out = dqkv,
                         .lse = (float *)lse, .ws = workspace, .item = backward_item,
                         .per_batch = fg_cpu_attn_kv(a)};
    fg_cpu_attn_run(&j);
}
