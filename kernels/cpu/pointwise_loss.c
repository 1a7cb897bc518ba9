/* Pointwise losses (mse, binary cross-entropy on logits): the loss and its metric summed
 * per fixed chunk in double and combined in chunk order, the gradient written alongside. */
#include <math.h>

#include "cpu_kernels.h"

typedef struct fg_cpu_ploss_ctx {
    int kind;
    const float *x, *t;
    size_t n, chunk;
    float grad_scale;
    float *dx;
    double *loss, *metric; /* one per chunk */
} fg_cpu_ploss_ctx;

/* One value: returns its loss, sets *metric and *grad (dl/dx). */
static double fg_cpu_ploss_one(int kind, float x, float t, double *metric, float *grad)
{
    if (kind == FG_CPU_LOSS_MSE) {
        float d = x - t;
        *metric = fabs((double)d);
        *grad = 2.0f * d;
        return (double)d * (double)d;
    }
    /* log(1 + exp(-|x|)) keeps exp from overflowing; sigmoid from the same exp */
    double e = exp(-fabs((double)x));
    double sig = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    *metric = (x > 0) == (t > 0.5f);
    *grad = (float)(sig - (double)t);
    return (x > 0 ? (double)x : 0.0) - (double)x * (double)t + log1p(e);
}

static void fg_cpu_ploss_chunks(void *p, size_t b, size_t e)
{
    fg_cpu_ploss_ctx *c = p;
    for (size_t k = b; k < e; k++) {
        size_t lo = k * c->chunk, hi = lo + c->chunk;
        if (hi > c->n)
            hi = c->n;
        double loss = 0.0, metric = 0.0;
        for (size_t i = lo; i < hi; i++) {
            double m;
            float g;
            loss += fg_cpu_ploss_one(c->kind, c->x[i], c->t[i], &m, &g);
            metric += m;
            if (c->dx)
                c->dx[i] = g * c->grad_scale; /* after reading x[i]: dx may alias x */
        }
        c->loss[k] = loss;
        c->metric[k] = metric;
    }
}

void fg_cpu_pointwise_loss(fg_cpu_pool *pool, int kind, const float *x, const float *t,
                           size_t n, float scale, float *loss_sum, float *metric_sum,
                           float grad_scale, float *dx)
{
    double loss[FG_CPU_MAX_CHUNKS], metric[FG_CPU_MAX_CHUNKS];
    size_t chunk = fg_cpu_reduce_chunk(n, 2048);
    size_t chunks = (n + chunk - 1) / chunk;
    fg_cpu_ploss_ctx c = {kind, x, t, n, chunk, grad_scale, dx, loss, metric};
    fg_cpu_parallel_for(pool, chunks, 1, 1, fg_cpu_ploss_chunks, &c);
    double total_loss = 0.0, total_metric = 0.0;
    for (size_t k = 0; k < chunks; k++) {
        total_loss += loss[k];
        total_metric += metric[k];
    }
    if (loss_sum)
        *loss_sum = (float)((double)*loss_sum + (double)scale * total_loss);
    if (metric_sum)
        *metric_sum = (float)((double)*metric_sum + (double)scale * total_metric);
}
