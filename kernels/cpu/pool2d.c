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

/* v replaces best when larger, or when it is the first NaN (PyTorch propagates NaN); the
 * first maximum wins ties. */
static inline int fg_cpu_max_takes(float v, float best) { return v > best || (v != v && best == best); }

/* The CNN's common case, 2x2 windows at stride 2 without padding: every window lies inside
 * the plane, so no bounds checks and no sum; the compares become conditional moves. */
static void fg_cpu_max2x2_plane(const float *x, int w, int out_h, int out_w, float *y, int32_t *am)
{
    for (int oh = 0; oh < out_h; oh++) {
        const float *r0 = x + (size_t)(2 * oh) * (size_t)w, *r1 = r0 + w;
        int32_t base = 2 * oh * w;
        for (int ow = 0; ow < out_w; ow++) {
            int i = 2 * ow;
            float best = r0[i];
            int32_t where = base + i;
            if (fg_cpu_max_takes(r0[i + 1], best)) { best = r0[i + 1]; where = base + i + 1; }
            if (fg_cpu_max_takes(r1[i], best)) { best = r1[i]; where = base + w + i; }
            if (fg_cpu_max_takes(r1[i + 1], best)) { best = r1[i + 1]; where = base + w + i + 1; }
            y[(size_t)oh * (size_t)out_w + (size_t)ow] = best;
            am[(size_t)oh * (size_t)out_w + (size_t)ow] = where;
        }
    }
}

static void fg_cpu_pool_forward_planes(void *p, size_t b, size_t e)
{
    fg_cpu_pool2d_ctx *cx = p;
    const fg_cpu_conv_shape *d = cx->d;
    size_t hw = (size_t)d->h * (size_t)d->w, P = (size_t)d->out_h * (size_t)d->out_w;
    float inv_window = 1.0f / (float)(d->r * d->s);
    int max2x2 = cx->is_max && d->r == 2 && d->s == 2 && d->stride_h == 2 && d->stride_w == 2 &&
                 d->pad_h == 0 && d->pad_w == 0;
    for (size_t plane = b; plane < e && max2x2; plane++)
        fg_cpu_max2x2_plane(cx->src + plane * hw, d->w, d->out_h, d->out_w, cx->dst + plane * P,
                            cx->argmax + plane * P);
    for (size_t plane = b; plane < e && !max2x2; plane++) {
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
