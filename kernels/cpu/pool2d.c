/* Max and average pooling over NCHW planes; each (n, c) plane is independent, so the
 * pool splits planes and the result does not depend on the partition. */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

typedef struct fg_cpu_pool2d_ctx {
    const fg_cpu_conv_shape *d;
    int is_max;
    const float *src;
    float *dst;
    int32_t *argmax;
    const int32_t *argmax_in;
} fg_cpu_pool2d_ctx;

static void fg_cpu_pool_forward_planes(void *p, size_t b, size_t e)
{
    fg_cpu_pool2d_ctx *cx = p;
    const fg_cpu_conv_shape *d = cx->d;
    size_t hw = (size_t)d->h * (size_t)d->w, P = (size_t)d->out_h * (size_t)d->out_w;
    float inv_window = 1.0f / (float)(d->r * d->s);
    for (size_t plane = b; plane < e; plane++) {
        const float *x = cx->src + plane * hw;
        float *y = cx->dst + plane * P;
        int32_t *am = cx->is_max ? cx->argmax + plane * P : NULL;
        for (int oh = 0; oh < d->out_h; oh++) {
            int h0 = oh * d->stride_h - d->pad_h;
            for (int ow = 0; ow < d->out_w; ow++) {
                int w0 = ow * d->stride_w - d->pad_w;
                float best = -INFINITY, sum = 0.0f;
                int32_t where = -1;
                for (int r = 0; r < d->r; r++) {
                    int ih = h0 + r;
                    if (ih < 0 || ih >= d->h)
                        continue;
                    for (int s = 0; s < d->s; s++) {
                        int iw = w0 + s;
                        if (iw < 0 || iw >= d->w)
                            continue;
                        float v = x[ih * d->w + iw];
                        sum += v;
                        /* first maximum wins; a NaN propagates as in PyTorch */
                        if (v > best || (v != v && best == best) || where < 0) {
                            best = v;
                            where = ih * d->w + iw;
                        }
                    }
                }
                size_t o = (size_t)oh * (size_t)d->out_w + (size_t)ow;
                if (cx->is_max) {
                    y[o] = where < 0 ? 0.0f : best;
                    am[o] = where;
                } else {
                    y[o] = sum * inv_window;
                }
            }
        }
    }
}

static void fg_cpu_pool_backward_planes(void *p, size_t b, size_t e)
{
    fg_cpu_pool2d_ctx *cx = p;
    const fg_cpu_conv_shape *d = cx->d;
    size_t hw = (size_t)d->h * (size_t)d->w, P = (size_t)d->out_h * (size_t)d->out_w;
    float inv_window = 1.0f / (float)(d->r * d->s);
    for (size_t plane = b; plane < e; plane++) {
        const float *dy = cx->src + plane * P;
        float *dx = cx->dst + plane * hw;
        memset(dx, 0, hw * sizeof *dx);
        if (cx->is_max) {
            const int32_t *am = cx->argmax_in + plane * P;
            for (size_t o = 0; o < P; o++)
                if (am[o] >= 0)
                    dx[am[o]] += dy[o];
            continue;
        }
        for (int oh = 0; oh < d->out_h; oh++) {
            int h0 = oh * d->stride_h - d->pad_h;
            for (int ow = 0; ow < d->out_w; ow++) {
                int w0 = ow * d->stride_w - d->pad_w;
                float g = dy[(size_t)oh * (size_t)d->out_w + (size_t)ow] * inv_window;
                for (int r = 0; r < d->r; r++) {
                    int ih = h0 + r;
                    if (ih < 0 || ih >= d->h)
                        continue;
                    for (int s = 0; s < d->s; s++) {
                        int iw = w0 + s;
                        if (iw >= 0 && iw < d->w)
                            dx[ih * d->w + iw] += g;
                    }
                }
            }
        }
    }
}

static size_t fg_cpu_pool_grain(size_t plane_work)
{
    size_t g = plane_work ? FG_CPU_GRAIN / plane_work : 1;
    return g ? g : 1;
}

void fg_cpu_pool2d_forward(fg_cpu_pool *pool, int is_max, const fg_cpu_conv_shape *d,
                           const float *x, float *y, int32_t *argmax)
{
    fg_cpu_pool2d_ctx cx = { d, is_max, x, y, argmax, NULL };
    size_t work = (size_t)d->out_h * (size_t)d->out_w * (size_t)d->r * (size_t)d->s;
    fg_cpu_parallel_for(pool, (size_t)d->n * (size_t)d->c, fg_cpu_pool_grain(work), 1,
                        fg_cpu_pool_forward_planes, &cx);
}

void fg_cpu_pool2d_backward(fg_cpu_pool *pool, int is_max, const fg_cpu_conv_shape *d,
                            const float *dy, const int32_t *argmax, float *dx)
{
    fg_cpu_pool2d_ctx cx = { d, is_max, dy, dx, NULL, argmax };
    size_t work = (size_t)d->h * (size_t)d->w + (size_t)d->out_h * (size_t)d->out_w;
    fg_cpu_parallel_for(pool, (size_t)d->n * (size_t)d->c, fg_cpu_pool_grain(work), 1,
                        fg_cpu_pool_backward_planes, &cx);
}
