/* Kernel lab: max pooling forward + backward over NCHW planes (kernels/cpu/pool2d.c), the
 * CNN's 2x2 windows at stride 2 (tests/bench/cnn.ini: 128 x 32 x 26 x 26 and
 * 128 x 64 x 11 x 11, the second with an odd side) and a general 3x3 window at stride 2 with
 * padding 1.
 *
 *   version 0  reference: every window read in full, bounds checked, the first maximum kept
 *              (NaN propagates)
 *   version 1  kernels/cpu/pool2d.c as of d8ca546: a 2x2 stride-2 path without bounds
 *              checks; backward zeroes the plane, then adds dy at each window's argmax
 *   version 2  version 1 compiled for AVX-512 / AVX2 as well (FG_CPU_VECTOR_CLONES)
 *   version 3  version 1 whose backward writes each non-overlapping 2x2 window whole (dy at
 *              the argmax, zeros around it) in one pass, zeroing only what no window covers
 *   version 4  (the product's forward since 2026-11-26, "kernels/cpu now" below) the 2x2
 *              stride-2 forward in AVX-512 intrinsics, 16 outputs of a row per step: masked
 *              loads of both rows, even/odd columns by permutes, the scalar compare order
 *
 * Versions 1-3, measured first: none won; version 1 stayed. On 2 threads (fastest rounds,
 * 128 x 32 x 26 x 26): version 1 2.2 ms, version 2 4.7 ms (the AVX-512 clones of the
 * strided 2x2 loop and the scatter are slower: rows of 13 outputs leave the vector loop to
 * its scalar tail), version 3 2.7 ms (the memset and scatter of version 1 stay in L1: one
 * plane is 2.7 KiB). Version 4 (one thread, the forward alone, a /tmp harness with NaN,
 * ties and -0): 26 x 26 planes 1.29 -> 0.74 ms, 11 x 11 1.07 -> 0.12 ms, 64 x 64 8.0 ->
 * 6.0 ms; slower below 3 outputs a row, where the product keeps the scalar loop.
 *
 * Pooling moves values and adds each dy to one zero, so every version must give the
 * reference's y, argmax and dx bit for bit (dx = 0.0f + dy, so a -0 dy gives +0 as the
 * scatter's sum does).
 *
 *   pool_lab check                 (ctest kernel_lab.pool)
 *   pool_lab time [N C H W]        median us of forward + backward per version */
#include "lab.h" /* first: it sets _POSIX_C_SOURCE */

#include <math.h>

#include "cpu_kernels.h"

#define LAB_INLINE static inline __attribute__((always_inline))

typedef struct lab_pool_ctx {
    const fg_cpu_conv_shape *d;
    int is_max;
    const float *src;
    float *dst;
    int32_t *argmax;
    const int32_t *argmax_in;
} lab_pool_ctx;

/* ---- version 0 ------------------------------------------------------------------------- */

static void v0_forward(const fg_cpu_conv_shape *d, const float *x, float *y, int32_t *am)
{
    for (size_t pl = 0; pl < (size_t)d->n * d->c; pl++)
        for (int oh = 0; oh < d->out_h; oh++)
            for (int ow = 0; ow < d->out_w; ow++) {
                float best = 0.0f;
                int32_t where = -1;
                for (int r = 0; r < d->r; r++)
                    for (int s = 0; s < d->s; s++) {
                        int ih = oh * d->stride_h - d->pad_h + r, iw = ow * d->stride_w - d->pad_w + s;
                        if (ih < 0 || ih >= d->h || iw < 0 || iw >= d->w)
                            continue;
                        float v = x[pl * d->h * d->w + (size_t)ih * d->w + iw];
                        if (where < 0 || v > best || (isnan(v) && !isnan(best))) {
                            best = v;
                            where = ih * d->w + iw;
                        }
                    }
                size_t o = pl * d->out_h * d->out_w + (size_t)oh * d->out_w + ow;
                y[o] = best;
                am[o] = where;
            }
}

static void v0_backward(const fg_cpu_conv_shape *d, const float *dy, const int32_t *am, float *dx)
{
    size_t hw = (size_t)d->h * d->w, P = (size_t)d->out_h * d->out_w;
    for (size_t i = 0; i < (size_t)d->n * d->c * hw; i++)
        dx[i] = 0.0f;
    for (size_t pl = 0; pl < (size_t)d->n * d->c; pl++)
        for (size_t o = 0; o < P; o++)
            if (am[pl * P + o] >= 0)
                dx[pl * hw + (size_t)am[pl * P + o]] += dy[pl * P + o];
}

