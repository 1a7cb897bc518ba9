/* Kernel lab: causal multi-head attention forward + backward over a fused QKV tensor
 * (kernels/cpu/attention.c), the language models' largest op outside the linear layers'
 * gemms. Shapes: the bench_lm GPTs (head_dim 32 at T = 64, head_dim 64 at T = 256).
 *
 *   version 0  reference: one query row at a time, scores, softmax, P V; backward by rows
 *   version 1  kernels/cpu/attention.c as of d8ca546: blocks of 64 query rows per (batch,
 *              head), every gemm and every softmax cut across the pool (2 wake-ups each)
 *   version 2  a (batch, head) per thread, its gemms and softmax inline; libm expf, memset
 *   version 3  version 2 with a 16-lane fast_exp softmax and the backward's query blocks last
 *              to first (the first covers every key: beta 0, no memset of dqkv)
 *   version 4  version 3 with blocks of 128 query rows (the gemms' shapes twice as tall)
 *   version 5  version 3 with the backward's rowsum(dY * Y) in 16 double lanes (a single
 *              double accumulator was 6% of the backward, perf)
 *              <- the winner, now kernels/cpu/attention.c
 *   version 6  version 5 whose backward runs by blocks of 64 keys against every query that
 *              sees them (FlashAttention-2's order): dK, dV one gemm each with k = T - j0
 *              instead of five gemms with k = 64 per query block: on a quiet machine
 *              B16 H6 T256 D64 takes 25.5 ms against version 5's 26.5 (CPU 50.1 against
 *              54.5 ms), 4%; not taken yet (dropout's draws and the workspace would change)
 *
 * Versions 1-4 change summation orders (gemm tiles, lane sums, block order), so they are
 * checked against the reference within a tolerance: 2e-5 of the largest value of y and of
 * each third of dqkv. The product must also give bitwise the same y and dqkv on 1 and 2
 * threads.
 *
 *   attention_lab check            every version against the reference (kernel_lab.attention)
 *   attention_lab time [B H T D]   median ms of forward + backward per version, and the
 *                                  median CPU ms of both threads (robust to other load) */
#include "lab.h" /* first: it sets _POSIX_C_SOURCE */

#include <math.h>
#include <stdatomic.h>

#include "cpu_kernels.h"
#include "fast_exp.h"

typedef struct lab_attn {
    int B, H, T, D;
} lab_attn;

#define LAB_BLOCK_MAX 128

/* ---- version 0 ------------------------------------------------------------------------- */

static void v0_forward(const lab_attn *a, const float *qkv, float *y, float *lse, float *p)
{
    int T = a->T, D = a->D, C = a->H * a->D;
    float scale = 1.0f / sqrtf((float)D);
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++)
            for (int i = 0; i < T; i++) {
                const float *q = qkv + ((size_t)b * T + i) * 3 * C + (size_t)h * D;
                float mx = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * D;
                    float dot = 0.0f;
                    for (int d = 0; d < D; d++)
                        dot += q[d] * k[d];
                    p[j] = dot * scale;
                    mx = p[j] > mx ? p[j] : mx;
                }
                double sum = 0.0;
                for (int j = 0; j <= i; j++) {
                    p[j] = expf(p[j] - mx);
                    sum += p[j];
                }
                float *yi = y + ((size_t)b * T + i) * C + (size_t)h * D;
                for (int d = 0; d < D; d++)
                    yi[d] = 0.0f;
                for (int j = 0; j <= i; j++) {
                    const float *v = qkv + ((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * D;
                    float pj = (float)(p[j] / sum);
                    for (int d = 0; d < D; d++)
                        yi[d] += pj * v[d];
                }
                lse[((size_t)b * a->H + h) * T + i] = mx + (float)log(sum);
            }
}

