/* One image file -> one (C, H, W) float sample, on the loader's worker thread:
 *   read -> decode (PNG/JPEG, gray or RGB) ->
 *   training with random_resized_crop: RandomResizedCrop to the output size;
 *   otherwise: resize (shorter side N, or H,W) -> center_crop (zero-padded when larger
 *     than the image), or the file as it is (its size must then be the output size) ->
 *   training: pad by random_crop_padding and crop back at a random offset -> horizontal
 *     flip -> brightness/contrast jitter (in a random order) ->
 *   x / 255 -> (x - mean[c]) / std[c].
 * torchvision's order and definitions (Resize and crops on PIL images, ColorJitter on
 * the [0, 1] tensor). Deterministic: the only randomness is the sample's own stream. */
#ifndef FG_IMAGE_PIPELINE_H
#define FG_IMAGE_PIPELINE_H

#include "fulgur/plugin.h"
#include "image_augment.h"
#include "image_config.h"

typedef struct image_target {
    int oh, ow;              /* output size */
    const char *size_from;   /* why that size, for the wrong-size message */
    float lut[3][256];       /* pixel byte -> normalised value, per channel */
} image_target;

void image_target_init(image_target *t, const image_config *cfg, int oh, int ow,
                       const char *size_from);

/* Writes (cfg->channels, oh, ow) floats to out. rng is NULL when not augmenting. */
fg_status image_pipeline_sample(const image_config *cfg, const image_target *t,
                                const char *path, sample_rng *rng, float *out, fg_error *err);

/* torchvision's Resize(N) output size for a (h, w) image: the shorter side to n, the
 * longer one n * long / short, truncated. */
void image_resize_short(int h, int w, int n, int *rh, int *rw);

#endif
