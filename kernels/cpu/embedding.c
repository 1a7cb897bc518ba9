/* Embedding lookups: rows of a table gathered by index, and the gradient scattered back.
 * The backward splits the table's columns across the pool and adds every index's row in
 * index order, so repeated indices sum in a fixed order for any thread count. */
#include <string.h>

#include "cpu_kernels.h"
#include "half.h"

typedef struct fg_cpu_embed_ctx {
    const int32_t *ids;
    int n, dim, accumulate;
    const float *table, *dout;
    float *out, *dtable;
} fg_cpu_embed_ctx;

static void fg_cpu_embed_rows(void *p, size_t r0, size_t r1)
{
    const fg_cpu_embed_ctx *c = p;
    size_t d = (size_t)c->dim;
    for (size_t r = r0; r < r1; r++) {
        const float *src = c->table + (size_t)c->ids[r] * d;
        float *dst = c->out + r * d;
        if (c->accumulate)
            for (size_t i = 0; i < d; i++)
                dst[i] += src[i];
        else
            memcpy(dst, src, d * sizeof *dst);
    }
}

void fg_cpu_embedding_forward(fg_cpu_pool *pool, const int32_t *ids, int n, int dim,
                              const float *table, float *out, int accumulate)
{
    fg_cpu_embed_ctx c = {.ids = ids, .n = n, .dim = dim, .accumulate = accumulate,
                          .table = table, .out = out};
    size_t grain = fg_cpu_stream_grain(pool) / (size_t)(dim > 0 ? dim : 1) + 1;
    fg_cpu_parallel_for(pool, (size_t)n, grain, 1, fg_cpu_embed_rows, &c);
}

static void fg_cpu_embed_grad_cols(void *p, size_t c0, size_t c1)
{
    const fg_cpu_embed_ctx *c = p;
    size_t d = (size_t)c->dim;
    for (size_t r = 0; r < (size_t)c->n; r++) {
        const float *src = c->dout + r * d;
        float *dst = c->dtable + (size_t)c->ids[r] * d;
        for (size_t i = c0; i < c1; i++)
            dst[i] += src[i];
    }
}

void fg_cpu_embedding_backward(fg_cpu_pool *pool, const int32_t *ids, int n, int dim,
                               int rows, const float *dout, float *dtable, int accumulate)
{
    if (!accumulate)
        memset(dtable, 0, (size_t)rows * (size_t)dim * sizeof *dtable);
    fg_cpu_embed_ctx c = {.ids = ids, .n = n, .dim = dim, .dout = dout, .dtable = dtable};
    size_t grain = fg_cpu_stream_grain(pool) / (size_t)(n > 0 ? n : 1) + 1;
    fg_cpu_parallel_for(pool, (size_t)dim, grain, 16, fg_cpu_embed_grad_cols, &c);
}

/* ---- bf16 storage, f32 math ---------------------------------------------------------------
 * The forward's rows in blocks widened onto the stack (table, and out when accumulating),
 * added in f32 and rounded back; the backward reads bf16 dout widened into an f32 table. The
 * values are the f32 kernels' on the widened operands, rounded. */

typedef struct fg_cpu_embed_bf16_ctx {
    const int32_t *ids;
    int dim, accumulate;
    const uint16_t *table, *dout;
    uint16_t *out;
    float *dtable;
} fg_cpu_embed_bf16_ctx;

static void fg_cpu_embed_bf16_rows(void *p, size_t r0, size_t r1)
{
    const fg_cpu_embed_bf16_ctx *c = p;
    size_t d = (size_t)c->dim;
    float src[FG_CPU_BF16_BLOCK], dst[FG_CPU_BF16_BLOCK];
    for (size_t r = r0; r < r1; r++) {
        const uint16_t *row = c->table + (size_t)c->ids[r] * d;
        uint16_t *out = c->out + r * d;
        for (size_t i = 0; i < d; i += FG_CPU_BF16_BLOCK) {
            size_t m = d - i < FG_CPU_BF16_BLOCK ? d - i : FG_CPU_BF16_BLOCK;
            fg_cpu_bf16_widen(src, row + i, m);
            if (c->accumulate) {
                fg_cpu_bf16_widen(dst, out + i, m);
                for (size_t k = 0; k < m; k++)
                    dst[k] += src[k];
            }
            fg_cpu_bf16_round(out + i, c->accumulate ? dst : src, m);
        }
    }
}

void fg_cpu_embedding_forward_bf16(fg_cpu_pool *pool, const int32_t *ids, int n, int dim,
                                   const uint16_t *table, uint16_t *out, int accumulate)
{
    fg_cpu_embed_bf16_ctx c = {.ids = ids, .dim = dim, .accumulate = accumulate,
                               .table = table, .out = out};
    size_t grain = fg_cpu_stream_grain(pool) / (size_t)(dim > 0 ? dim : 1) + 1;
    fg_cpu_parallel_for(pool, (size_t)n, grain, 1, fg_cpu_embed_bf16_rows, &c);
}

typedef struct fg_cpu_embed_grad_bf16_ctx {
    const int32_t *ids;
    int n, dim;
    const uint16_t *dout;
    float *dtable;
} fg_cpu_embed_grad_bf16_ctx;

static void fg_cpu_embed_grad_bf16_cols(void *p, size_t c0, size_t c1)
{
    const fg_cpu_embed_grad_bf16_ctx *c = p;
    size_t d = (size_t)c->dim;
    for (size_t r = 0; r < (size_t)c->n; r++) {
        const uint16_t *src = c->dout + r * d;
        float *dst = c->dtable + (size_t)c->ids[r] * d;
        for (size_t i = c0; i < c1; i++)
            dst[i] += fg_bf16_to_f32(src[i]);
    }
}

void fg_cpu_embedding_backward_bf16(fg_cpu_pool *pool, const int32_t *ids, int n, int dim,
                                    int rows, const uint16_t *dout, float *dtable,
                                    int accumulate)
{
    if (!accumulate)
        memset(dtable, 0, (size_t)rows * (size_t)dim * sizeof *dtable);
    fg_cpu_embed_grad_bf16_ctx c = {.ids = ids, .n = n, .dim = dim, .dout = dout,
                                    .dtable = dtable};
    size_t grain = fg_cpu_stream_grain(pool) / (size_t)(n > 0 ? n : 1) + 1;
    fg_cpu_parallel_for(pool, (size_t)dim, grain, 16, fg_cpu_embed_grad_bf16_cols, &c);
}
