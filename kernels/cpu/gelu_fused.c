/* An MLP's fc bias and GELU in one pass over the hidden activations (an f32 fc layer, packed
 * rows): aux += bias, y = gelu(aux), the same bits as gemm.c's bias pass then activation.c's
 * GELU, one read and write of aux fewer and one fork/join of the pool fewer.
 * The backward stays the separate ops (activation_backward, then bias_grad): fused into one
 * pass down column blocks (bias_grad's order, which keeps dbias's bits), its GELU derivative
 * ran slower than the row-streaming pass plus bias_grad together (4096 x 1536, 2 threads,
 * 13.6-18.3 ms CPU against 12.2-14.3; tests/bench/RESULTS.md). */
#include "cpu_kernels.h"
#include "gelu.h"

typedef struct fg_cpu_gelu_fused {
    float *aux;
    const float *bias;
    float *y;
    int cols;
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
    fg_cpu_gelu_fused g = {.aux = aux, .bias = bias, .y = y, .cols = cols};
    size_t grain = (FG_CPU_GRAIN / 16) / (size_t)cols; /* activation.c's GELU grain, in rows */
    fg_cpu_parallel_for(pool, (size_t)rows, grain ? grain : 1, 1, fg_cpu_bias_gelu_rows, &g);
}
