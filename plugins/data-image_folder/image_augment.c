/* Per-sample random draws (a counter-based stream) and the colour jitter. */
#include "image_augment.h"

#include <math.h>

#define GOLDEN 0x9e3779b97f4a7c15ull

/* splitmix64's finalizer: a bijection that mixes every input bit into every output bit. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sample_rng_init(sample_rng *r, uint64_t seed, int64_t epoch, int64_t index)
{
    uint64_t k = mix64(seed + GOLDEN);
    k = mix64(k ^ ((uint64_t)epoch + 2 * GOLDEN));
    r->state = mix64(k ^ ((uint64_t)index + 3 * GOLDEN));
}

double sample_rng_uniform(sample_rng *r)
{
    r->state += GOLDEN;
    return (double)(mix64(r->state) >> 11) * 0x1.0p-53;
}

static double uniform_in(sample_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * sample_rng_uniform(r);
}

/* An integer in [lo, hi). */
static int randint(sample_rng *r, int lo, int hi)
{
    int v = lo + (int)floor(sample_rng_uniform(r) * (double)(hi - lo));
    return v < hi ? v : hi - 1;
}

crop_rect augment_random_resized_crop(sample_rng *r, int height, int width,
                                      const double scale[2], const double ratio[2])
{
    double area = (double)height * (double)width;
    double log_lo = log(ratio[0]), log_hi = log(ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform_in(r, scale[0], scale[1]);
        double aspect = exp(uniform_in(r, log_lo, log_hi));
        int w = (int)rint(sqrt(target * aspect)); /* rint: Python's round, half to even */
        int h = (int)rint(sqrt(target / aspect));
        if (w > 0 && w <= width && h > 0 && h <= height) {
            int top = randint(r, 0, height - h + 1);
            int left = randint(r, 0, width - w + 1);
            return (crop_rect){top, left, h, w};
        }
    }
    double in_ratio = (double)width / (double)height;
    int w = width, h = height;
    if (in_ratio < ratio[0])
        h = (int)rint(w / ratio[0]);
    else if (in_ratio > ratio[1])
        w = (int)rint(h * ratio[1]);
    if (h < 1)
        h = 1;
    if (w < 1)
        w = 1;
    return (crop_rect){(height - h) / 2, (width - w) / 2, h, w};
}

/* torchvision's ColorJitter factor range: [max(0, 1 - v), 1 + v]. */
static float jitter_factor(sample_rng *r, double v)
{
    if (v <= 0)
        return 1.0f;
    return (float)uniform_in(r, v < 1 ? 1 - v : 0, 1 + v);
}

void augment_draw(sample_rng *r, const image_config *cfg, sample_draw *out)
{
    out->dy = out->dx = 0;
    if (cfg->pad > 0) {
        out->dy = randint(r, 0, 2 * cfg->pad + 1);
        out->dx = randint(r, 0, 2 * cfg->pad + 1);
    }
    out->flip = cfg->hflip > 0 && sample_rng_uniform(r) < cfg->hflip;
    out->jitter.contrast_first = 0;
    out->jitter.brightness = out->jitter.contrast = 1.0f;
    if (cfg->brightness > 0 || cfg->contrast > 0) {
        out->jitter.contrast_first = sample_rng_uniform(r) < 0.5;
        out->jitter.brightness = jitter_factor(r, cfg->brightness);
        out->jitter.contrast = jitter_factor(r, cfg->contrast);
    }
}

static float clamp01(float v)
{
    return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

static void brightness(float f, float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = clamp01(x[i] * f);
}

/* The grayscale mean torchvision's adjust_contrast blends with (rgb_to_grayscale's
 * weights), summed in double in a fixed order. */
static float gray_mean(const float *x, int channels, int64_t pixels)
{
    double sum = 0.0;
    if (channels == 1) {
        for (int64_t i = 0; i < pixels; i++)
            sum += x[i];
    } else {
        const float *r = x, *g = x + pixels, *b = x + 2 * pixels;
        for (int64_t i = 0; i < pixels; i++)
            sum += (double)(0.2989f * r[i] + 0.587f * g[i] + 0.114f * b[i]);
    }
    return (float)(sum / (double)pixels);
}

static void contrast(float f, float *x, int channels, int64_t pixels)
{
    float m = (1.0f - f) * gray_mean(x, channels, pixels);
    for (int64_t i = 0; i < (int64_t)channels * pixels; i++)
        x[i] = clamp01(f * x[i] + m);
}

void augment_jitter(const jitter_draw *j, float *x, int channels, int64_t pixels)
{
    if (j->contrast_first && j->contrast != 1.0f)
        contrast(j->contrast, x, channels, pixels);
    if (j->brightness != 1.0f)
        brightness(j->brightness, x, (int64_t)channels * pixels);
    if (!j->contrast_first && j->contrast != 1.0f)
        contrast(j->contrast, x, channels, pixels);
}
