/* 2-D convolution as im2col + sgemm over groups of images.
 *
 * For a group of G images the column matrix is (C*R*S, G*P) with P = OH*OW, so the
 * forward product W (K, CRS) x col (CRS, G*P) is one wide gemm (efficient even when one
 * image alone gives a thin matrix), landing in (K, G*P) order; a cheap permutation then
 * writes NCHW and adds the bias. G is picked so the column matrix stays near 2 MiB: it is
 * written and read back from cache rather than memory, and the workspace stays small.
 * Backward reuses the same two buffers per group: dy gathered to (K, G*P),
 * dW (+)= dy2 col^T, dcol = W^T dy2, col2im. im2col, the permutations and col2im run on
 * the pool; the gemms on the calling thread with OpenBLAS's threads. The grouping depends
 * only on the shape, so results do not depend on the thread count (beyond gemm's). */
#include <string.h>

#include "cpu_kernels.h"

typedef struct fg_cpu_conv_ctx {
    const fg_cpu_conv_shape *d;
    const float *src;
    float *dst;
    const float *bias;
} fg_cpu_conv_ctx;

/* Images per group: the column matrix of a group stays near this many bytes. */
#define FG_CPU_CONV_GROUP_BYTES (2u << 20)

static size_t fg_cpu_conv_group(const fg_cpu_conv_shape *d)
{
    size_t per_image = (size_t)d->c * (size_t)d->r * (size_t)d->s * (size_t)d->out_h *
                       (size_t)d->out_w * sizeof(float);
    size_t g = per_image ? FG_CPU_CONV_GROUP_BYTES / per_image : 1;
    if (g < 1)
        g = 1;
    if (g > (size_t)d->n)
        g = (size_t)d->n;
    size_t groups = ((size_t)d->n + g - 1) / g;
    return ((size_t)d->n + groups - 1) / groups; /* even groups: no tiny last one */
}

/* Columns of the column matrix of a (group) shape: N * P. */
static size_t fg_cpu_conv_np(const fg_cpu_conv_shape *d)
{
    return (size_t)d->n * (size_t)d->out_h * (size_t)d->out_w;
}

static size_t fg_cpu_conv_crs(const fg_cpu_conv_shape *d)
{
    return (size_t)d->c * (size_t)d->r * (size_t)d->s;
}

/* Floats of a full group's column matrix, rounded to 64 bytes: the (K, G*P) buffer
 * follows it in the workspace. */
static size_t fg_cpu_conv_col_floats(const fg_cpu_conv_shape *d)
{
    size_t gp = fg_cpu_conv_group(d) * (size_t)d->out_h * (size_t)d->out_w;
    return (fg_cpu_conv_crs(d) * gp + 15) / 16 * 16;
}

size_t fg_cpu_conv2d_workspace(const fg_cpu_conv_shape *d)
{
    size_t gp = fg_cpu_conv_group(d) * (size_t)d->out_h * (size_t)d->out_w;
    return (fg_cpu_conv_col_floats(d) + (size_t)d->k * gp) * sizeof(float);
}

/* The shape of a group of `count` consecutive images of d. */
static fg_cpu_conv_shape fg_cpu_conv_slice(const fg_cpu_conv_shape *d, size_t count)
{
    fg_cpu_conv_shape g = *d;
    g.n = (int)count;
    return g;
}

/* Output positions [lo, hi) whose tap `tap` lands inside an input of `in` pixels:
 * 0 <= o*stride - pad + tap < in. Outside that range the tap reads padding. */
static void fg_cpu_tap_range(int pad, int tap, int stride, int in, int out, int *lo, int *hi)
{
    int first = pad - tap, last = in - 1 + pad - tap; /* o*stride must lie in [first, last] */
    int l = first > 0 ? (first + stride - 1) / stride : 0;
    int h = last >= 0 ? last / stride + 1 : 0;
    h = h < out ? h : out;
    *lo = l < h ? l : h;
    *hi = h;
}

/* Rows [b, e) of col (CRS, N*P): row (c, r, s) holds, for every image and output
 * position, the input pixel that window tap sees (0 in the padding). The in-range span
 * of each output row is found once, so the copy loop has no bounds test. */
