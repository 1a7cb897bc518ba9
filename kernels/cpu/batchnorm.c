/* Batch normalisation over (n, c, spatial), PyTorch semantics. Channels are independent:
 * the pool splits channels and each channel is reduced in a fixed order in double, so the
 * result does not depend on the thread count. */
#include <math.h>

#include "cpu_kernels.h"

typedef struct fg_cpu_bn_ctx {
    int training, n, c, spatial, accumulate;
    const float *x, *gamma, *beta, *dy;
    float *running_mean, *running_var, *saved_mean, *saved_invstd, *y, *dx, *dgamma, *dbeta;
    const float *mean_in, *invstd_in;
    float momentum, eps;
} fg_cpu_bn_ctx;

/* Sum of f(x[i]) over a contiguous span with eight interleaved accumulators. */
static double fg_cpu_span_sum_shift(const float *x, size_t n, double shift, int square)
{
    double acc[8] = { 0 };
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            double v = (double)x[i + j] - shift;
            acc[j] += square ? v * v : v;
        }
    for (; i < n; i++) {
        double v = (double)x[i] - shift;
        acc[0] += square ? v * v : v;
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Sum over the channel's (n, spatial) elements of (x - shift) or (x - shift)^2. */
static double fg_cpu_channel_sum(const fg_cpu_bn_ctx *b, size_t ch, double shift, int square)
{
    size_t sp = (size_t)b->spatial, stride = (size_t)b->c * sp;
    double total = 0.0;
    for (size_t i = 0; i < (size_t)b->n; i++)
        total += fg_cpu_span_sum_shift(b->x + i * stride + ch * sp, sp, shift, square);
    return total;
}

static void fg_cpu_bn_forward_channels(void *p, size_t b0, size_t e0)
{
    fg_cpu_bn_ctx *b = p;
    size_t sp = (size_t)b->spatial, stride = (size_t)b->c * sp;
    double count = (double)b->n * (double)sp;
    for (size_t ch = b0; ch < e0; ch++) {
        double mean, invstd;
        if (b->training) {
            mean = fg_cpu_channel_sum(b, ch, 0.0, 0) / count;
            double var = fg_cpu_channel_sum(b, ch, mean, 1) / count; /* biased */
            invstd = 1.0 / sqrt(var + (double)b->eps);
            b->saved_mean[ch] = (float)mean;
            b->saved_invstd[ch] = (float)invstd;
            double m = (double)b->momentum;
            double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
            if (b->running_mean)
                b->running_mean[ch] = (float)((1.0 - m) * b->running_mean[ch] + m * mean);
            if (b->running_var)
                b->running_var[ch] = (float)((1.0 - m) * b->running_var[ch] + m * unbiased);
        } else {
            mean = b->running_mean[ch];
            invstd = 1.0 / sqrt((double)b->running_var[ch] + (double)b->eps);
        }
        float g = b->gamma ? b->gamma[ch] : 1.0f, be = b->beta ? b->beta[ch] : 0.0f;
        /* centre first: x*scale + shift would cancel when |mean| >> std */
        float fmean = (float)mean, scale = (float)(invstd * g);
        for (size_t i = 0; i < (size_t)b->n; i++) {
            const float *x = b->x + i * stride + ch * sp;
            float *y = b->y + i * stride + ch * sp;
            for (size_t s = 0; s < sp; s++)
                y[s] = (x[s] - fmean) * scale + be;
        }
    }
}

static size_t fg_cpu_bn_grain(int n, int spatial)
{
    size_t per = (size_t)n * (size_t)spatial;
    size_t g = per ? FG_CPU_GRAIN / per : 1;
    return g ? g : 1;
}

void fg_cpu_batchnorm_forward(fg_cpu_pool *pool, int training, int n, int c, int spatial,
                              const float *x, const float *gamma, const float *beta,
                              float *running_mean, float *running_var, float momentum,
                              float eps, float *saved_mean, float *saved_invstd, float *y)
{
    fg_cpu_bn_ctx b = { .training = training, .n = n, .c = c, .spatial = spatial, .x = x,
                        .gamma = gamma, .beta = beta, .running_mean = running_mean,
                        .running_var = running_var, .saved_mean = saved_mean,
                        .saved_invstd = saved_invstd, .y = y, .momentum = momentum,
                        .eps = eps };
    fg_cpu_parallel_for(pool, (size_t)c, fg_cpu_bn_grain(n, spatial), 1,
                        fg_cpu_bn_forward_channels, &b);
}

static void fg_cpu_bn_backward_channels(void *p, size_t b0, size_t e0)
{
    fg_cpu_bn_ctx *b = p;
    size_t sp = (size_t)b->spatial, stride = (size_t)b->c * sp;
    double count = (double)b->n * (double)sp;
    for (size_t ch = b0; ch < e0; ch++) {
        double mean = b->mean_in[ch], invstd = b->invstd_in[ch];
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (size_t i = 0; i < (size_t)b->n; i++) {
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
        if (b->dbeta)
            b->dbeta[ch] = (float)(b->accumulate ? b->dbeta[ch] + sum_dy : sum_dy);
        if (b->dgamma)
            b->dgamma[ch] = (float)(b->accumulate ? b->dgamma[ch] + sum_dy_xhat : sum_dy_xhat);
        if (!b->dx)
            continue;
        double g = b->gamma ? b->gamma[ch] : 1.0;
        /* dx = g*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)), folded into
         * a*dy + c*(x - mean) + d */
        double k = g * invstd;
        double mdy = sum_dy / count, mdyx = sum_dy_xhat / count;
        float fa = (float)k, fc = (float)(-k * mdyx * invstd), fd = (float)(-k * mdy);
        float fmean = (float)mean;
        for (size_t i = 0; i < (size_t)b->n; i++) {
            const float *x = b->x + i * stride + ch * sp, *dy = b->dy + i * stride + ch * sp;
            float *dx = b->dx + i * stride + ch * sp;
            for (size_t s = 0; s < sp; s++)
                dx[s] = fa * dy[s] + fc * (x[s] - fmean) + fd;
        }
    }
}

void fg_cpu_batchnorm_backward(fg_cpu_pool *pool, int n, int c, int spatial, const float *x,
                               const float *gamma, const float *saved_mean,
                               const float *saved_invstd, const float *dy, float *dx,
                               float *dgamma, float *dbeta, int accumulate)
{
    fg_cpu_bn_ctx b = { .n = n, .c = c, .spatial = spatial, .accumulate = accumulate, .x = x,
                        .gamma = gamma, .dy = dy, .dx = dx, .dgamma = dgamma, .dbeta = dbeta,
                        .mean_in = saved_mean, .invstd_in = saved_invstd };
    fg_cpu_parallel_for(pool, (size_t)c, fg_cpu_bn_grain(n, spatial), 1,
                        fg_cpu_bn_backward_channels, &b);
}
