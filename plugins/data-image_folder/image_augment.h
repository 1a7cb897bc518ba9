/* The random choices of the training augmentations, drawn for one sample from a stream
 * keyed by (seed, epoch, sample index) alone: the same sample of the same epoch gets the
 * same crop, flip and jitter on any worker, in any batch, after any resume. Parameters
 * follow torchvision's definitions (RandomResizedCrop.get_params, RandomCrop with padding,
 * RandomHorizontalFlip, ColorJitter's brightness and contrast). */
#ifndef FG_IMAGE_AUGMENT_H
#define FG_IMAGE_AUGMENT_H

#include <stdint.h>

#include "image_config.h"

typedef struct sample_rng {
    uint64_t state;
} sample_rng;

void sample_rng_init(sample_rng *r, uint64_t seed, int64_t epoch, int64_t index);
/* Uniform in [0, 1), 53 bits. */
double sample_rng_uniform(sample_rng *r);

/* A crop of a (height, width) image: rows [top, top + h), columns [left, left + w). */
typedef struct crop_rect {
    int top, left, h, w;
} crop_rect;

/* torchvision's RandomResizedCrop.get_params: ten tries at an area fraction in scale and
 * a log-uniform aspect ratio, then the central crop clamped to the ratio range. */
crop_rect augment_random_resized_crop(sample_rng *r, int height, int width,
                                      const double scale[2], const double ratio[2]);

typedef struct jitter_draw {
    int contrast_first; /* ColorJitter applies its transforms in a random order */
    float brightness;   /* factors; 1: unchanged */
    float contrast;
} jitter_draw;

/* The draws after the crop, in a fixed order: padding offsets, flip, jitter. */
typedef struct sample_draw {
    int dy, dx;      /* offset in the padded image, [0, 2 * pad] */
    int flip;
    jitter_draw jitter;
} sample_draw;

void augment_draw(sample_rng *r, const image_config *cfg, sample_draw *out);

/* In place on (C, H, W) floats in [0, 1]: brightness and contrast as torchvision's tensor
 * functions (contrast blends with the mean of the grayscale image), clamped to [0, 1]. */
void augment_jitter(const jitter_draw *j, float *x, int channels, int64_t pixels);

#endif
