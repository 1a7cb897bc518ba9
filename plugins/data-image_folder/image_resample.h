/* Resampling with Pillow's BILINEAR filter: a triangle whose support widens with the
 * reduction factor (antialiasing, as Image.resize and torchvision's Resize on PIL images
 * do), separable, horizontal pass first. Pillow rounds to 8 bits after each pass; this
 * keeps the intermediate in float and rounds once, so values are within 1 of Pillow's.
 *
 * One call covers Resize, CenterCrop after a Resize and RandomResizedCrop: a box of the
 * source is scaled to a virtual (vh, vw) image, of which the window at (wy, wx) of
 * (oh, ow) pixels is computed. Window pixels outside the virtual image are 0 (torchvision
 * pads a crop larger than the image with zeros). */
#ifndef FG_IMAGE_RESAMPLE_H
#define FG_IMAGE_RESAMPLE_H

#include "fulgur/plugin.h"
#include "image_decode.h"

typedef struct resample_spec {
    double box_x, box_y, box_w, box_h; /* the source region, in source pixels */
    int vh, vw;                        /* the size that region is scaled to */
    int wy, wx;                        /* window origin in the scaled image (may be < 0) */
    int oh, ow;                        /* window size = output size */
} resample_spec;

/* dst: (oh, ow, src->channels). Messages name `path`. */
fg_status image_resample(const char *path, const image_u8 *src, const resample_spec *spec,
                         uint8_t *dst, fg_error *err);

#endif