static void v0_backward(const lab_attn *a, const float *qkv, const float *y, const float *lse,
                        const float *dy, float *dqkv)
{
    int T = a->T, D = a->D, C = a->H * a->D;
    float scale = 1.0f / sqrtf((float)D);
    memset(dqkv, 0, (size_t)a->B * T * 3 * C * sizeof *dqkv);
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++)
            for (int i = 0; i < T; i++) {
                size_t row = ((size_t)b * T + i) * 3 * C + (size_t)h * D;
                const float *q = qkv + row, *dyi = dy + ((size_t)b * T + i) * C + (size_t)h * D;
                const float *yi = y + ((size_t)b * T + i) * C + (size_t)h * D;
                float l = lse[((size_t)b * a->H + h) * T + i], delta = 0.0f;
                for (int d = 0; d < D; d++)
                    delta += dyi[d] * yi[d];
                for (int j = 0; j <= i; j++) {
                    size_t kj = ((size_t)b * T + j) * 3 * C + (size_t)h * D;
                    const float *k = qkv + kj + C, *v = qkv + kj + 2 * C;
                    float dot = 0.0f, dp = 0.0f;
                    for (int d = 0; d < D; d++) {
                        dot += q[d] * k[d];
                        dp += dyi[d] * v[d];
                    }
                    float prob = expf(dot * scale - l), ds = prob * (dp - delta) * scale;
                    for (int d = 0; d < D; d++) {
                        dqkv[row + d] += ds * k[d];
                        dqkv[kj + C + d] += ds * q[d];
                        dqkv[kj + 2 * C + d] += prob * dyi[d];
                    }
                }
            }
}

/* ---- version 1: the product as of d8ca546 (dropout left out: the lab runs without) ------ */

typedef struct v1_rows {
    float *s;
    const float *dp;
    float *ds;
    const float *delta;
    float *lse;
    int first_row, ld;
} v1_rows;

static void v1_softmax_rows(void *p, size_t r0, size_t r1)
{
    const v1_rows *a = p;
    for (size_t r = r0; r < r1; r++) {
        float *s = a->s + r * (size_t)a->ld;
        int lim = a->first_row + (int)r + 1;
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
    }
}

static void v1_backward_rows(void *p, size_t r0, size_t r1)
{
    const v1_rows *a = p;
    for (size_t r = r0; r < r1; r++) {
        float *s = a->s + r * (size_t)a->ld;
        const float *dp = a->dp + r * (size_t)a->ld;
        float *ds = a->ds + r * (size_t)a->ld;
        int lim = a->first_row + (int)r + 1;
        float l = a->lse[r], d = a->delta[r];
        for (int j = 0; j < lim; j++) {
            s[j] = expf(s[j] - l);
            ds[j] = s[j] * (dp[j] - d);
        }
        for (int j = lim; j < a->ld; j++)
            s[j] = ds[j] = 0.0f;
    }
}

static void v1_rows_run(fg_cpu_pool *pool, v1_rows *a, int rows, fg_cpu_range_fn fn)
{
    size_t grain = (FG_CPU_GRAIN / 8) / (size_t)a->ld + 1;
    fg_cpu_parallel_for(pool, (size_t)rows, grain, 1, fn, a);
}

static void v1_forward(fg_cpu_pool *pool, const lab_attn *a, const float *qkv, float *y,
                       float *lse, float *s)
{
    int T = a->T, D = a->D, C = a->H * a->D;
    float scale = 1.0f / sqrtf((float)D);
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++) {
            const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * D;
            const float *k = q + C, *v = q + 2 * C;
            float *yb = y + (size_t)b * T * C + (size_t)h * D;
            float *lse_bh = lse + ((size_t)b * a->H + (size_t)h) * (size_t)T;
            for (int i0 = 0; i0 < T; i0 += 64) {
                int qn = T - i0 < 64 ? T - i0 : 64, kend = i0 + qn;
                fg_cpu_gemm(pool, 0, 1, qn, kend, D, scale, q + (size_t)i0 * 3 * C, 3 * C, k,
                            3 * C, 0.0f, s, kend);
                v1_rows rows = {.s = s, .lse = lse_bh + i0, .first_row = i0, .ld = kend};
                v1_rows_run(pool, &rows, qn, v1_softmax_rows);
                fg_cpu_gemm(pool, 0, 0, qn, D, kend, 1.0f, s, kend, v, 3 * C, 0.0f,
                            yb + (size_t)i0 * C, C);
            }
        }
}

static void lab_delta(const float *dy, const float *y, int rows, int D, int ld, float *delta)
{
    for (int i = 0; i < rows; i++) {
        double acc = 0.0;
        for (int d = 0; d < D; d++)
            acc += (double)dy[(size_t)i * ld + d] * (double)y[(size_t)i * ld + d];
        delta[i] = (float)acc;
    }
}

