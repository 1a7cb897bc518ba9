/* Batch normalisation split around a reduction across replicas ([model] sync_batchnorm):
 * local statistics, the normalisation from summed ones, and the two halves of backward.
 * Each channel is reduced in a fixed order in double (as batchnorm.c), so one replica's
 * sums equal what the fused kernels compute and no result depends on the thread count. */
#include <math.h>

#include "cpu_kernels.h"

typedef struct fg_cpu_bn_sync_ctx {
    int n, c, spatial, accumulate;
    const float *x, *gamma, *beta, *dy, *mean_in, *invstd_in;
    const double *sums_in;
    double *sums_out;
    float *running_mean, *running_var, *saved_mean, *saved_invstd, *y, *dx, *dgamma, *dbeta;
    float momentum, eps;
} fg_cpu_bn_sync_ctx;

/* Sum of x and of x^2 over a contiguous span, eight interleaved accumulators each. */
static void span_sums(const float *x, size_t n, double *sum, double *sumsq)
{
    double a[8] = {0}, q[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            double v = (double)x[i + j];
            a[j] += v;
            q[j] += v * v;
        }
    for (; i < n; i++) {
        double v = (double)x[i];
        a[0] += v;
        q[0] += v * v;
    }
    *sum = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    *sumsq = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
}

static void stats_channels(void *p, size_t b0, size_t e0)
{
    fg_cpu_bn_sync_ctx *b = p;
    size_t sp = (size_t)b->spatial, stride = (size_t)b->c * sp;
    for (size_t ch = b0; ch < e0; ch++) {
        double sum = 0.0, sumsq = 0.0;
        for (size_t i = 0; i < (size_t)b->n; i++) {
            double s, q;
            span_sums(b->x + i * stride + ch * sp, sp, &s, &q);
            sum += s;
            sumsq += q;
        }
        b->sums_out[ch] = sum;
        b->sums_out[(size_t)b->c + ch] = sumsq;
    }
}

static size_t grain(int n, int spatial)
{
    size_t per = (size_t)n * (size_t)spatial;
    size_t g = per ? FG_CPU_GRAIN / per : 1;
    return g ? g : 1;
}

void fg_cpu_batchnorm_stats(fg_cpu_pool *pool, int n, int c, int spatial, const float *x,
                            double *stats)
{
    fg_cpu_bn_sync_ctx b = {.n = n, .c = c, .spatial = spatial, .x = x, .sums_out = stats};
    fg_cpu_parallel_for(pool, (size_t)c, grain(n, spatial), 1, stats_channels, &b);
    stats[2 * (size_t)c] = (double)n * (double)spatial;
}

static void apply_channels(void *p, size_t b0, size_t e0)
{
    fg_cpu_bn_sync_ctx *b = p;
    size_t sp = (size_t)b->spatial, stride = (size_t)b->c * sp;
    double count = b->sums_in[2 * (size_t)b->c];
    for (size_t ch = b0; ch < e0; ch++) {
        double mean = b->sums_in[ch] / count;
        double var = b->sums_in[(size_t)b->c + ch] / count - mean * mean; /* biased */
        if (!(var > 0.0))
            var = 0.0;
        double invstd = 1.0 / sqrt(var + (double)b->eps);
        b->saved_mean[ch] = (float)mean;
        b->saved_invstd[ch] = (float)invstd;
        double m = (double)b->momentum;
        double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
        if (b->running_mean) {
            b->running_mean[ch] = (float)((1.0 - m) * b->running_mean[ch] + m * mean);
            b->running_var[ch] = (float)((1.0 - m) * b->running_var[ch] + m * unbiased);
        }
        float g = b->gamma ? b->gamma[ch] : 1.0f, be = b->beta ? b->beta[ch] : 0.0f;
        float fmean = (float)mean, scale = (float)(invstd * g); /* as batchnorm.c */
        for (size_t i = 0; i < (size_t)b->n; i++) {
            const float *x = b->x + i * stride + ch * sp;
            float *y = b->y + i * stride + ch * sp;
            for (size_t s = 0; s < sp; s++)
                y[s] = (x[s] - fmean) * scale + be;
        }
    }
}

