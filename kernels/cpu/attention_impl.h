/* What attention.c (f32 storage) and attention_bf16.c (bf16 storage) share: a qkv row's
 * geometry, the softmax's row passes and their backward, and the job that runs the
 * (batch, head) items on the pool, one workspace slot per thread. */
#ifndef FG_CPU_ATTENTION_IMPL_H
#define FG_CPU_ATTENTION_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels.h"

enum { FG_CPU_ATTN_LANES = 16 };

typedef struct fg_cpu_attn_rows {
    float *s;              /* (rows, ld) scores in, probabilities out */
    const float *dp;       /* backward: dP (rows, ld), or NULL in forward */
    float *ds;             /* backward: dS out (may alias dp) */
    const float *delta;    /* backward: rowsum(dY * Y) per row */
    float *lse;            /* forward: out; backward: in */
    uint16_t *p16, *ds16;  /* bf16 storage: P (and in backward dS) also rounded here
                            * (NULL: f32) */
    int first_row, ld, causal, seq;
    float dropout;         /* p; 0: none */
    uint64_t seed, first_draw; /* draw of row 0, column 0 of the block */
} fg_cpu_attn_rows;

/* Softmax of each row's visible scores in place (zeros past them to ld), its log-sum-exp
 * into lse, then the dropout mask; backward: P recomputed from lse into s (dropped where
 * dropout drops), dS = P * (dP - delta) into ds. With p16 (and ds16), P and dS are then
 * rounded to bf16 there (fg_f32_to_bf16's bits), the block's rows in one call. */
void fg_cpu_attn_softmax_rows(const fg_cpu_attn_rows *a, int rows);
void fg_cpu_attn_backward_rows(const fg_cpu_attn_rows *a, int rows);
/* The dropout draws of block (b, h, rows from i0) into rows. */
void fg_cpu_attn_set_dropout(fg_cpu_attn_rows *rows, const fg_cpu_attn_shape *a, int b, int h,
                             int i0);

/* delta[i] = sum_d dY[i, d] * Y[i, d] over bf16 rows of ld values (attention.c's rowsum of
 * f32 rows on their widened values: the same lanes, the products exact in double). */
void fg_cpu_attn_delta_bf16(const uint16_t *dy, const uint16_t *y, int rows, int D, int ld,
                            float *delta);

/* Key/value heads (kv_heads, or heads), a qkv row's width (H + 2 KV) D, and the column of
 * query head h's key (its value is KV D further). */
static inline int fg_cpu_attn_kv(const fg_cpu_attn_shape *a)
{
    return a->kv_heads > 0 ? a->kv_heads : a->heads;
}

static inline int fg_cpu_attn_width(const fg_cpu_attn_shape *a)
{
    return (a->heads + 2 * fg_cpu_attn_kv(a)) * a->head_dim;
}

static inline size_t fg_cpu_attn_k_col(const fg_cpu_attn_shape *a, int h)
{
    int kv = h / (a->heads / fg_cpu_attn_kv(a));
    return (size_t)(a->heads + kv) * (size_t)a->head_dim;
}

/* A slot's floats: the f32 path's scores and dP (2 BLOCK T), then the bf16 path's P and dS
 * in bf16 (BLOCK T floats' room), a block of f32 output rows (BLOCK D), the item's dK and dV
 * accumulated in f32 (2 T D), and the room to widen one product's bf16 operands where no
 * bf16 gemm runs (BLOCK max(T, D) + T D). */
#define FG_CPU_ATTN_F32_SLOT(B, T) (2 * (B) * (T))
#define FG_CPU_ATTN_BF16_SLOT(B, T, D) \
    ((B) * (T) + (B) * (D) + 2 * (T) * (D) + (B) * ((T) > (D) ? (T) : (D)) + (T) * (D))
size_t fg_cpu_attn_slot_floats(const fg_cpu_attn_shape *a);

/* The job: (batch, head) items claimed one at a time by the slots running on the pool.
 * Tensors in the item's storage type (float or bf16). */
typedef struct fg_cpu_attn_job {
    fg_cpu_pool *pool;
    const fg_cpu_attn_shape *a;
    const void *qkv, *y, *dy;
    void *out;   /* forward: y (B, T, C); backward: dqkv (B, T, 3C) */
    float *lse;  /* (B, H, T) */
    float *ws;   /* slots x fg_cpu_attn_slot_floats */
    int per_batch; /* items per sample: heads (forward), kv_heads (backward) */
    void (*item)(const struct fg_cpu_attn_job *j, int b, int h, int slot, float *s);
    atomic_int next;
} fg_cpu_attn_job;

/* Runs every item of j, one slot per thread. */
void fg_cpu_attn_run(fg_cpu_attn_job *j);

#endif