static void v1_backward(fg_cpu_pool *pool, const lab_attn *a, const float *qkv, const float *y,
                        const float *lse, const float *dy, float *dqkv, float *s)
{
    int T = a->T, D = a->D, C = a->H * a->D;
    float scale = 1.0f / sqrtf((float)D);
    float *dp = s + (size_t)64 * (size_t)T;
    float delta[64];
    memset(dqkv, 0, (size_t)a->B * T * 3 * C * sizeof *dqkv);
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++) {
            size_t base = (size_t)b * T * 3 * C + (size_t)h * D;
            const float *q = qkv + base, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
            size_t out = (size_t)b * T * C + (size_t)h * D;
            const float *lse_bh = lse + ((size_t)b * a->H + (size_t)h) * (size_t)T;
            for (int i0 = 0; i0 < T; i0 += 64) {
                int qn = T - i0 < 64 ? T - i0 : 64, kend = i0 + qn;
                const float *dyb = dy + out + (size_t)i0 * C;
                fg_cpu_gemm(pool, 0, 1, qn, kend, D, scale, q + (size_t)i0 * 3 * C, 3 * C, k,
                            3 * C, 0.0f, s, kend);
                fg_cpu_gemm(pool, 0, 1, qn, kend, D, 1.0f, dyb, C, v, 3 * C, 0.0f, dp, kend);
                lab_delta(dyb, y + out + (size_t)i0 * C, qn, D, C, delta);
                v1_rows rows = {.s = s, .dp = dp, .ds = dp, .delta = delta,
                                .lse = (float *)(lse_bh + i0), .first_row = i0, .ld = kend};
                v1_rows_run(pool, &rows, qn, v1_backward_rows);
                fg_cpu_gemm(pool, 1, 0, kend, D, qn, 1.0f, s, kend, dyb, C, 1.0f, dv, 3 * C);
                fg_cpu_gemm(pool, 0, 0, qn, D, kend, scale, dp, kend, k, 3 * C, 0.0f,
                            dq + (size_t)i0 * 3 * C, 3 * C);
                fg_cpu_gemm(pool, 1, 0, kend, D, qn, scale, dp, kend, q + (size_t)i0 * 3 * C,
                            3 * C, 1.0f, dk, 3 * C);
            }
        }
}

/* ---- versions 2-4: a (batch, head) per thread ----------------------------------------- */

typedef struct cand_job {
    fg_cpu_pool *pool;
    const lab_attn *a;
    int block, fast; /* 0 libm softmax (v2), 1 lanes (v3, v4), 2 and delta (v5), 3 keys (v6) */
    const float *qkv, *y, *dy, *lse_in;
    float *out, *lse, *ws;
    int backward;
    atomic_int next;
} cand_job;

LAB_CLONES static double cand_exp_row(float *s, int n, float mx)
{
    float lane[16] = {0};
    int j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++) {
            float e = fg_cpu_exp(s[j + l] - mx);
            s[j + l] = e;
            lane[l] += e;
        }
    double sum = 0.0;
    for (; j < n; j++) {
        s[j] = fg_cpu_exp(s[j] - mx);
        sum += s[j];
    }
    for (int l = 0; l < 16; l++)
        sum += lane[l];
    return sum;
}

LAB_CLONES static float cand_max_row(const float *s, int n)
{
    float lane[16];
    for (int l = 0; l < 16; l++)
        lane[l] = -INFINITY;
    int j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++)
            lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
    float mx = -INFINITY;
    for (; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    for (int l = 0; l < 16; l++)
        mx = lane[l] > mx ? lane[l] : mx;
    return mx;
}

LAB_CLONES static void cand_scale_row(float *s, int n, float inv, int ld)
{
    for (int j = 0; j < n; j++)
        s[j] *= inv;
    for (int j = n; j < ld; j++)
        s[j] = 0.0f;
}

LAB_CLONES static void cand_grad_row(float *s, float *ds, int n, int ld, float l, float d)
{
    for (int j = 0; j < n; j++) {
        float prob = fg_cpu_exp(s[j] - l);
        s[j] = prob;
        ds[j] = prob * (ds[j] - d);
    }
    for (int j = n; j < ld; j++)
        s[j] = ds[j] = 0.0f;
}

