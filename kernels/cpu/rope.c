/* Rotary position embedding in place, Hugging Face Llama's half-split convention: in each
 * head of D values, x_i pairs with x_{i+D/2} and turns by p * theta^(-2i/D) at position p,
 * or by p * inv_freq[i] when a table is given (rope scaling).
 * The backward turns by the opposite angle (a rotation's transpose). Rows are split across
 * the pool; a row's angles are computed once (in double) for all of its heads. */
#include <math.h>

#include "cpu_kernels.h"

typedef struct fg_cpu_rope_job {
    float *x;
    int seq, pos0, heads, head_dim, ld;
    double theta;
    const double *inv_freq; /* NULL: theta^(-2i/head_dim) */
    double sign; /* +1 forward, -1 backward */
} fg_cpu_rope_job;

#define FG_CPU_ROPE_PAIRS 256 /* pairs whose cos and sin a row holds at once */

/* A row's pairs in chunks: their cos and sin first, then each head's values in order
 * (kernel-lab rope v2: contiguous per head, not strided across the heads). */
static void fg_cpu_rope_rows(void *p, size_t r0, size_t r1)
{
    const fg_cpu_rope_job *j = p;
    int half = j->head_dim / 2;
    float c[FG_CPU_ROPE_PAIRS], s[FG_CPU_ROPE_PAIRS];
    for (size_t r = r0; r < r1; r++) {
        double pos = (double)j->pos0 + (double)(r % (size_t)j->seq);
        float *row = j->x + r * (size_t)j->ld;
        for (int i0 = 0; i0 < half; i0 += FG_CPU_ROPE_PAIRS) {
            int n = half - i0 < FG_CPU_ROPE_PAIRS ? half - i0 : FG_CPU_ROPE_PAIRS;
            for (int k = 0; k < n; k++) {
                int i = i0 + k;
                double angle = j->inv_freq ? pos * j->inv_freq[i]
                                           : pos * pow(j->theta, -2.0 * i / j->head_dim);
                c[k] = (float)cos(angle);
                s[k] = (float)(j->sign * sin(angle));
            }
            for (int h = 0; h < j->heads; h++) {
                float *a = row + (size_t)h * (size_t)j->head_dim + i0, *b = a + half;
                for (int k = 0; k < n; k++) {
                    float x1 = a[k], x2 = b[k];
                    a[k] = x1 * c[k] - x2 * s[k];
                    b[k] = x2 * c[k] + x1 * s[k];
                }
            }
        }
    }
}

/* Without a table the frequencies are computed once here (kernel-lab rope v2: the same
 * doubles as a pow per row, so the same bits; the rows no longer call pow). */
static void fg_cpu_rope_run(fg_cpu_pool *pool, int backward, int rows, int seq, int pos0,
                            int heads, int head_dim, int ld, double theta,
                            const double *inv_freq, float *x)
{
    double table[FG_CPU_ROPE_PAIRS];
    if (!inv_freq && head_dim / 2 <= FG_CPU_ROPE_PAIRS) {
        for (int i = 0; i < head_dim / 2; i++)
            table[i] = pow(theta, -2.0 * i / head_dim);
        inv_freq = table;
    }
    fg_cpu_rope_job j = {x, seq, pos0, heads, head_dim, ld, theta, inv_freq,
                         backward ? -1.0 : 1.0};
    size_t per_row = (size_t)heads * (size_t)head_dim + 1;
    fg_cpu_parallel_for(pool, (size_t)rows, FG_CPU_GRAIN / 8 / per_row + 1, 1, fg_cpu_rope_rows,
                        &j);
}

void fg_cpu_rope(fg_cpu_pool *pool, int backward, int rows, int seq, int pos0, int heads,
                 int head_dim, int ld, float theta, float *x)
{
    fg_cpu_rope_run(pool, backward, rows, seq, pos0, heads, head_dim, ld, theta, NULL, x);
}

void fg_cpu_rope_freq(fg_cpu_pool *pool, int backward, int rows, int seq, int pos0, int heads,
                      int head_dim, int ld, const double *inv_freq, float *x)
{
    fg_cpu_rope_run(pool, backward, rows, seq, pos0, heads, head_dim, ld, 0, inv_freq, x);
}