/* ---- versions 1-3: the product's loops as of d8ca546 ------------------------------------ */

/* v replaces best when larger, or when it is the first NaN (PyTorch propagates NaN); the
 * first maximum wins ties. */
LAB_INLINE int lab_max_takes(float v, float best) { return v > best || (v != v && best == best); }

/* The CNN's common case, 2x2 windows at stride 2 without padding: every window lies inside
 * the plane, so no bounds checks and no sum; the compares become conditional moves. */
LAB_INLINE void lab_max2x2_plane(const float *x, int w, int out_h, int out_w, float *y, int32_t *am)
{
    for (int oh = 0; oh < out_h; oh++) {
        const float *r0 = x + (size_t)(2 * oh) * (size_t)w, *r1 = r0 + w;
        int32_t base = 2 * oh * w;
        for (int ow = 0; ow < out_w; ow++) {
            int i = 2 * ow;
            float best = r0[i];
            int32_t where = base + i;
            if (lab_max_takes(r0[i + 1], best)) { best = r0[i + 1]; where = base + i + 1; }
            if (lab_max_takes(r1[i], best)) { best = r1[i]; where = base + w + i; }
            if (lab_max_takes(r1[i + 1], best)) { best = r1[i + 1]; where = base + w + i + 1; }
            y[(size_t)oh * (size_t)out_w + (size_t)ow] = best;
            am[(size_t)oh * (size_t)out_w + (size_t)ow] = where;
        }
    }
}

