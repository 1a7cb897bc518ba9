/* The per-sample pipeline: decode, a geometric stage that leaves an 8-bit "base" image
 * and where the output window sits on it, then one pass that applies padding offsets and
 * flip while it writes normalised floats. */
#include "image_pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image_decode.h"
#include "image_resample.h"

void image_target_init(image_target *t, const image_config *cfg, int oh, int ow,
                       const char *size_from)
{
    t->oh = oh;
    t->ow = ow;
    t->size_from = size_from;
    for (int c = 0; c < cfg->channels; c++)
        for (int v = 0; v < 256; v++)
            t->lut[c][v] = ((float)v / 255.0f - cfg->mean[c]) / cfg->std[c];
}

void image_resize_short(int h, int w, int n, int *rh, int *rw)
{
    int64_t shorter = w <= h ? w : h, longer = w <= h ? h : w;
    int new_long = (int)((double)((int64_t)n * longer) / (double)shorter);
    *rw = w <= h ? n : new_long;
    *rh = w <= h ? new_long : n;
}

/* torchvision's center_crop offset along one axis: round half to even when cropping,
 * minus the left/top padding when the crop is larger than the image. */
static int center_offset(int in, int out)
{
    if (out > in)
        return -((out - in) / 2);
    return (int)rint((in - out) / 2.0);
}

/* The 8-bit image the output window reads from, and the window's origin on it. */
typedef struct base_view {
    const uint8_t *pixels; /* (h, w, C) */
    int h, w;
    int oy, ox;
    uint8_t *owned;        /* resampled pixels, freed after the sample */
} base_view;

static fg_status resample_into(const char *path, const image_u8 *img, const resample_spec *s,
                               base_view *b, fg_error *err)
{
    b->owned = malloc((size_t)s->oh * (size_t)s->ow * (size_t)img->channels);
    if (!b->owned)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory resampling", path);
    *b = (base_view){b->owned, s->oh, s->ow, 0, 0, b->owned};
    return image_resample(path, img, s, b->owned, err);
}

/* Without resize, center_crop or a random resized crop, an image must be the target's size. */
static int exact_size_only(const image_config *cfg, const sample_rng *rng)
{
    return !(rng && cfg->rrc) && !cfg->resize_short && !cfg->resize_h && !cfg->crop_h;
}

static fg_status check_size(const image_target *t, const char *path, int h, int w,
                            fg_error *err)
{
    if (h != t->oh || w != t->ow)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: %d x %d pixels (height x width), expected %d x %d (%s); set "
                            "resize and/or center_crop to accept other sizes",
                            path, h, w, t->oh, t->ow, t->size_from);
    return FG_OK;
}

/* The header's size, before any pixel memory is taken: a small file can declare an image
 * of a gigabyte (a decompression bomb), refused here rather than after its decode. */
static fg_status probe_size(const image_config *cfg, const image_target *t, const char *path,
                            const uint8_t *file, size_t size, const sample_rng *rng,
                            fg_error *err)
{
    if (!exact_size_only(cfg, rng))
        return FG_OK;
    int h = 0, w = 0;
    fg_status st = image_probe(path, file, size, &h, &w, err);
    return st == FG_OK ? check_size(t, path, h, w, err) : st;
}

static fg_status geometry(const image_config *cfg, const image_target *t, const char *path,
                          const image_u8 *img, sample_rng *rng, base_view *b, fg_error *err)
{
    *b = (base_view){img->pixels, img->height, img->width, 0, 0, NULL};
    if (rng && cfg->rrc) {
        crop_rect r = augment_random_resized_crop(rng, img->height, img->width, cfg->rrc_scale,
                                                  cfg->rrc_ratio);
        resample_spec s = {r.left, r.top, r.w, r.h, t->oh, t->ow, 0, 0, t->oh, t->ow};
        return resample_into(path, img, &s, b, err);
    }
    if (cfg->resize_short || cfg->resize_h) {
        int rh = cfg->resize_h, rw = cfg->resize_w;
        if (cfg->resize_short)
            image_resize_short(img->height, img->width, cfg->resize_short, &rh, &rw);
        int top = center_offset(rh, t->oh), left = center_offset(rw, t->ow);
        if (rh != img->height || rw != img->width) {
            resample_spec s = {0, 0, img->width, img->height, rh, rw, top, left, t->oh, t->ow};
            return resample_into(path, img, &s, b, err);
        }
        b->oy = top;
        b->ox = left;
        return FG_OK;
    }
    if (cfg->crop_h) {
        b->oy = center_offset(img->height, t->oh);
        b->ox = center_offset(img->width, t->ow);
        return FG_OK;
    }
    return check_size(t, path, img->height, img->width, err);
}

/* out (C, oh, ow): the window of the base image, shifted and flipped as drawn; pixels
 * outside the base are 0 (torchvision's zero padding). */
static void write_window(const base_view *b, const image_target *t, int C, const sample_draw *d,
                         int pad, int raw, float *out)
{
    int oy = b->oy + d->dy - pad, ox = b->ox + d->dx - pad;
    for (int c = 0; c < C; c++) {
        const float *lut = t->lut[c];
        for (int y = 0; y < t->oh; y++) {
            float *dst = out + ((size_t)c * (size_t)t->oh + (size_t)y) * (size_t)t->ow;
            int sy = y + oy;
            const uint8_t *row = sy >= 0 && sy < b->h ? b->pixels + (size_t)sy * (size_t)b->w * (size_t)C : NULL;
            for (int x = 0; x < t->ow; x++) {
                int sx = (d->flip ? t->ow - 1 - x : x) + ox;
                uint8_t v = row && sx >= 0 && sx < b->w ? row[(size_t)sx * (size_t)C + (size_t)c] : 0;
                dst[x] = raw ? (float)v / 255.0f : lut[v];
            }
        }
    }
}

static void normalise(const image_config *cfg, const image_target *t, float *out)
{
    size_t plane = (size_t)t->oh * (size_t)t->ow;
    for (int c = 0; c < cfg->channels; c++)
        for (size_t i = 0; i < plane; i++)
            out[c * plane + i] = (out[c * plane + i] - cfg->mean[c]) / cfg->std[c];
}

fg_status image_pipeline_sample(const image_config *cfg, const image_target *t,
                                const char *path, sample_rng *rng, float *out, fg_error *err)
{
    uint8_t *file = NULL;
    size_t size = 0;
    image_u8 img = {0};
    base_view b = {0};
    fg_status st = image_read_file(path, &file, &size, err);
    if (st == FG_OK)
        st = probe_size(cfg, t, path, file, size, rng, err);
    if (st == FG_OK)
        st = image_decode(path, file, size, cfg->channels, &img, err);
    free(file);
    if (st == FG_OK)
        st = geometry(cfg, t, path, &img, rng, &b, err);
    if (st == FG_OK) {
        sample_draw d = {0};
        d.jitter.brightness = d.jitter.contrast = 1.0f;
        if (rng)
            augment_draw(rng, cfg, &d);
        int jitter = d.jitter.brightness != 1.0f || d.jitter.contrast != 1.0f;
        write_window(&b, t, cfg->channels, &d, rng ? cfg->pad : 0, jitter, out);
        if (jitter) {
            augment_jitter(&d.jitter, out, cfg->channels, (int64_t)t->oh * t->ow);
            normalise(cfg, t, out);
        }
    }
    free(b.owned);
    image_u8_free(&img);
    return st;
}
