/* Reading the image_folder options once at init: the hot path trusts what is here. */
#include "image_config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fulgur/data.h"
#include "data_path.h"
#include "plugin_options.h"

#define IMAGE_MAX_SIDE 65536

/* Up to `max` comma-separated numbers of `text` into out; *count of them. */
static fg_status parse_numbers(const char *key, const char *text, int max, double *out,
                               int *count, fg_error *err)
{
    *count = 0;
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '\0')
        return FG_OK;
    for (;;) {
        char *end = NULL;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno != 0 || !isfinite(v) || *count == max)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "image_folder: option %s = \"%s\": expected at most %d "
                                "comma-separated finite numbers",
                                key, text, max);
        out[(*count)++] = v;
        p = end;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '\0')
            return FG_OK;
        if (*p != ',')
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "image_folder: option %s = \"%s\": unexpected '%c' (values are "
                                "separated by commas)", key, text, *p);
        p++;
    }
}

static fg_status get_numbers(const fg_host *host, const char *key, int max, double *out,
                             int *count, fg_error *err)
{
    const char *text = NULL;
    fg_status st = fg_plugin_get_string(host, "image_folder", key, &text, err);
    return st == FG_OK ? parse_numbers(key, text, max, out, count, err) : st;
}

/* "" -> 0 x 0; "N" -> N x N (or the shorter side, for resize); "H,W". */
static fg_status get_size(const fg_host *host, const char *key, int *n, int *h, int *w,
                          fg_error *err)
{
    double v[2];
    int count = 0;
    fg_status st = get_numbers(host, key, 2, v, &count, err);
    if (st != FG_OK)
        return st;
    for (int i = 0; i < count; i++)
        if (v[i] != floor(v[i]) || v[i] < 1 || v[i] > IMAGE_MAX_SIDE)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "image_folder: option %s: %g is not a size in [1, %d]", key,
                                v[i], IMAGE_MAX_SIDE);
    *n = count == 1 ? (int)v[0] : 0;
    *h = count == 2 ? (int)v[0] : 0;
    *w = count == 2 ? (int)v[1] : 0;
    return FG_OK;
}

/* One value for every channel, or one per channel. */
static fg_status get_per_channel(const fg_host *host, const char *key, int channels, int positive,
                                 float *out, fg_error *err)
{
    double v[3];
    int count = 0;
    fg_status st = get_numbers(host, key, 3, v, &count, err);
    if (st != FG_OK)
        return st;
    if (count != 1 && count != channels)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "image_folder: option %s has %d values; give 1 or %d (one per "
                            "channel of mode %s)",
                            key, count, channels, channels == 3 ? "rgb" : "grayscale");
    for (int c = 0; c < channels; c++) {
        out[c] = (float)v[count == 1 ? 0 : c];
        if (positive && !(out[c] > 0.0f))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "image_folder: option %s: %g must be > 0", key, (double)out[c]);
    }
    return FG_OK;
}

static fg_status get_range(const fg_host *host, const char *key, double out[2], fg_error *err)
{
    int count = 0;
    fg_status st = get_numbers(host, key, 2, out, &count, err);
    if (st == FG_OK && (count != 2 || !(out[0] > 0) || !(out[0] <= out[1])))
        st = fg_error_set(err, FG_INVALID_ARGUMENT,
                          "image_folder: option %s must be two numbers LOW,HIGH with "
                          "0 < LOW <= HIGH", key);
    return st;
}

static fg_status read_dirs(const fg_host *host, image_config *cfg, fg_error *err)
{
    static const char *const keys[] = {NULL, "train_dir", "val_dir", "test_dir"};
    const char *dir = NULL;
    fg_status st = fg_plugin_split_paths(host, "image_folder", keys, cfg->dirs, &dir, err);
    if (st == FG_OK)
        st = fg_plugin_resolve_path("image_folder", "", cfg->dirs[FG_SPLIT_TEST],
                                    &cfg->dirs[FG_SPLIT_PREDICT], err);
    return st;
}