LAB_CLONES static void cand_delta_lanes(const float *dy, const float *y, int rows, int D, int ld,
                                        float *delta)
{
    for (int i = 0; i < rows; i++) {
        const float *a = dy + (size_t)i * ld, *b = y + (size_t)i * ld;
        double lane[16] = {0}, acc = 0.0;
        int d = 0;
        for (; d + 16 <= D; d += 16)
            for (int l = 0; l < 16; l++)
                lane[l] += (double)a[d + l] * (double)b[d + l];
        for (; d < D; d++)
            acc += (double)a[d] * (double)b[d];
        for (int l = 0; l < 16; l++)
            acc += lane[l];
        delta[i] = (float)acc;
    }
}

static void cand_softmax(const cand_job *j, float *s, int i0, int qn, int ld, float *lse)
{
    for (int r = 0; r < qn; r++) {
        float *row = s + (size_t)r * ld;
        int lim = i0 + r + 1;
        if (!j->fast) {
            v1_rows one = {.s = row, .lse = lse + r, .first_row = i0 + r, .ld = ld};
            v1_softmax_rows(&one, 0, 1);
            continue;
        }
        float mx = cand_max_row(row, lim);
        double sum = cand_exp_row(row, lim, mx);
        cand_scale_row(row, lim, (float)(1.0 / sum), ld);
        lse[r] = mx + (float)log(sum);
    }
}

static void cand_forward_item(const cand_job *j, int b, int h, float *s)
{
    const lab_attn *a = j->a;
    int T = a->T, D = a->D, C = a->H * a->D, B = j->block;
    float scale = 1.0f / sqrtf((float)D);
    const float *q = j->qkv + (size_t)b * T * 3 * C + (size_t)h * D;
    const float *k = q + C, *v = q + 2 * C;
    float *yb = j->out + (size_t)b * T * C + (size_t)h * D;
    float *lse_bh = j->lse + ((size_t)b * a->H + (size_t)h) * (size_t)T;
    for (int i0 = 0; i0 < T; i0 += B) {
        int qn = T - i0 < B ? T - i0 : B, kend = i0 + qn;
        fg_cpu_gemm(j->pool, 0, 1, qn, kend, D, scale, q + (size_t)i0 * 3 * C, 3 * C, k, 3 * C,
                    0.0f, s, kend);
        cand_softmax(j, s, i0, qn, kend, lse_bh + i0);
        fg_cpu_gemm(j->pool, 0, 0, qn, D, kend, 1.0f, s, kend, v, 3 * C, 0.0f,
                    yb + (size_t)i0 * C, C);
    }
}

static void cand_backward_item(const cand_job *j, int b, int h, float *s)
{
    const lab_attn *a = j->a;
    int T = a->T, D = a->D, C = a->H * a->D, B = j->block;
    float scale = 1.0f / sqrtf((float)D);
    float *dp = s + (size_t)B * (size_t)T;
    float delta[LAB_BLOCK_MAX];
    size_t base = (size_t)b * T * 3 * C + (size_t)h * D;
    const float *q = j->qkv + base, *k = q + C, *v = q + 2 * C;
    float *dq = j->out + base, *dk = dq + C, *dv = dq + 2 * C;
    size_t out = (size_t)b * T * C + (size_t)h * D;
    const float *lse_bh = j->lse_in + ((size_t)b * a->H + (size_t)h) * (size_t)T;
    int last = (T - 1) / B * B;
    /* version 2 keeps the forward order over a zeroed dqkv; 3 and 4 run last to first */
    for (int n = 0; n * B < T; n++) {
        int i0 = j->fast ? last - n * B : n * B;
        int qn = T - i0 < B ? T - i0 : B, kend = i0 + qn;
        float beta = j->fast && n == 0 ? 0.0f : 1.0f;
        const float *dyb = j->dy + out + (size_t)i0 * C, *qb = q + (size_t)i0 * 3 * C;
        fg_cpu_gemm(j->pool, 0, 1, qn, kend, D, scale, qb, 3 * C, k, 3 * C, 0.0f, s, kend);
        fg_cpu_gemm(j->pool, 0, 1, qn, kend, D, 1.0f, dyb, C, v, 3 * C, 0.0f, dp, kend);
        if (j->fast == 2)
            cand_delta_lanes(dyb, j->y + out + (size_t)i0 * C, qn, D, C, delta);
        else
            lab_delta(dyb, j->y + out + (size_t)i0 * C, qn, D, C, delta);
        if (j->fast) {
            for (int r = 0; r < qn; r++)
                cand_grad_row(s + (size_t)r * kend, dp + (size_t)r * kend, i0 + r + 1, kend,
                              lse_bh[i0 + r], delta[r]);
        } else {
            v1_rows rows = {.s = s, .dp = dp, .ds = dp, .delta = delta,
                            .lse = (float *)(lse_bh + i0), .first_row = i0, .ld = kend};
            v1_backward_rows(&rows, 0, (size_t)qn);
        }
        fg_cpu_gemm(j->pool, 1, 0, kend, D, qn, 1.0f, s, kend, dyb, C, beta, dv, 3 * C);
        fg_cpu_gemm(j->pool, 0, 0, qn, D, kend, scale, dp, kend, k, 3 * C, 0.0f,
                    dq + (size_t)i0 * 3 * C, 3 * C);
        fg_cpu_gemm(j->pool, 1, 0, kend, D, qn, scale, dp, kend, qb, 3 * C, beta, dk, 3 * C);
    }
}

