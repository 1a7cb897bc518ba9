/* PNG (libpng) and JPEG (libjpeg-turbo) from memory into 8-bit pixels, with Pillow's
 * conversions, so that a decoded image equals PIL's Image.open(f).convert("RGB" | "L"):
 *   - the format comes from the first bytes, never from the file name;
 *   - palette, low-bit gray and transparency are expanded, alpha is dropped (PIL's RGBA ->
 *     RGB), 16-bit samples are scaled to 8 bits (PIL has no 16-bit RGB);
 *   - gray -> RGB replicates, RGB -> gray is ITU-R 601-2 luma in PIL's fixed point:
 *     (19595 R + 38470 G + 7471 B + 0x8000) >> 16;
 *   - JPEG with libjpeg's defaults (islow DCT, fancy upsampling), as PIL decodes it; a file
 *     that ends early is an error (PIL: "image file is truncated"), CMYK is refused.
 * No global state: any number of threads may decode at once. */
#ifndef FG_IMAGE_DECODE_H
#define FG_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"

/* Larger images are refused before any pixel memory is taken (a decompression bomb). */
#define IMAGE_MAX_PIXELS ((int64_t)1 << 28)

typedef struct image_u8 {
    uint8_t *pixels; /* (height, width, channels), malloc'd */
    int height;
    int width;
    int channels;    /* 1 or 3 */
} image_u8;

/* The whole file at `path` into *data (malloc'd; a zero-byte or unreadable file fails). */
fg_status image_read_file(const char *path, uint8_t **data, size_t *size, fg_error *err);

/* Width and height from the header alone. `path` names the file in messages. */
fg_status image_probe(const char *path, const uint8_t *data, size_t size, int *height,
                      int *width, fg_error *err);

/* Decodes into `channels` (1: gray, 3: RGB) 8-bit channels. Messages start "PATH: ". */
fg_status image_decode(const char *path, const uint8_t *data, size_t size, int channels,
                       image_u8 *out, fg_error *err);

void image_u8_free(image_u8 *img);

#endif