static fg_status read_geometry(const fg_host *host, image_config *cfg, fg_error *err)
{
    const char *mode = NULL;
    fg_status st = fg_plugin_get_string(host, "image_folder", "mode", &mode, err);
    if (st != FG_OK)
        return st;
    if (strcmp(mode, "rgb") != 0 && strcmp(mode, "grayscale") != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "image_folder: option mode = \"%s\": rgb or grayscale", mode);
    cfg->channels = strcmp(mode, "rgb") == 0 ? 3 : 1;
    int n = 0;
    if ((st = get_size(host, "resize", &cfg->resize_short, &cfg->resize_h, &cfg->resize_w, err)))
        return st;
    if ((st = get_size(host, "center_crop", &n, &cfg->crop_h, &cfg->crop_w, err)))
        return st;
    if (n) {
        cfg->crop_h = n;
        cfg->crop_w = n;
    }
    if (cfg->resize_short && !cfg->crop_h)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "image_folder: resize = %d scales the shorter side and keeps each "
                            "image's aspect ratio, so sizes differ: set center_crop (the output "
                            "size) too, or resize = H,W", cfg->resize_short);
    if ((st = get_per_channel(host, "mean", cfg->channels, 0, cfg->mean, err)))
        return st;
    return get_per_channel(host, "std", cfg->channels, 1, cfg->std, err);
}

static fg_status get_float_in(const fg_host *host, const char *key, double lo, double hi,
                              double *out, fg_error *err)
{
    fg_status st = fg_plugin_get_float(host, "image_folder", key, out, err);
    if (st != FG_OK)
        return st;
    if (!(*out >= lo && *out <= hi))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "image_folder: option %s = %g is outside [%g, %g]", key, *out, lo, hi);
    return FG_OK;
}

static fg_status read_augmentation(const fg_host *host, image_config *cfg, fg_error *err)
{
    int64_t pad = 0;
    fg_status st = fg_plugin_get_int(host, "image_folder", "random_crop_padding", &pad, err);
    if (st != FG_OK)
        return st;
    if (pad < 0 || pad > IMAGE_MAX_SIDE)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "image_folder: option random_crop_padding = %lld is outside [0, %d]",
                            (long long)pad, IMAGE_MAX_SIDE);
    cfg->pad = (int)pad;
    if ((st = get_float_in(host, "hflip", 0.0, 1.0, &cfg->hflip, err)))
        return st;
    if ((st = fg_plugin_get_bool(host, "image_folder", "random_resized_crop", &cfg->rrc, err)))
        return st;
    if ((st = get_range(host, "rrc_scale", cfg->rrc_scale, err)))
        return st;
    if ((st = get_range(host, "rrc_ratio", cfg->rrc_ratio, err)))
        return st;
    if ((st = get_float_in(host, "brightness", 0.0, 1e6, &cfg->brightness, err)))
        return st;
    return get_float_in(host, "contrast", 0.0, 1e6, &cfg->contrast, err);
}

fg_status image_config_read(const fg_host *host, image_config *cfg, fg_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    fg_status st = read_dirs(host, cfg, err);
    if (st == FG_OK)
        st = read_geometry(host, cfg, err);
    if (st == FG_OK)
        st = read_augmentation(host, cfg, err);
    if (st != FG_OK)
        image_config_free(cfg);
    return st;
}

void image_config_free(image_config *cfg)
{
    for (size_t i = 0; i < sizeof cfg->dirs / sizeof cfg->dirs[0]; i++)
        free(cfg->dirs[i]);
    memset(cfg, 0, sizeof *cfg);
}

int image_config_augments(const image_config *cfg)
{
    return cfg->pad > 0 || cfg->hflip > 0 || cfg->rrc || cfg->brightness > 0 ||
           cfg->contrast > 0;
}
