/* The validated options of an image_folder instance: where the splits are, how every
 * image becomes a (C, H, W) float sample, and the training split's augmentations. */
#ifndef FG_IMAGE_CONFIG_H
#define FG_IMAGE_CONFIG_H

#include "fulgur/plugin.h"

typedef struct image_config {
    char *dirs[5];        /* by fg_split (PREDICT reads TEST's); resolved, "" when none */
    int channels;         /* mode: 1 grayscale, 3 rgb */
    int resize_short;     /* resize = N: the shorter side to N; 0 none */
    int resize_h, resize_w; /* resize = H,W: exactly; 0 none */
    int crop_h, crop_w;   /* center_crop = N or H,W; 0 none */
    float mean[3], std[3]; /* per channel, on the [0, 1] scale */
    /* training split only */
    int pad;              /* random_crop_padding */
    double hflip;         /* probability */
    int rrc;              /* random_resized_crop */
    double rrc_scale[2], rrc_ratio[2];
    double brightness, contrast;
} image_config;

/* Reads and checks every option; messages name the key and the value. */
fg_status image_config_read(const fg_host *host, image_config *cfg, fg_error *err);
void image_config_free(image_config *cfg);

/* True when some augmentation is configured. */
int image_config_augments(const image_config *cfg);

#endif