LAB_INLINE void lab_forward_body(void *p, size_t b, size_t e)
{
    lab_pool_ctx *cx = p;
    const fg_cpu_conv_shape *d = cx->d;
    size_t hw = (size_t)d->h * (size_t)d->w, P = (size_t)d->out_h * (size_t)d->out_w;
    float inv_window = 1.0f / (float)(d->r * d->s);
    int max2x2 = cx->is_max && d->r == 2 && d->s == 2 && d->stride_h == 2 && d->stride_w == 2 &&
                 d->pad_h == 0 && d->pad_w == 0;
    for (size_t plane = b; plane < e && max2x2; plane++)
        lab_max2x2_plane(cx->src + plane * hw, d->w, d->out_h, d->out_w, cx->dst + plane * P,
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

LAB_INLINE void lab_backward_body(void *p, size_t b, size_t e)
{
    lab_pool_ctx *cx = p;
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


/* version 3's backward: 2x2 windows at stride 2, no padding, so no two windows share an
 * input; the last row and column of an odd side belong to none. */
LAB_INLINE void v3_backward_body(void *p, size_t b, size_t e)
{
    lab_pool_ctx *cx = p;
    const fg_cpu_conv_shape *d = cx->d;
    size_t hw = (size_t)d->h * (size_t)d->w, P = (size_t)d->out_h * (size_t)d->out_w;
    int w = d->w;
    for (size_t plane = b; plane < e; plane++) {
        const float *dy = cx->src + plane * P;
        const int32_t *am = cx->argmax_in + plane * P;
        float *dx = cx->dst + plane * hw;
        for (int oh = 0; oh < d->out_h; oh++) {
            float *r0 = dx + (size_t)(2 * oh) * (size_t)w, *r1 = r0 + w;
            int32_t base = 2 * oh * w;
            for (int ow = 0; ow < d->out_w; ow++) {
                size_t o = (size_t)oh * (size_t)d->out_w + (size_t)ow;
                float g = 0.0f + dy[o];
                int32_t at = am[o], i = 2 * ow;
                r0[i] = at == base + i ? g : 0.0f;
                r0[i + 1] = at == base + i + 1 ? g : 0.0f;
                r1[i] = at == base + w + i ? g : 0.0f;
                r1[i + 1] = at == base + w + i + 1 ? g : 0.0f;
            }
            if (w % 2)
                r0[w - 1] = r1[w - 1] = 0.0f;
        }
        if (d->h % 2)
            memset(dx + (size_t)(d->h - 1) * (size_t)w, 0, (size_t)w * sizeof *dx);
    }
}

static void v1_fwd(void *p, size_t b, size_t e) { lab_forward_body(p, b, e); }
static void v1_bwd(void *p, size_t b, size_t e) { lab_backward_body(p, b, e); }
LAB_CLONES static void v2_fwd(void *p, size_t b, size_t e) { lab_forward_body(p, b, e); }
LAB_CLONES static void v2_bwd(void *p, size_t b, size_t e) { lab_backward_body(p, b, e); }
static void v3_bwd(void *p, size_t b, size_t e)
{
    lab_pool_ctx *cx = p;
    const fg_cpu_conv_shape *d = cx->d;
    if (d->r == 2 && d->s == 2 && d->stride_h == 2 && d->stride_w == 2 && d->pad_h == 0 &&
        d->pad_w == 0)
        v3_backward_body(p, b, e);
    else
        lab_backward_body(p, b, e);
}

typedef struct pool_bufs {
    float *x, *y, *dy, *dx;
    int32_t *am;
} pool_bufs;

static void run_planes(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, pool_bufs *m,
                       fg_cpu_range_fn fwd, fg_cpu_range_fn bwd)
{
    size_t planes = (size_t)d->n * (size_t)d->c;
    size_t fw = (size_t)d->out_h * d->out_w * d->r * d->s, bw = (size_t)d->h * d->w + (size_t)d->out_h * d->out_w;
    lab_pool_ctx f = { d, 1, m->x, m->y, m->am, NULL }, b = { d, 1, m->dy, m->dx, NULL, m->am };
    fg_cpu_parallel_for(pool, planes, FG_CPU_GRAIN / fw + 1, 1, fwd, &f);
    fg_cpu_parallel_for(pool, planes, FG_CPU_GRAIN / bw + 1, 1, bwd, &b);
}

typedef void (*lab_pool_fn)(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, pool_bufs *m);

static void run_v0(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, pool_bufs *m)
{
    (void)pool;
    v0_forward(d, m->x, m->y, m->am);
    v0_backward(d, m->dy, m->am, m->dx);
}
static void run_v1(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, pool_bufs *m) { run_planes(pool, d, m, v1_fwd, v1_bwd); }
static void run_v2(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, pool_bufs *m) { run_planes(pool, d, m, v2_fwd, v2_bwd); }
static void run_v3(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, pool_bufs *m) { run_planes(pool, d, m, v1_fwd, v3_bwd); }

static void run_product(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, pool_bufs *m)
{
    fg_cpu_pool2d_forward(pool, 1, d, m->x, m->y, m->am);
    fg_cpu_pool2d_backward(pool, 1, d, m->dy, m->am, m->dx);
}

static const struct {
    const char *name;
    lab_pool_fn fn;
} versions[] = {
    { "v0 reference", run_v0 },
    { "v1 2x2 path, scatter", run_v1 },
    { "v2 v1 + AVX-512 clones", run_v2 },
    { "v3 one-pass backward", run_v3 },
    { "kernels/cpu now", run_product },
};
#define NVERSIONS (sizeof versions / sizeof versions[0])

static fg_cpu_conv_shape shape_of(int n, int c, int h, int w, int k, int stride, int pad)
{
    fg_cpu_conv_shape d = {.n = n, .c = c, .h = h, .w = w, .r = k, .s = k, .pad_h = pad,
                           .pad_w = pad, .stride_h = stride, .stride_w = stride};
    d.out_h = (h + 2 * pad - k) / stride + 1;
    d.out_w = (w + 2 * pad - k) / stride + 1;
    return d;
}

static void bufs_init(pool_bufs *m, const fg_cpu_conv_shape *d)
{
    size_t nx = (size_t)d->n * d->c * d->h * d->w, ny = (size_t)d->n * d->c * d->out_h * d->out_w;
    m->x = lab_alloc(nx), m->dx = lab_alloc(nx), m->y = lab_alloc(ny), m->dy = lab_alloc(ny);
    m->am = malloc(ny * sizeof *m->am);
    if (!m->am) {
        fprintf(stderr, "pool lab: out of memory\n");
        exit(1);
    }
    lab_fill(m->x, nx, 31), lab_fill(m->dy, ny, 32);
    for (size_t i = 0; i < nx; i += 7) /* ties: the first maximum must win */
        m->x[i] = m->x[i + 1 < nx ? i + 1 : i];
    for (size_t i = 0; i + (size_t)d->w < nx; i += 11) /* and ties across a window's rows */
        m->x[i + (size_t)d->w] = m->x[i];
    for (size_t i = 0; i < nx; i += 101)
        m->x[i] = NAN;
    for (size_t i = 0; i < ny; i += 13)
        m->dy[i] = -0.0f;
}

static void bufs_free(pool_bufs *m)
{
    free(m->x), free(m->dx), free(m->y), free(m->dy), free(m->am);
}

static int check(fg_cpu_pool *pool)
{
    const fg_cpu_conv_shape shapes[] = {
        shape_of(4, 3, 26, 26, 2, 2, 0), shape_of(3, 5, 11, 11, 2, 2, 0),
        shape_of(2, 3, 9, 12, 3, 2, 1), shape_of(2, 2, 7, 5, 2, 1, 0),
        /* rows of 35 and 3 outputs: two full 16-output steps and a tail; the smallest row
         * the vector kernel takes */
        shape_of(2, 3, 10, 70, 2, 2, 0), shape_of(2, 3, 7, 6, 2, 2, 0),
    };
    int bad = 0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const fg_cpu_conv_shape *d = &shapes[sh];
        size_t nx = (size_t)d->n * d->c * d->h * d->w, ny = (size_t)d->n * d->c * d->out_h * d->out_w;
        pool_bufs r, m;
        bufs_init(&r, d), bufs_init(&m, d);
        run_v0(pool, d, &r);
        for (size_t v = 1; v < NVERSIONS; v++) {
            memset(m.y, 0xff, ny * 4), memset(m.dx, 0xff, nx * 4), memset(m.am, 0xff, ny * 4);
            versions[v].fn(pool, d, &m);
            size_t dy = lab_first_diff(m.y, r.y, ny), dx = lab_first_diff(m.dx, r.dx, nx);
            int am_same = memcmp(m.am, r.am, ny * sizeof *m.am) == 0;
            if (dy < ny || dx < nx || !am_same) {
                printf("FAIL %s, %dx%d window %d stride %d pad %d on %dx%d: %s differs\n",
                       versions[v].name, d->r, d->s, d->r, d->stride_h, d->pad_h, d->h, d->w,
                       dy < ny ? "y" : dx < nx ? "dx" : "argmax");
                bad = 1;
            }
        }
        bufs_free(&r), bufs_free(&m);
    }
    if (!bad)
        printf("pool lab: %zu versions x %zu shapes equal the reference bit for bit (y, argmax, "
               "dx)\n", NVERSIONS - 1, sizeof shapes / sizeof shapes[0]);
    return bad;
}

static void time_versions(fg_cpu_pool *pool, fg_cpu_conv_shape d)
{
    enum { ROUNDS = 21 };
    pool_bufs m;
    bufs_init(&m, &d);
    static double t[NVERSIONS][ROUNDS];
    int calls = (int)(2e7 / ((double)d.n * d.c * d.h * d.w)) + 1;
    for (int r = 0; r < ROUNDS; r++)
        for (size_t v = 1; v < NVERSIONS; v++) {
            double t0 = lab_now();
            for (int k = 0; k < calls; k++)
                versions[v].fn(pool, &d, &m);
            t[v][r] = (lab_now() - t0) / calls;
        }
    printf("pool lab: max %dx%d stride %d over %d x %d x %d x %d, %d threads; median of %d "
           "rounds of %d forward + backward, the versions taking turns\n", d.r, d.s, d.stride_h,
           d.n, d.c, d.h, d.w, fg_cpu_pool_threads(pool), ROUNDS, calls);
    for (size_t v = 1; v < NVERSIONS; v++) {
        double med = lab_median(t[v], ROUNDS);
        printf("  %-26s %8.1f us  (fastest %8.1f us)\n", versions[v].name, med * 1e6,
               t[v][0] * 1e6);
    }
    bufs_free(&m);
}

static int time_main(fg_cpu_pool *pool, int argc, char **argv)
{
    fg_cpu_conv_shape d = shape_of(128, 32, 26, 26, 2, 2, 0);
    if (argc >= 4)
        d = shape_of(atoi(argv[0]), atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), 2, 2, 0);
    if (d.n < 1 || d.c < 1 || d.h < 2 || d.w < 2) {
        fprintf(stderr, "pool lab: N, C >= 1 and H, W >= 2\n");
        return 2;
    }
    time_versions(pool, d);
    return 0;
}

int main(int argc, char **argv)
{
    return lab_main(argc, argv, "pool", "[N C H W]", check, time_main);
}
