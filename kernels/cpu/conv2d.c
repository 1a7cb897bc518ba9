/* 2-D convolution as im2col + one sgemm over the whole batch.
 *
 * The column matrix is (C*R*S, N*P) with P = OH*OW, so the forward product
 * W (K, CRS) x col (CRS, N*P) is one large gemm (efficient even when a single image gives a
 * thin matrix), landing in (K, N*P) order; a cheap permutation then writes NCHW. Backward
 * reuses the same two buffers: dy gathered to (K, N*P), dW = dy2 col^T, dcol = W^T dy2,
 * col2im. im2col, the permutations and col2im run on the pool; the gemms on the calling
 * thread with OpenBLAS's threads. */
#include <string.h>

#include "cpu_kernels.h"

typedef struct fg_cpu_conv_ctx {
    const fg_cpu_conv_shape *d;
    const float *src;
    float *dst;
    const float *bias;
} fg_cpu_conv_ctx;

static size_t fg_cpu_conv_np(const fg_cpu_conv_shape *d)
{
    return (size_t)d->n * (size_t)d->out_h * (size_t)d->out_w;
}

static size_t fg_cpu_conv_crs(const fg_cpu_conv_shape *d)
{
    return (size_t)d->c * (size_t)d->r * (size_t)d->s;
}

/* Floats before the (K, N*P) buffer, rounded to a 64-byte boundary. */
static size_t fg_cpu_conv_col_floats(const fg_cpu_conv_shape *d)
{
    return (fg_cpu_conv_crs(d) * fg_cpu_conv_np(d) + 15) / 16 * 16;
}

size_t fg_cpu_conv2d_workspace(const fg_cpu_conv_shape *d)
{
    return (fg_cpu_conv_col_floats(d) + (size_t)d->k * fg_cpu_conv_np(d)) * sizeof(float);
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
    size_t np = fg_cpu_conv_np(d), crs = fg_cpu_conv_crs(d);
    size_t P = (size_t)d->out_h * (size_t)d->out_w;
    float *col = workspace;                              /* (CRS, N*P) */
    float *ybuf = col + fg_cpu_conv_col_floats(d);        /* (K, N*P) */
    fg_cpu_im2col(pool, d, x, col);
    fg_cpu_gemm(0, 0, d->k, (int)np, (int)crs, 1.0f, w, (int)crs, col, (int)np, 0.0f, ybuf,
                (int)np);
    fg_cpu_conv_ctx cx = { d, ybuf, y, bias };
    fg_cpu_parallel_for(pool, (size_t)d->n * (size_t)d->k, fg_cpu_plane_grain(P), 1,
                        fg_cpu_conv_scatter_planes, &cx);
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
    size_t np = fg_cpu_conv_np(d), crs = fg_cpu_conv_crs(d);
    size_t P = (size_t)d->out_h * (size_t)d->out_w;
    float *col = workspace;                              /* (CRS, N*P) */
    float *dybuf = col + fg_cpu_conv_col_floats(d);       /* (K, N*P) */
    fg_cpu_conv_ctx gx = { d, dy, dybuf, NULL };
    fg_cpu_parallel_for(pool, (size_t)d->n * (size_t)d->k, fg_cpu_plane_grain(P), 1,
                        fg_cpu_conv_gather_planes, &gx);
    if (dbias)
        fg_cpu_bias_grad(pool, dbias, dybuf, 1, d->k, (int)np, accumulate);
    if (dw) {
        fg_cpu_im2col(pool, d, x, col);
        fg_cpu_gemm(0, 1, d->k, (int)crs, (int)np, 1.0f, dybuf, (int)np, col, (int)np,
                    accumulate ? 1.0f : 0.0f, dw, (int)crs);
    }
    if (dx) {
        fg_cpu_gemm(1, 0, (int)crs, (int)np, d->k, 1.0f, w, (int)crs, dybuf, (int)np, 0.0f,
                    col, (int)np);
        fg_cpu_conv_ctx cx = { d, col, dx, NULL };
        fg_cpu_parallel_for(pool, (size_t)d->n * (size_t)d->c,
                            fg_cpu_plane_grain((size_t)d->h * (size_t)d->w), 1,
                            fg_cpu_col2im_planes, &cx);
    }
}