/* version 6: the backward by blocks of keys (FlashAttention-2's order): key block j0 against
 * every query that sees it, [j0, T), so dK and dV of the block are one gemm each with
 * k = T - j0 (not 64), written once; dQ[j0, T) accumulates (the first block, j0 = 0,
 * covers every query: beta 0). delta for the head's T rows first, after the scores. */
static void cand_backward_keys(const cand_job *j, int b, int h, float *s)
{
    const lab_attn *a = j->a;
    int T = a->T, D = a->D, C = a->H * a->D, B = j->block;
    float scale = 1.0f / sqrtf((float)D);
    float *dp = s + (size_t)B * (size_t)T, *delta = dp + (size_t)B * (size_t)T;
    size_t base = (size_t)b * T * 3 * C + (size_t)h * D;
    const float *q = j->qkv + base, *k = q + C, *v = q + 2 * C;
    float *dq = j->out + base, *dk = dq + C, *dv = dq + 2 * C;
    size_t out = (size_t)b * T * C + (size_t)h * D;
    const float *lse_bh = j->lse_in + ((size_t)b * a->H + (size_t)h) * (size_t)T;
    cand_delta_lanes(j->dy + out, j->y + out, T, D, C, delta);
    for (int j0 = 0; j0 < T; j0 += B) {
        int kn = T - j0 < B ? T - j0 : B, qn = T - j0;
        const float *dyb = j->dy + out + (size_t)j0 * C, *qb = q + (size_t)j0 * 3 * C;
        const float *kb = k + (size_t)j0 * 3 * C, *vb = v + (size_t)j0 * 3 * C;
        fg_cpu_gemm(j->pool, 0, 1, qn, kn, D, scale, qb, 3 * C, kb, 3 * C, 0.0f, s, kn);
        fg_cpu_gemm(j->pool, 0, 1, qn, kn, D, 1.0f, dyb, C, vb, 3 * C, 0.0f, dp, kn);
        for (int r = 0; r < qn; r++) {
            int lim = r + 1 < kn ? r + 1 : kn;
            cand_grad_row(s + (size_t)r * kn, dp + (size_t)r * kn, lim, kn, lse_bh[j0 + r],
                          delta[j0 + r]);
        }
        fg_cpu_gemm(j->pool, 1, 0, kn, D, qn, 1.0f, s, kn, dyb, C, 0.0f,
                    dv + (size_t)j0 * 3 * C, 3 * C);
        fg_cpu_gemm(j->pool, 1, 0, kn, D, qn, scale, dp, kn, qb, 3 * C, 0.0f,
                    dk + (size_t)j0 * 3 * C, 3 * C);
        fg_cpu_gemm(j->pool, 0, 0, qn, D, kn, scale, dp, kn, kb, 3 * C, j0 == 0 ? 0.0f : 1.0f,
                    dq + (size_t)j0 * 3 * C, 3 * C);
    }
}

