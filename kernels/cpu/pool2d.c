/* Max and average pooling over NCHW planes; each (n, c) plane is independent, so the
 * pool splits planes and the result does not depend on the partition. */
#include <math.h>
#include <stdatomic.h>
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FG_CPU_POOL_AVX512 1

/* The 2x2 stride-2 plane with AVX-512, 16 outputs of a row per step: both input rows loaded
 * (masked past the row's end), split into even and odd columns, and the four candidates
 * compared in fg_cpu_max2x2_plane's order with its rule, so y and argmax are its bits.
 * The scalar loop's data-dependent branches made it the CNN's largest cost outside the
 * convolutions (10%); rows of 13 and 5 outputs are too short for the compiler's
 * vectorised loop (tests/kernel-lab/pool_lab.c, versions 2 and 4). */
__attribute__((target("avx512f"))) static void fg_cpu_max2x2_plane_avx512(
    const float *x, int w, int out_h, int out_w, float *y, int32_t *am)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int oh = 0; oh < out_h; oh++) {
        const float *r0 = x + (size_t)(2 * oh) * (size_t)w, *r1 = r0 + w;
        for (int ow = 0; ow < out_w; ow += 16) {
            int n = out_w - ow < 16 ? out_w - ow : 16;
            __mmask16 lo = (__mmask16)(2 * n >= 16 ? 0xFFFFu : (1u << (2 * n)) - 1);
            __mmask16 hi = (__mmask16)(2 * n <= 16 ? 0u : (1u << (2 * n - 16)) - 1);
            __mmask16 out = (__mmask16)(n == 16 ? 0xFFFFu : (1u << n) - 1);
            __m512 l0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * ow);
            __m512 h0 = _mm512_maskz_loadu_ps(hi, r0 + 2 * ow + 16);
            __m512 l1 = _mm512_maskz_loadu_ps(lo, r1 + 2 * ow);
            __m512 h1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * ow + 16);
            __m512 cand[3] = {_mm512_permutex2var_ps(l0, odd, h0),
                              _mm512_permutex2var_ps(l1, even, h1),
                              _mm512_permutex2var_ps(l1, odd, h1)};
            const int32_t cand_off[3] = {1, w, w + 1};
            __m512 best = _mm512_permutex2var_ps(l0, even, h0);
            __m512i off = _mm512_setzero_si512();
            for (int k = 0; k < 3; k++) { /* v replaces best: larger, or the first NaN */
                __m512 v = cand[k];
                __mmask16 t = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                              (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) &
                               _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
                best = _mm512_mask_blend_ps(t, best, v);
                off = _mm512_mask_blend_epi32(t, off, _mm512_set1_epi32(cand_off[k]));
            }
            __m512i col = _mm512_slli_epi32(
                _mm512_add_epi32(_mm512_set1_epi32(ow), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6,
                                                                          7, 8, 9, 10, 11, 12,
                                                                          13, 14, 15)), 1);
            __m512i where = _mm512_add_epi32(_mm512_add_epi32(_mm512_set1_epi32(2 * oh * w), col),
                                             off);
            _mm512_mask_storeu_ps(y + (size_t)oh * (size_t)out_w + ow, out, best);
            _mm512_mask_storeu_epi32(am + (size_t)oh * (size_t)out_w + ow, out, where);
        }
    }
}

static int fg_cpu_has_avx512f(void)
{
    static atomic_int known = -1; /* every thread that finds it unset computes the same */
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k < 0) {
        k = __builtin_cpu_supports("avx512f") ? 1 : 0;
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k;
}
#endif

/* Below 3 outputs a row the vector kernel's set-up costs more than the scalar loop. */
#define FG_CPU_POOL_VECTOR_MIN_OUT_W 3

static void fg_cpu_max2x2_dispatch(const float *x, int w, int out_h, int out_w, float *y,
                                   int32_t *am)
{
#ifdef FG_CPU_POOL_AVX512
    if (out_w >= FG_CPU_POOL_VECTOR_MIN_OUT_W && fg_cpu_has_avx512f()) {
        fg_cpu_max2x2_plane_avx512(x, w, out_h, out_w, y, am);
        return;
    }
#endif
    fg_cpu_max2x2_plane(x, w, out_h, out_w, y, am);
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
        fg_cpu_max2x2_dispatch(cx->src + plane * hw, d->w, d->out_h, d->out_w,
                               cx->dst + plane * P, cx->argmax + plane * P);
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