void fg_cpu_batchnorm_apply(fg_cpu_pool *pool, int n, int c, int spatial, const float *x,
                            const double *stats, const float *gamma, const float *beta,
                            float *running_mean, float *running_var, float momentum, float eps,
                            float *saved_mean, float *saved_invstd, float *y)
{
    fg_cpu_bn_sync_ctx b = {.n = n, .c = c, .spatial = spatial, .x = x, .sums_in = stats,
                            .gamma = gamma, .beta = beta, .running_mean = running_mean,
                            .running_var = running_var, .momentum = momentum, .eps = eps,
                            .saved_mean = saved_mean, .saved_invstd = saved_invstd, .y = y};
    fg_cpu_parallel_for(pool, (size_t)c, grain(n, spatial), 1, apply_channels, &b);
}

static void store(float *dst, double v, int accumulate)
{
    *dst = (float)(accumulate ? *dst + v : v);
}

static void backward_reduce_channels(void *p, size_t b0, size_t e0)
{
    fg_cpu_bn_sync_ctx *b = p;
    size_t sp = (size_t)b->spatial, stride = (size_t)b->c * sp;
    for (size_t ch = b0; ch < e0; ch++) {
        double mean = b->mean_in[ch], invstd = b->invstd_in[ch];
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (size_t i = 0; i < (size_t)b->n; i++) { /* batchnorm.c's order */
            const float *x = b->x + i * stride + ch * sp, *dy = b->dy + i * stride + ch * sp;
            double a0 = 0.0, a1 = 0.0;
            for (size_t s = 0; s < sp; s++) {
                a0 += (double)dy[s];
                a1 += (double)dy[s] * ((double)x[s] - mean);
            }
            sum_dy += a0;
            sum_dy_xhat += a1;
        }
        sum_dy_xhat *= invstd;
        b->sums_out[ch] = sum_dy;
        b->sums_out[(size_t)b->c + ch] = sum_dy_xhat;
        if (b->dbeta)
            store(&b->dbeta[ch], sum_dy, b->accumulate);
        if (b->dgamma)
            store(&b->dgamma[ch], sum_dy_xhat, b->accumulate);
    }
}

void fg_cpu_batchnorm_backward_reduce(fg_cpu_pool *pool, int n, int c, int spatial,
                                      const float *x, const float *saved_mean,
                                      const float *saved_invstd, const float *dy, double *sums,
                                      float *dgamma, float *dbeta, int accumulate)
{
    fg_cpu_bn_sync_ctx b = {.n = n, .c = c, .spatial = spatial, .x = x, .dy = dy,
                            .mean_in = saved_mean, .invstd_in = saved_invstd, .sums_out = sums,
                            .dgamma = dgamma, .dbeta = dbeta, .accumulate = accumulate};
    fg_cpu_parallel_for(pool, (size_t)c, grain(n, spatial), 1, backward_reduce_channels, &b);
    sums[2 * (size_t)c] = (double)n * (double)spatial;
}

static void backward_apply_channels(void *p, size_t b0, size_t e0)
{
    fg_cpu_bn_sync_ctx *b = p;
    size_t sp = (size_t)b->spatial, stride = (size_t)b->c * sp;
    double count = b->sums_in[2 * (size_t)b->c];
    for (size_t ch = b0; ch < e0; ch++) {
        double invstd = b->invstd_in[ch], g = b->gamma ? b->gamma[ch] : 1.0;
        double k = g * invstd; /* dx = a*dy + c*(x - mean) + d, as batchnorm.c folds it */
        double mdy = b->sums_in[ch] / count, mdyx = b->sums_in[(size_t)b->c + ch] / count;
        float fa = (float)k, fc = (float)(-k * mdyx * invstd), fd = (float)(-k * mdy);
        float fmean = b->mean_in[ch];
        for (size_t i = 0; i < (size_t)b->n; i++) {
            const float *x = b->x + i * stride + ch * sp, *dy = b->dy + i * stride + ch * sp;
            float *dx = b->dx + i * stride + ch * sp;
            for (size_t s = 0; s < sp; s++)
                dx[s] = fa * dy[s] + fc * (x[s] - fmean) + fd;
        }
    }
}

void fg_cpu_batchnorm_backward_apply(fg_cpu_pool *pool, int n, int c, int spatial,
                                     const float *x, const float *gamma,
                                     const float *saved_mean, const float *saved_invstd,
                                     const float *dy, const double *sums, float *dx)
{
    fg_cpu_bn_sync_ctx b = {.n = n, .c = c, .spatial = spatial, .x = x, .gamma = gamma,
                            .mean_in = saved_mean, .invstd_in = saved_invstd, .dy = dy,
                            .sums_in = sums, .dx = dx};
    fg_cpu_parallel_for(pool, (size_t)c, grain(n, spatial), 1, backward_apply_channels, &b);
}