static void fg_cpu_im2col_rows(void *p, size_t b, size_t e)
{
    fg_cpu_conv_ctx *cx = p;
    const fg_cpu_conv_shape *d = cx->d;
    size_t P = (size_t)d->out_h * (size_t)d->out_w, np = fg_cpu_conv_np(d);
    size_t ow_n = (size_t)d->out_w;
    for (size_t row = b; row < e; row++) {
        int s = (int)(row % (size_t)d->s), r = (int)(row / (size_t)d->s % (size_t)d->r);
        int c = (int)(row / ((size_t)d->s * (size_t)d->r));
        int oh_lo, oh_hi, ow_lo, ow_hi;
        fg_cpu_tap_range(d->pad_h, r, d->stride_h, d->h, d->out_h, &oh_lo, &oh_hi);
        fg_cpu_tap_range(d->pad_w, s, d->stride_w, d->w, d->out_w, &ow_lo, &ow_hi);
        float *out = cx->dst + row * np;
        for (int n = 0; n < d->n; n++) {
            const float *plane = cx->src + ((size_t)n * (size_t)d->c + (size_t)c) *
                                               (size_t)d->h * (size_t)d->w;
            float *o = out + (size_t)n * P;
            memset(o, 0, (size_t)oh_lo * ow_n * sizeof *o);
            for (int oh = oh_lo; oh < oh_hi; oh++) {
                float *orow = o + (size_t)oh * ow_n;
                const float *in = plane +
                                  (size_t)(oh * d->stride_h - d->pad_h + r) * (size_t)d->w +
                                  (s - d->pad_w);
                memset(orow, 0, (size_t)ow_lo * sizeof *orow);
                if (d->stride_w == 1) {
                    memcpy(orow + ow_lo, in + ow_lo, (size_t)(ow_hi - ow_lo) * sizeof *orow);
                } else {
                    for (int ow = ow_lo; ow < ow_hi; ow++)
                        orow[ow] = in[(ptrdiff_t)ow * d->stride_w];
                }
                memset(orow + ow_hi, 0, (size_t)(d->out_w - ow_hi) * sizeof *orow);
            }
            memset(o + (size_t)oh_hi * ow_n, 0, (size_t)(d->out_h - oh_hi) * ow_n * sizeof *o);
        }
    }
}

static void fg_cpu_im2col(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, const float *x,
                          float *col)
{
    fg_cpu_conv_ctx cx = { d, x, col, NULL };
    size_t np = fg_cpu_conv_np(d);
    size_t grain = np ? FG_CPU_GRAIN / np : 1;
    fg_cpu_parallel_for(pool, fg_cpu_conv_crs(d), grain ? grain : 1, 1, fg_cpu_im2col_rows,
                        &cx);
}

/* Planes [b, e) of (N, K): y[n][k][:] = ybuf[k][n*P : n*P+P] + bias[k]. */
static void fg_cpu_conv_scatter_planes(void *p, size_t b, size_t e)
{
    fg_cpu_conv_ctx *cx = p;
    const fg_cpu_conv_shape *d = cx->d;
    size_t P = (size_t)d->out_h * (size_t)d->out_w, np = fg_cpu_conv_np(d);
    for (size_t plane = b; plane < e; plane++) {
        size_t n = plane / (size_t)d->k, k = plane % (size_t)d->k;
        const float *restrict src = cx->src + k * np + n * P;
        float *restrict dst = cx->dst + plane * P;
        float v = cx->bias ? cx->bias[k] : 0.0f;
        for (size_t i = 0; i < P; i++)
            dst[i] = src[i] + v;
    }
}

/* Planes [b, e) of (N, K): ybuf[k][n*P : n*P+P] = dy[n][k][:]. */
static void fg_cpu_conv_gather_planes(void *p, size_t b, size_t e)
{
    fg_cpu_conv_ctx *cx = p;
    const fg_cpu_conv_shape *d = cx->d;
    size_t P = (size_t)d->out_h * (size_t)d->out_w, np = fg_cpu_conv_np(d);
    for (size_t plane = b; plane < e; plane++) {
        size_t n = plane / (size_t)d->k, k = plane % (size_t)d->k;
        memcpy(cx->dst + k * np + n * P, cx->src + plane * P, P * sizeof(float));
    }
}

static size_t fg_cpu_plane_grain(size_t plane_size)
{
    size_t g = plane_size ? FG_CPU_GRAIN / plane_size : 1;
    return g ? g : 1;
}

void fg_cpu_conv2d_forward(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, const float *x,
                           const float *w, const float *bias, float *y, void *workspace)
{
    size_t crs = fg_cpu_conv_crs(d), G = fg_cpu_conv_group(d);
    size_t P = (size_t)d->out_h * (size_t)d->out_w;
    size_t x_image = (size_t)d->c * (size_t)d->h * (size_t)d->w, y_image = (size_t)d->k * P;
    float *col = workspace;                        /* (CRS, G*P) */
    float *ybuf = col + fg_cpu_conv_col_floats(d); /* (K, G*P) */
    for (size_t first = 0; first < (size_t)d->n; first += G) {
        size_t count = (size_t)d->n - first < G ? (size_t)d->n - first : G;
        fg_cpu_conv_shape g = fg_cpu_conv_slice(d, count);
        size_t np = fg_cpu_conv_np(&g);
        fg_cpu_im2col(pool, &g, x + first * x_image, col);
        fg_cpu_gemm_via(d->gemm, 0, pool, 0, 0, d->k, (int)np, (int)crs, 1.0f, w, (int)crs, col,
                        (int)np, 0.0f, ybuf, (int)np);
        fg_cpu_conv_ctx cx = { &g, ybuf, y + first * y_image, bias };
        fg_cpu_parallel_for(pool, count * (size_t)d->k, fg_cpu_plane_grain(P), 1,
                            fg_cpu_conv_scatter_planes, &cx);
    }
}