static void cand_slots(void *p, size_t s0, size_t s1)
{
    cand_job *j = p;
    int items = j->a->B * j->a->H;
    for (size_t slot = s0; slot < s1; slot++) {
        float *s = j->ws + slot * (2 * (size_t)j->block + 1) * (size_t)j->a->T;
        for (;;) {
            int it = atomic_fetch_add(&j->next, 1);
            if (it >= items)
                break;
            if (j->backward && j->fast == 3)
                cand_backward_keys(j, it / j->a->H, it % j->a->H, s);
            else if (j->backward)
                cand_backward_item(j, it / j->a->H, it % j->a->H, s);
            else
                cand_forward_item(j, it / j->a->H, it % j->a->H, s);
        }
    }
}

static void cand_run(fg_cpu_pool *pool, const lab_attn *a, int block, int fast, int backward,
                     const float *qkv, const float *y, const float *lse_in, const float *dy,
                     float *out, float *lse, float *ws)
{
    int items = a->B * a->H, threads = fg_cpu_pool_threads(pool);
    int slots = threads < items ? threads : items;
    cand_job j = {.pool = pool, .a = a, .block = block, .fast = fast, .qkv = qkv, .y = y,
                  .dy = dy, .lse_in = lse_in, .out = out, .lse = lse, .ws = ws,
                  .backward = backward};
    atomic_init(&j.next, 0);
    if (backward && !fast)
        memset(out, 0, (size_t)a->B * a->T * 3 * a->H * a->D * sizeof *out);
    fg_cpu_parallel_for(pool, (size_t)slots, 1, 1, cand_slots, &j);
}

/* ---- the versions ------------------------------------------------------------------------ */

typedef struct lab_bufs {
    const float *qkv, *dy;
    float *y, *lse, *dqkv, *ws;
} lab_bufs;

typedef void (*lab_attn_fn)(fg_cpu_pool *pool, const lab_attn *a, lab_bufs *m);

static void run_v0(fg_cpu_pool *pool, const lab_attn *a, lab_bufs *m)
{
    (void)pool;
    v0_forward(a, m->qkv, m->y, m->lse, m->ws);
    v0_backward(a, m->qkv, m->y, m->lse, m->dy, m->dqkv);
}

static void run_v1(fg_cpu_pool *pool, const lab_attn *a, lab_bufs *m)
{
    v1_forward(pool, a, m->qkv, m->y, m->lse, m->ws);
    v1_backward(pool, a, m->qkv, m->y, m->lse, m->dy, m->dqkv, m->ws);
}

static void run_cand(fg_cpu_pool *pool, const lab_attn *a, lab_bufs *m, int block, int fast)
{
    cand_run(pool, a, block, fast, 0, m->qkv, NULL, NULL, NULL, m->y, m->lse, m->ws);
    cand_run(pool, a, block, fast, 1, m->qkv, m->y, m->lse, m->dy, m->dqkv, NULL, m->ws);
}

static void run_v2(fg_cpu_pool *pool, const lab_attn *a, lab_bufs *m) { run_cand(pool, a, m, 64, 0); }
static void run_v3(fg_cpu_pool *pool, const lab_attn *a, lab_bufs *m) { run_cand(pool, a, m, 64, 1); }
static void run_v4(fg_cpu_pool *pool, const lab_attn *a, lab_bufs *m) { run_cand(pool, a, m, 128, 1); }
static void run_v5(fg_cpu_pool *pool, const lab_attn *a, lab_bufs *m) { run_cand(pool, a, m, 64, 2); }
static void run_v6(fg_cpu_pool *pool, const lab_attn *a, lab_bufs *m) { run_cand(pool, a, m, 64, 3); }

static void run_product(fg_cpu_pool *pool, const lab_attn *a, lab_bufs *m)
{
    fg_cpu_attn_shape s = {.batch = a->B, .seq = a->T, .heads = a->H, .head_dim = a->D,
                           .causal = 1};
    fg_cpu_attention_forward(pool, &s, m->qkv, m->y, m->lse, m->ws);
    fg_cpu_attention_backward(pool, &s, m->qkv, m->y, m->lse, m->dy, m->dqkv, m->ws);
}

