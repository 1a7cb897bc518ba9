/* Image files the tests write themselves with libpng and libjpeg (no Python needed), into a
 * private temporary folder tree, and the broken files made from them. */
#ifndef FG_IMAGE_FIXTURE_H
#define FG_IMAGE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

typedef struct image_tree {
    char root[256]; /* /tmp/fulgur-image-XXXXXX */
} image_tree;

int image_tree_create(image_tree *t);
/* Removes the whole tree. */
void image_tree_destroy(image_tree *t);
/* root/rel into buf; creates the parent folders of rel. */
const char *image_tree_path(const image_tree *t, const char *rel, char *buf, size_t size);
int image_tree_mkdir(const image_tree *t, const char *rel);

/* (h, w, channels) 8-bit pixels of a smooth pattern with some detail, different per seed. */
uint8_t *pattern_pixels(int h, int w, int channels, unsigned seed);

/* 0 on success. channels: 1 gray, 3 RGB, 4 RGBA (PNG) or CMYK (JPEG). */
int write_png(const char *path, const uint8_t *pixels, int h, int w, int channels);
int write_jpeg(const char *path, const uint8_t *pixels, int h, int w, int channels,
               int quality);
/* A pattern image of (h, w) at root/rel, PNG or JPEG by the name's extension. */
int write_pattern(const image_tree *t, const char *rel, int h, int w, int channels,
                  unsigned seed);
/* The first `bytes` bytes of src into dst (bytes < 0: all but the last -bytes; more than
 * the file: all of it). */
int copy_prefix(const char *src, const char *dst, long bytes);
int write_text(const char *path, const char *text);

#endif
