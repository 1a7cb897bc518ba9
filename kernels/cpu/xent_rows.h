/* What the softmax cross-entropy kernels share (softmax_xent.c, ops/classifier_smoothed.c):
 * the row maximum in 16 float lanes, and the fixed plan that sums rows' losses and hits per
 * chunk of rows in double and the chunks in order (the chunk size depends on the shape only,
 * never on the thread count). */
#ifndef FULGUR_KERNELS_CPU_XENT_ROWS_H
#define FULGUR_KERNELS_CPU_XENT_ROWS_H

#include "cpu_kernels.h"

enum { FG_CPU_XENT_LANES = 16 };

/* The maximum of x[0, n) as a scan from x[0] finds it (NaN only when x[0] is NaN). */
static inline __attribute__((always_inline)) float fg_cpu_xent_max(const float *x, int n)
{
    float lane[FG_CPU_XENT_LANES];
    for (int l = 0; l < FG_CPU_XENT_LANES; l++)
        lane[l] = x[0];
    int j = 0;
    for (; j + FG_CPU_XENT_LANES <= n; j += FG_CPU_XENT_LANES)
        for (int l = 0; l < FG_CPU_XENT_LANES; l++)
            lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
    float m = x[0];
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    for (int l = 0; l < FG_CPU_XENT_LANES; l++)
        m = lane[l] > m ? lane[l] : m;
    return m;
}

/* A row reduction: rows per chunk, and one loss and one hit sum per chunk. */
typedef struct fg_cpu_xent_sums {
    size_t rows, chunk;
    double *loss, *hits;
} fg_cpu_xent_sums;

/* The rows [first, *end) of chunk k. */
static inline size_t fg_cpu_xent_chunk_rows(const fg_cpu_xent_sums *s, size_t k, size_t *end)
{
    size_t first = k * s->chunk;
    *end = first + s->chunk < s->rows ? first + s->chunk : s->rows;
    return first;
}

/* Runs chunk_fn (ctx holds s) over the chunks of s->rows rows of `classes` values, then
 * adds the chunks' sums in chunk order to *loss_sum and *correct (either may be NULL). Sets
 * s->chunk, s->loss and s->hits. */
void fg_cpu_xent_sums_run(fg_cpu_pool *pool, fg_cpu_xent_sums *s, int classes,
                          fg_cpu_range_fn chunk_fn, void *ctx, float *loss_sum,
                          float *correct);

#endif
