/* An MLP's GELU fused with its bias, one pass over the hidden activations each way, the same
 * bits as the separate ops they replace (an f32 fc layer, packed rows):
 *   forward:  aux += bias (gemm.c's bias pass), y = gelu(aux) (activation.c)
 *   backward: d = d * gelu'(aux) (activation.c), dbias (+)= column sums of d (bias.c)
 * The backward's sums run down each column in row order in double, as bias.c's do, over the
 * same column partition, so dbias does not depend on the thread count; the pass saves
 * bias_grad's read of d (rows x cols floats) and the forward one read and write of aux. */
#include "cpu_kernels.h"
#include "gelu.h"

typedef struct fg_cpu_gelu_fused {
    float *aux, *d, *dbias;
    const float *bias;
    float *y;
    int rows, cols, accumulate;
} fg_cpu_gelu_fused;

FG_CPU_VECTOR_CLONES static void fg_cpu_bias_gelu_rows(void *p, size_t lo, size_t hi)
{
    const fg_cpu_gelu_fused *g = p;
    size_t cols = (size_t)g->cols;
    for (size_t r = lo; r < hi; r++) {
        float *restrict aux = g->aux + r * cols, *restrict y = g->y + r * cols;
        const float *restrict b = g->bias;
        for (size_t j = 0; j < cols; j++) {
            float v = aux[j] + b[j];
            aux[j] = v;
            y[j] = fg_cpu_gelu(v);
        }
    }
}

void fg_cpu_bias_gelu_forward(fg_cpu_pool *pool, int rows, int cols, const float *bias,
                              float *aux, float *y)
{
    if (rows <= 0 || cols <= 0)
        return;
    fg_cpu_gelu_fused g = {.aux = aux, .bias = bias, .y = y, .rows = rows, .cols = cols};
    size_t grain = (FG_CPU_GRAIN / 16) / (size_t)cols; /* activation.c's GELU grain, in rows */
    fg_cpu_parallel_for(pool, (size_t)rows, grain ? grain : 1, 1, fg_cpu_bias_gelu_rows, &g);
}

#define FG_CPU_DGELU_BLOCK 256 /* columns summed at once: bias.c's block */

/* Columns [c0, c1): d = d * gelu'(aux) down the rows, and the columns' sums. */
FG_CPU_VECTOR_CLONES static void fg_cpu_dgelu_cols(void *p, size_t c0, size_t c1)
{
    const fg_cpu_gelu_fused *g = p;
    size_t rows = (size_t)g->rows, cols = (size_t)g->cols;
    double acc[FG_CPU_DGELU_BLOCK];
    for (size_t b0 = c0; b0 < c1; b0 += FG_CPU_DGELU_BLOCK) {
        size_t n = c1 - b0 < FG_CPU_DGELU_BLOCK ? c1 - b0 : FG_CPU_DGELU_BLOCK;
        for (size_t j = 0; j < n; j++)
            acc[j] = 0.0;
        for (size_t r = 0; r < rows; r++) {
            const float *restrict x = g->aux + r * cols + b0;
            float *restrict d = g->d + r * cols + b0;
            for (size_t j = 0; j < n; j++) {
                float v = d[j] * fg_cpu_gelu_grad(x[j]);
                d[j] = v;
                acc[j] += (double)v;
            }
        }
        for (size_t j = 0; j < n; j++)
            g->dbias[b0 + j] = g->accumulate ? (float)((double)g->dbias[b0 + j] + acc[j])
                                             : (float)acc[j];
    }
}

void fg_cpu_dgelu_bias_grad(fg_cpu_pool *pool, int rows, int cols, const float *aux, float *d,
                            float *dbias, int accumulate)
{
    if (rows <= 0 || cols <= 0)
        return;
    fg_cpu_gelu_fused g = {.aux = (float *)aux, .d = d, .dbias = dbias, .rows = rows,
                           .cols = cols, .accumulate = accumulate};
    size_t grain = FG_CPU_GRAIN / (size_t)rows; /* bias.c's column partition */
    fg_cpu_parallel_for(pool, (size_t)cols, grain ? grain : 1, 16, fg_cpu_dgelu_cols, &g);
}
