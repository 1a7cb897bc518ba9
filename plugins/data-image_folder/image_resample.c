/* Separable antialiased bilinear resampling of a box of an 8-bit image (Pillow's
 * precompute_coeffs, in float). */
#include "image_resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The filter taps of one axis for the window's output positions. */
typedef struct axis_taps {
    int ksize;   /* taps per position at most */
    int *start;  /* (n) first source index */
    int *count;  /* (n) taps; 0 for a position outside the scaled image */
    float *w;    /* (n, ksize) normalised weights */
} axis_taps;

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static void axis_taps_free(axis_taps *t)
{
    free(t->start);
    free(t->count);
    free(t->w);
}

/* Positions w0 .. w0 + n - 1 of an axis of `v` outputs scaled from [in0, in0 + len) of a
 * source axis of `total` pixels. */
static int axis_taps_make(double in0, double len, int total, int v, int w0, int n,
                          axis_taps *t)
{
    double scale = len / v, fscale = scale > 1.0 ? scale : 1.0, support = fscale;
    t->ksize = (int)ceil(support) * 2 + 1;
    t->start = calloc((size_t)n, sizeof *t->start);
    t->count = calloc((size_t)n, sizeof *t->count);
    t->w = calloc((size_t)n * (size_t)t->ksize, sizeof *t->w);
    if (!t->start || !t->count || !t->w)
        return 0;
    for (int i = 0; i < n; i++) {
        int xx = w0 + i;
        if (xx < 0 || xx >= v)
            continue;
        double center = in0 + (xx + 0.5) * scale;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0)
            lo = 0;
        if (hi > total)
            hi = total;
        int taps = hi - lo < t->ksize ? hi - lo : t->ksize;
        if (taps < 1)
            continue;
        float *w = t->w + (size_t)i * (size_t)t->ksize;
        double sum = 0.0;
        for (int k = 0; k < taps; k++)
            sum += triangle((k + lo - center + 0.5) / fscale);
        for (int k = 0; k < taps && sum > 0.0; k++)
            w[k] = (float)(triangle((k + lo - center + 0.5) / fscale) / sum);
        t->start[i] = lo;
        t->count[i] = taps;
    }
    return 1;
}

/* tmp (rows, ow, C) = horizontal pass over source rows [r0, r0 + rows). */
static void horizontal(const image_u8 *src, const axis_taps *tx, int ow, int r0, int rows,
                       float *tmp)
{
    const int C = src->channels;
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = src->pixels + (size_t)(r0 + r) * (size_t)src->width * (size_t)C;
        float *out = tmp + (size_t)r * (size_t)ow * (size_t)C;
        for (int x = 0; x < ow; x++) {
            const float *w = tx->w + (size_t)x * (size_t)tx->ksize;
            const uint8_t *p = row + (size_t)tx->start[x] * (size_t)C;
            for (int c = 0; c < C; c++) {
                float acc = 0.0f;
                for (int k = 0; k < tx->count[x]; k++)
                    acc += w[k] * (float)p[k * C + c];
                out[x * C + c] = acc;
            }
        }
    }
}

static uint8_t round_u8(float v)
{
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)(v + 0.5f);
}

static void vertical(const float *tmp, const axis_taps *ty, int r0, int oh, int ow, int C,
                     uint8_t *dst)
{
    size_t row_elems = (size_t)ow * (size_t)C;
    for (int y = 0; y < oh; y++) {
        uint8_t *out = dst + (size_t)y * row_elems;
        if (ty->count[y] == 0) {
            memset(out, 0, row_elems);
            continue;
        }
        const float *w = ty->w + (size_t)y * (size_t)ty->ksize;
        const float *base = tmp + (size_t)(ty->start[y] - r0) * row_elems;
        for (size_t e = 0; e < row_elems; e++) {
            float acc = 0.0f;
            for (int k = 0; k < ty->count[y]; k++)
                acc += w[k] * base[(size_t)k * row_elems + e];
            out[e] = round_u8(acc);
        }
    }
}

fg_status image_resample(const char *path, const image_u8 *src, const resample_spec *s,
                         uint8_t *dst, fg_error *err)
{
    axis_taps tx = {0}, ty = {0};
    float *tmp = NULL;
    fg_status st = FG_OK;
    if (!axis_taps_make(s->box_x, s->box_w, src->width, s->vw, s->wx, s->ow, &tx) ||
        !axis_taps_make(s->box_y, s->box_h, src->height, s->vh, s->wy, s->oh, &ty)) {
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory resampling", path);
        goto done;
    }
    int r0 = src->height, r1 = 0; /* the source rows the vertical taps read */
    for (int y = 0; y < s->oh; y++)
        if (ty.count[y] > 0) {
            r0 = ty.start[y] < r0 ? ty.start[y] : r0;
            r1 = ty.start[y] + ty.count[y] > r1 ? ty.start[y] + ty.count[y] : r1;
        }
    int rows = r1 > r0 ? r1 - r0 : 0;
    tmp = malloc(((size_t)rows * (size_t)s->ow * (size_t)src->channels + 1) * sizeof *tmp);
    if (!tmp) {
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory resampling", path);
        goto done;
    }
    horizontal(src, &tx, s->ow, r0, rows, tmp);
    vertical(tmp, &ty, r0, s->oh, s->ow, src->channels, dst);
done:
    free(tmp);
    axis_taps_free(&tx);
    axis_taps_free(&ty);
    return st;
}