static const struct {
    const char *name;
    lab_attn_fn fn;
} versions[] = {
    { "v0 reference", run_v0 },
    { "v1 gemms on the pool", run_v1 },
    { "v2 a head per thread", run_v2 },
    { "v3 v2 + fast softmax", run_v3 },
    { "v4 v3, 128-row blocks", run_v4 },
    { "v5 v3 + delta in lanes", run_v5 },
    { "v6 v5, backward by keys", run_v6 },
    { "kernels/cpu now", run_product },
};
#define NVERSIONS (sizeof versions / sizeof versions[0])

typedef struct lab_case {
    lab_attn a;
    float *qkv, *dy, *ws, *y0, *lse0, *dqkv0;
    size_t nq, ny;
} lab_case;

static void case_init(lab_case *c, lab_attn a, int threads)
{
    c->a = a;
    c->nq = (size_t)a.B * a.T * 3 * a.H * a.D;
    c->ny = (size_t)a.B * a.T * a.H * a.D;
    c->qkv = lab_alloc(c->nq), c->dy = lab_alloc(c->ny);
    lab_fill(c->qkv, c->nq, 7);
    for (size_t i = 0; i < c->nq; i++)
        c->qkv[i] *= 3.0f; /* scores spread over several units: a peaked softmax too */
    lab_fill(c->dy, c->ny, 8);
    fg_cpu_attn_shape s = {.batch = a.B, .seq = a.T, .heads = a.H, .head_dim = a.D};
    size_t product = fg_cpu_attention_workspace(&s, threads) / sizeof(float);
    size_t cand = (size_t)threads * (2 * LAB_BLOCK_MAX + 1) * (size_t)a.T;
    c->ws = lab_alloc(product > cand ? product : cand);
    c->y0 = lab_alloc(c->ny), c->dqkv0 = lab_alloc(c->nq);
    c->lse0 = lab_alloc((size_t)a.B * a.H * a.T);
}

static void case_free(lab_case *c)
{
    free(c->qkv), free(c->dy), free(c->ws), free(c->y0), free(c->lse0), free(c->dqkv0);
}

/* the worst of y's and each third of dqkv's errors (each relative to its own scale) */
static double case_error(const lab_case *c, const float *y, const float *dqkv)
{
    double worst = lab_max_rel(y, c->y0, c->ny);
    int C = c->a.H * c->a.D;
    float *part = lab_alloc(c->ny), *ref = lab_alloc(c->ny);
    for (int t = 0; t < 3; t++) {
        for (size_t r = 0; r < (size_t)c->a.B * c->a.T; r++) {
            memcpy(part + r * C, dqkv + r * 3 * C + (size_t)t * C, (size_t)C * sizeof *part);
            memcpy(ref + r * C, c->dqkv0 + r * 3 * C + (size_t)t * C, (size_t)C * sizeof *ref);
        }
        double e = lab_max_rel(part, ref, c->ny);
        worst = e > worst || e != e ? e : worst;
    }
    free(part), free(ref);
    return worst;
}

static int check(fg_cpu_pool *pool, fg_cpu_pool *one)
{
    const lab_attn shapes[] = { {2, 2, 64, 32}, {1, 3, 256, 64}, {2, 1, 150, 16}, {3, 1, 1, 8} };
    const double tol = 2e-5;
    int bad = 0;
    double worst_all = 0.0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        lab_case c;
        case_init(&c, shapes[sh], 2);
        float *y = lab_alloc(c.ny), *dqkv = lab_alloc(c.nq), *lse = lab_alloc(c.ny);
        lab_bufs m0 = {c.qkv, c.dy, c.y0, c.lse0, c.dqkv0, c.ws};
        run_v0(pool, &c.a, &m0);
        for (size_t v = 1; v < NVERSIONS; v++) {
            memset(dqkv, 0xff, c.nq * sizeof *dqkv); /* NaN: every element must be written */
            lab_bufs m = {c.qkv, c.dy, y, lse, dqkv, c.ws};
            versions[v].fn(pool, &c.a, &m);
            double e = case_error(&c, y, dqkv);
            worst_all = e > worst_all ? e : worst_all;
            if (!(e < tol)) {
                printf("FAIL %s, B%d H%d T%d D%d: max relative error %.3g (tolerance %g)\n",
                       versions[v].name, c.a.B, c.a.H, c.a.T, c.a.D, e, tol);
                bad = 1;
            }
        }
        /* the product on one thread: bitwise what it gave on two */
        float *y1 = lab_alloc(c.ny), *dqkv1 = lab_alloc(c.nq);
        lab_bufs m1 = {c.qkv, c.dy, y1, lse, dqkv1, c.ws};
        run_product(one, &c.a, &m1);
        if (lab_first_diff(y, y1, c.ny) < c.ny || lab_first_diff(dqkv, dqkv1, c.nq) < c.nq) {
            printf("FAIL kernels/cpu now, B%d H%d T%d D%d: 1 and 2 threads differ\n", c.a.B,
                   c.a.H, c.a.T, c.a.D);
            bad = 1;
        }
        free(y1), free(dqkv1), free(y), free(dqkv), free(lse);
        case_free(&c);
    }
    if (!bad)
        printf("attention lab: %zu versions x %zu shapes within %g of the reference (worst "
               "%.2e); the product bitwise the same on 1 and 2 threads\n", NVERSIONS - 1,
               sizeof shapes / sizeof shapes[0], tol, worst_all);
    return bad;
}

