/* Writing test images with libpng (simplified API) and libjpeg. */
#define _XOPEN_SOURCE 700

#include "image_fixture.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>

int image_tree_create(image_tree *t)
{
    snprintf(t->root, sizeof t->root, "/tmp/fulgur-image-XXXXXX");
    if (!mkdtemp(t->root)) {
        perror("mkdtemp");
        t->root[0] = '\0';
        return -1;
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void image_tree_destroy(image_tree *t)
{
    if (t->root[0])
        nftw(t->root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    t->root[0] = '\0';
}

int image_tree_mkdir(const image_tree *t, const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", t->root, rel);
    for (char *p = path + strlen(t->root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);
            *p = '/';
        }
    return mkdir(path, 0700) == 0 ? 0 : -1;
}

const char *image_tree_path(const image_tree *t, const char *rel, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", t->root, rel);
    for (char *p = buf + strlen(t->root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0700);
            *p = '/';
        }
    return buf;
}

uint8_t *pattern_pixels(int h, int w, int channels, unsigned seed)
{
    uint8_t *p = malloc((size_t)h * (size_t)w * (size_t)channels);
    if (!p)
        return NULL;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < channels; c++) {
                double v = 128 + 90 * sin(0.21 * x * (c + 1) + 0.13 * y + seed) +
                           30 * cos(0.7 * (x - y) + 2.0 * c + seed * 0.5);
                unsigned noise = (unsigned)(x * 7 + y * 13 + c * 29 + seed * 31) % 17;
                v += noise;
                p[((size_t)y * (size_t)w + (size_t)x) * (size_t)channels + (size_t)c] =
                    (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

int write_png(const char *path, const uint8_t *pixels, int h, int w, int channels)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
    if (!png_image_write_to_file(&img, path, 0, pixels, 0, NULL)) {
        fprintf(stderr, "write_png %s: %s\n", path, img.message);
        return -1;
    }
    return 0;
}

int write_jpeg(const char *path, const uint8_t *pixels, int h, int w, int channels,
               int quality)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = channels;
    c.in_color_space = channels == 1 ? JCS_GRAYSCALE : channels == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)c.next_scanline * (size_t)w * (size_t)channels);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return fclose(f) == 0 ? 0 : -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int write_pattern(const image_tree *t, const char *rel, int h, int w, int channels,
                  unsigned seed)
{
    char path[1024];
    image_tree_path(t, rel, path, sizeof path);
    uint8_t *p = pattern_pixels(h, w, channels, seed);
    if (!p)
        return -1;
    int rc = ends_with(rel, ".png") || ends_with(rel, ".PNG")
                 ? write_png(path, p, h, w, channels)
                 : write_jpeg(path, p, h, w, channels, 92);
    free(p);
    return rc;
}

int copy_prefix(const char *src, const char *dst, long bytes)
{
    FILE *in = fopen(src, "rb");
    if (!in)
        return -1;
    fseek(in, 0, SEEK_END);
    long size = ftell(in);
    fseek(in, 0, SEEK_SET);
    long n = bytes < 0 ? size + bytes : bytes < size ? bytes : size;
    if (n < 0) {
        fclose(in);
        return -1;
    }
    char *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, in) : 0;
    fclose(in);
    FILE *out = fopen(dst, "wb");
    int rc = buf && got == (size_t)n && out && fwrite(buf, 1, (size_t)n, out) == (size_t)n ? 0 : -1;
    if (out && fclose(out) != 0)
        rc = -1;
    free(buf);
    return rc;
}

int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = strlen(text);
    int rc = fwrite(text, 1, n, f) == n ? 0 : -1;
    return fclose(f) == 0 ? rc : -1;
}