/* Planes [b, e) of (N, C): dx[n][c] = sum over taps (r, s) and output positions of
 * dcol[(c, r, s)][n*P + p], in a fixed order. */
static void fg_cpu_col2im_planes(void *p, size_t b, size_t e)
{
    fg_cpu_conv_ctx *cx = p;
    const fg_cpu_conv_shape *d = cx->d;
    size_t P = (size_t)d->out_h * (size_t)d->out_w, np = fg_cpu_conv_np(d);
    size_t hw = (size_t)d->h * (size_t)d->w;
    for (size_t plane = b; plane < e; plane++) {
        size_t n = plane / (size_t)d->c, c = plane % (size_t)d->c;
        float *dx = cx->dst + plane * hw;
        memset(dx, 0, hw * sizeof *dx);
        for (int r = 0; r < d->r; r++) {
            for (int s = 0; s < d->s; s++) {
                size_t row = (c * (size_t)d->r + (size_t)r) * (size_t)d->s + (size_t)s;
                int oh_lo, oh_hi, ow_lo, ow_hi;
                fg_cpu_tap_range(d->pad_h, r, d->stride_h, d->h, d->out_h, &oh_lo, &oh_hi);
                fg_cpu_tap_range(d->pad_w, s, d->stride_w, d->w, d->out_w, &ow_lo, &ow_hi);
                const float *src = cx->src + row * np + n * P;
                for (int oh = oh_lo; oh < oh_hi; oh++) {
                    const float *srow = src + (size_t)oh * (size_t)d->out_w;
                    float *out = dx + (size_t)(oh * d->stride_h - d->pad_h + r) * (size_t)d->w +
                                 (s - d->pad_w);
                    if (d->stride_w == 1) {
                        for (int ow = ow_lo; ow < ow_hi; ow++)
                            out[ow] += srow[ow];
                    } else {
                        for (int ow = ow_lo; ow < ow_hi; ow++)
                            out[(ptrdiff_t)ow * d->stride_w] += srow[ow];
                    }
                }
            }
        }
    }
}

void fg_cpu_conv2d_backward(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, const float *x,
                            const float *w, const float *dy, float *dx, float *dw,
                            float *dbias, int accumulate, void *workspace)
{
    size_t crs = fg_cpu_conv_crs(d), G = fg_cpu_conv_group(d);
    size_t P = (size_t)d->out_h * (size_t)d->out_w, hw = (size_t)d->h * (size_t)d->w;
    size_t x_image = (size_t)d->c * hw, y_image = (size_t)d->k * P;
    float *col = workspace;                         /* (CRS, G*P) */
    float *dybuf = col + fg_cpu_conv_col_floats(d); /* (K, G*P) */
    for (size_t first = 0; first < (size_t)d->n; first += G) {
        size_t count = (size_t)d->n - first < G ? (size_t)d->n - first : G;
        fg_cpu_conv_shape g = fg_cpu_conv_slice(d, count);
        size_t np = fg_cpu_conv_np(&g);
        int acc = accumulate || first > 0; /* later groups add to the earlier ones */
        fg_cpu_conv_ctx gx = { &g, dy + first * y_image, dybuf, NULL };
        fg_cpu_parallel_for(pool, count * (size_t)d->k, fg_cpu_plane_grain(P), 1,
                            fg_cpu_conv_gather_planes, &gx);
        if (dbias)
            fg_cpu_bias_grad(pool, dbias, dybuf, 1, d->k, (int)np, acc);
        if (dw) {
            fg_cpu_im2col(pool, &g, x + first * x_image, col);
            fg_cpu_gemm_via(d->gemm, 0, pool, 0, 1, d->k, (int)crs, (int)np, 1.0f, dybuf, (int)np,
                            col, (int)np, acc ? 1.0f : 0.0f, dw, (int)crs);
        }
        if (dx) {
            fg_cpu_gemm_via(d->gemm, 0, pool, 1, 0, (int)crs, (int)np, d->k, 1.0f, w, (int)crs,
                            dybuf, (int)np, 0.0f, col, (int)np);
            fg_cpu_conv_ctx cx = { &g, col, dx + first * x_image, NULL };
            fg_cpu_parallel_for(pool, count * (size_t)d->c, fg_cpu_plane_grain(hw), 1,
                                fg_cpu_col2im_planes, &cx);
        }
    }
}