/* Rounds of forward + backward, the versions taking turns; the median and fastest round. */
static void time_versions(fg_cpu_pool *pool, lab_attn a)
{
    enum { ROUNDS = 11 };
    lab_case c;
    case_init(&c, a, fg_cpu_pool_threads(pool));
    float *y = lab_alloc(c.ny), *dqkv = lab_alloc(c.nq), *lse = lab_alloc(c.ny);
    static double t[NVERSIONS][ROUNDS], cpu[NVERSIONS][ROUNDS];
    int calls = (int)(2e7 / ((double)a.B * a.H * a.T * a.T * a.D)) + 1;
    for (int r = 0; r < ROUNDS; r++)
        for (size_t v = 1; v < NVERSIONS; v++) {
            lab_bufs m = {c.qkv, c.dy, y, lse, dqkv, c.ws};
            double t0 = lab_now(), c0 = lab_cpu_now();
            for (int k = 0; k < calls; k++)
                versions[v].fn(pool, &a, &m);
            t[v][r] = (lab_now() - t0) / calls;
            cpu[v][r] = (lab_cpu_now() - c0) / calls;
        }
    double flops = 2.0 * 2.0 * a.B * a.H * (double)a.T * a.T / 2 * a.D * 3.5; /* 7 gemms, causal */
    printf("attention lab: B%d H%d T%d D%d causal, %d threads; median of %d rounds of %d "
           "forward + backward, the versions taking turns\n", a.B, a.H, a.T, a.D,
           fg_cpu_pool_threads(pool), ROUNDS, calls);
    for (size_t v = 1; v < NVERSIONS; v++) {
        double med = lab_median(t[v], ROUNDS);
        double cpu_med = lab_median(cpu[v], ROUNDS);
        printf("  %-24s %8.3f ms  (fastest %8.3f ms)  %6.1f GFLOP/s  CPU %8.3f ms\n",
               versions[v].name, med * 1e3, t[v][0] * 1e3, flops / t[v][0] * 1e-9,
               cpu_med * 1e3);
    }
    free(y), free(dqkv), free(lse);
    case_free(&c);
}

/* The check also runs every version on one thread (a pool of its own). */
static int check_both(fg_cpu_pool *pool)
{
    fg_cpu_pool *one = NULL;
    if (fg_cpu_pool_create(1, &one) != 0) {
        fprintf(stderr, "attention lab: cannot start the one-thread pool\n");
        return 1;
    }
    int rc = check(pool, one);
    fg_cpu_pool_destroy(one);
    return rc;
}

static int time_main(fg_cpu_pool *pool, int argc, char **argv)
{
    lab_attn a = {16, 6, 256, 64};
    if (argc >= 4)
        a = (lab_attn){atoi(argv[0]), atoi(argv[1]), atoi(argv[2]), atoi(argv[3])};
    if (a.B < 1 || a.H < 1 || a.T < 1 || a.D < 1) {
        fprintf(stderr, "attention lab: B H T D must be >= 1\n");
        return 2;
    }
    time_versions(pool, a);
    return 0;
}

int main(int argc, char **argv)
{
    fg_cpu_gemm_init();
    return lab_main(argc, argv, "attention", "[B H T D]", check_both, time_main);
}
