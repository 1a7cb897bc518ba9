/* Decoding one image file: the bytes from disk, the format from its first bytes, then
 * libpng or libjpeg-turbo with an error handler that turns their longjmp into a status.
 * Every message starts with the file's path. */
#define _POSIX_C_SOURCE 200809L

#include "image_decode.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

/* A file larger than this is not an image we would decode. */
#define IMAGE_MAX_FILE_BYTES ((size_t)1 << 30)

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static int is_png(const uint8_t *d, size_t n)
{
    return n >= 8 && memcmp(d, png_signature, 8) == 0;
}

static int is_jpeg(const uint8_t *d, size_t n)
{
    return n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff;
}

static fg_status not_an_image(const char *path, const uint8_t *d, size_t n, fg_error *err)
{
    char head[3 * 8 + 1] = "";
    for (size_t i = 0; i < n && i < 8; i++)
        snprintf(head + 3 * i, sizeof head - 3 * i, "%02x ", d[i]);
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "%s: not a PNG or JPEG file (it starts with %s; the format is read from "
                        "the content, not the name)",
                        path, head);
}

static fg_status check_pixels(const char *path, const char *format, int64_t w, int64_t h,
                              fg_error *err)
{
    /* Each side first: a header's two 32-bit sides multiplied could overflow int64. */
    if (w < 1 || h < 1 || w > IMAGE_MAX_PIXELS || h > IMAGE_MAX_PIXELS || w * h > IMAGE_MAX_PIXELS)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: %s of %lld x %lld pixels is outside what is decoded "
                            "(1 to %lld pixels)",
                            path, format, (long long)w, (long long)h,
                            (long long)IMAGE_MAX_PIXELS);
    return FG_OK;
}

/* ---- the file ------------------------------------------------------------------------ */

static fg_status read_all(int fd, const char *path, uint8_t *buf, size_t size, fg_error *err)
{
    size_t have = 0;
    while (have < size) {
        ssize_t n = read(fd, buf + have, size - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: read %zu of %zu bytes: %s", path,
                                have, size, n < 0 ? strerror(errno) : "end of file");
        have += (size_t)n;
    }
    return FG_OK;
}

fg_status image_read_file(const char *path, uint8_t **data, size_t *size, fg_error *err)
{
    *data = NULL;
    *size = 0;
    /* O_NONBLOCK: a FIFO put in an image's place after indexing must not block the worker
     * waiting for a writer (SIGTERM could not end the run); fstat then refuses it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return fg_error_set(err, errno == ENOENT ? FG_NOT_FOUND : FG_INVALID_ARGUMENT,
                            "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    fg_status status = FG_OK;
    if (fstat(fd, &st) != 0)
        status = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: cannot stat: %s", path,
                              strerror(errno));
    else if (!S_ISREG(st.st_mode))
        status = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: not a regular file", path);
    else if (st.st_size == 0)
        status = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: empty file (0 bytes)", path);
    else if ((uint64_t)st.st_size > IMAGE_MAX_FILE_BYTES)
        status = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: %lld bytes, more than an image "
                              "file may hold (%zu)", path, (long long)st.st_size,
                              IMAGE_MAX_FILE_BYTES);
    if (status == FG_OK) {
        *size = (size_t)st.st_size;
        *data = malloc(*size);
        if (!*data)
            status = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for %zu bytes", path,
                                  *size);
        else
            status = read_all(fd, path, *data, *size, err);
    }
    close(fd);
    if (status != FG_OK) {
        free(*data);
        *data = NULL;
        *size = 0;
    }
    return status;
}

/* ---- channel conversions (Pillow's) ------------------------------------------------- */

static void gray_to_rgb(const uint8_t *src, uint8_t *dst, size_t pixels)
{
    for (size_t i = 0; i < pixels; i++)
        dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = src[i];
}

static void rgb_to_gray(const uint8_t *src, uint8_t *dst, size_t pixels)
{
    for (size_t i = 0; i < pixels; i++) {
        const uint8_t *p = src + 3 * i;
        dst[i] = (uint8_t)(((uint32_t)p[0] * 19595u + (uint32_t)p[1] * 38470u +
                            (uint32_t)p[2] * 7471u + 0x8000u) >> 16);
    }
}

/* Turns `img` (decoded with its own channel count) into `channels`. */
static fg_status convert_channels(const char *path, image_u8 *img, int channels, fg_error *err)
{
    if (img->channels == channels)
        return FG_OK;
    size_t pixels = (size_t)img->height * (size_t)img->width;
    uint8_t *out = malloc(pixels * (size_t)channels);
    if (!out)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory converting %d x %d pixels",
                            path, img->width, img->height);
    if (channels == 3)
        gray_to_rgb(img->pixels, out, pixels);
    else
        rgb_to_gray(img->pixels, out, pixels);
    free(img->pixels);
    img->pixels = out;
    img->channels = channels;
    return FG_OK;
}

/* ---- PNG ----------------------------------------------------------------------------- */

typedef struct png_reader {
    const uint8_t *data;
    size_t size;
    size_t pos;
    char message[256];
} png_reader;

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_reader *r = png_get_error_ptr(png);
    snprintf(r->message, sizeof r->message, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* ancillary-chunk trouble: Pillow goes on too */
}

static void png_read_memory(png_structp png, png_bytep out, size_t n)
{
    png_reader *r = png_get_io_ptr(png);
    if (n > r->size - r->pos)
        png_error(png, "truncated: the file ends before the image data does");
    memcpy(out, r->data + r->pos, n);
    r->pos += n;
}

/* 16-bit gray without alpha: Pillow opens it as 32-bit integers (mode I) and clips to 255
 * when converting to L or RGB; every other 16-bit image it cuts to the high byte. */
static int png_is_gray16(png_structp png, png_infop info)
{
    return png_get_color_type(png, info) == PNG_COLOR_TYPE_GRAY &&
           png_get_bit_depth(png, info) == 16;
}

/* Sets the transformations that leave 8-bit gray or RGB (16-bit gray: 16-bit gray, big
 * endian): palette and low-bit gray expanded, transparency made alpha and then dropped, 16
 * bits cut to the high byte. */
static void png_to_8bit(png_structp png, png_infop info, int gray16)
{
    if (!gray16) {
        png_set_expand(png);
        png_set_strip_16(png);
    }
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
}

/* Rows of big-endian 16-bit gray to 8 bits in place, clipped at 255 as Pillow does. */
static void png_clip_gray16(uint8_t *pixels, png_uint_32 w, png_uint_32 h)
{
    size_t n = (size_t)w * (size_t)h;
    for (size_t i = 0; i < n; i++) {
        unsigned v = (unsigned)pixels[2 * i] << 8 | pixels[2 * i + 1];
        pixels[i] = (uint8_t)(v > 255 ? 255 : v);
    }
}

static fg_status decode_png(const char *path, const uint8_t *data, size_t size, int channels,
                            image_u8 *out, fg_error *err)
{
    png_reader r = {data, size, 0, ""};
    uint8_t *volatile pixels = NULL;
    png_bytep *volatile rows = NULL;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, png_on_error,
                                             png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for a PNG decoder", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(pixels);
        free(rows);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: PNG: %s", path, r.message);
    }
    png_set_read_fn(png, &r, png_read_memory);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if (check_pixels(path, "PNG", w, h, err) != FG_OK) {
        png_destroy_read_struct(&png, &info, NULL);
        return err->status;
    }
    int gray16 = png_is_gray16(png, info);
    png_to_8bit(png, info, gray16);
    int got = png_get_channels(png, info);
    size_t stride = png_get_rowbytes(png, info);
    if ((got != 1 && got != 3) || stride != (size_t)w * (size_t)got * (gray16 ? 2u : 1u))
        png_error(png, "unexpected layout after expansion");
    pixels = malloc((size_t)h * stride);
    rows = malloc((size_t)h * sizeof *rows);
    if (!pixels || !rows)
        png_error(png, "out of memory for the pixels");
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = pixels + (size_t)y * stride;
    png_read_image(png, rows);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    if (gray16)
        png_clip_gray16(pixels, w, h);
    *out = (image_u8){pixels, (int)h, (int)w, got};
    fg_status st = convert_channels(path, out, channels, err);
    if (st != FG_OK)
        image_u8_free(out);
    return st;
}

/* IHDR is the first chunk: width and height at bytes 16 and 20, big-endian. */
static fg_status probe_png(const char *path, const uint8_t *d, size_t n, int *height,
                           int *width, fg_error *err)
{
    if (n < 24 || memcmp(d + 12, "IHDR", 4) != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: PNG: no IHDR chunk after the "
                            "signature (truncated or corrupt)", path);
    uint32_t w = (uint32_t)d[16] << 24 | (uint32_t)d[17] << 16 | (uint32_t)d[18] << 8 | d[19];
    uint32_t h = (uint32_t)d[20] << 24 | (uint32_t)d[21] << 16 | (uint32_t)d[22] << 8 | d[23];
    fg_status st = check_pixels(path, "PNG", w, h, err);
    if (st == FG_OK) {
        *width = (int)w;
        *height = (int)h;
    }
    return st;
}

/* ---- JPEG ---------------------------------------------------------------------------- */

typedef struct jpeg_failure {
    struct jpeg_error_mgr mgr; /* first: libjpeg hands back a pointer to it */
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} jpeg_failure;

static void jpeg_on_error(j_common_ptr cinfo)
{
    jpeg_failure *f = (jpeg_failure *)cinfo->err;
    f->mgr.format_message(cinfo, f->message);
    longjmp(f->jump, 1);
}

/* Warnings are ignored as Pillow does, except the one a truncated file gives: libjpeg would
 * pad the image with gray, Pillow refuses it ("image file is truncated"). */
static void jpeg_on_message(j_common_ptr cinfo, int level)
{
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
        jpeg_failure *f = (jpeg_failure *)cinfo->err;
        snprintf(f->message, sizeof f->message,
                 "truncated: the file ends before the image data does");
        longjmp(f->jump, 1);
    }
}

static void jpeg_failure_init(jpeg_failure *f, struct jpeg_decompress_struct *cinfo)
{
    memset(f, 0, sizeof *f);
    cinfo->err = jpeg_std_error(&f->mgr);
    f->mgr.error_exit = jpeg_on_error;
    f->mgr.emit_message = jpeg_on_message;
}

static fg_status jpeg_output_space(const char *path, struct jpeg_decompress_struct *cinfo,
                                   fg_error *err)
{
    switch (cinfo->jpeg_color_space) {
    case JCS_GRAYSCALE: cinfo->out_color_space = JCS_GRAYSCALE; return FG_OK;
    case JCS_YCbCr:
    case JCS_RGB: cinfo->out_color_space = JCS_RGB; return FG_OK;
    default:
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: JPEG: CMYK/YCCK images are not "
                            "supported (convert the file to RGB)", path);
    }
}

static fg_status decode_jpeg(const char *path, const uint8_t *data, size_t size, int channels,
                             image_u8 *out, fg_error *err)
{
    struct jpeg_decompress_struct cinfo;
    jpeg_failure f;
    uint8_t *volatile pixels = NULL;
    jpeg_failure_init(&f, &cinfo);
    if (setjmp(f.jump)) {
        jpeg_destroy_decompress(&cinfo);
        free(pixels);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: JPEG: %s", path, f.message);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    fg_status st = jpeg_output_space(path, &cinfo, err);
    if (st == FG_OK)
        st = check_pixels(path, "JPEG", cinfo.image_width, cinfo.image_height, err);
    if (st != FG_OK) {
        jpeg_destroy_decompress(&cinfo);
        return st;
    }
    jpeg_start_decompress(&cinfo);
    size_t stride = (size_t)cinfo.output_width * (size_t)cinfo.output_components;
    pixels = malloc((size_t)cinfo.output_height * stride);
    if (!pixels) {
        jpeg_destroy_decompress(&cinfo);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for the pixels", path);
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = pixels + (size_t)cinfo.output_scanline * stride;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    /* Every scanline is decoded: what follows (EOI, trailing bytes) is not looked at. */
    *out = (image_u8){pixels, (int)cinfo.output_height, (int)cinfo.output_width,
                      cinfo.output_components};
    jpeg_destroy_decompress(&cinfo);
    st = convert_channels(path, out, channels, err);
    if (st != FG_OK)
        image_u8_free(out);
    return st;
}

static fg_status probe_jpeg(const char *path, const uint8_t *data, size_t size, int *height,
                            int *width, fg_error *err)
{
    struct jpeg_decompress_struct cinfo;
    jpeg_failure f;
    jpeg_failure_init(&f, &cinfo);
    if (setjmp(f.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: JPEG: %s", path, f.message);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    fg_status st = check_pixels(path, "JPEG", cinfo.image_width, cinfo.image_height, err);
    if (st == FG_OK) {
        *width = (int)cinfo.image_width;
        *height = (int)cinfo.image_height;
    }
    jpeg_destroy_decompress(&cinfo);
    return st;
}

/* ---- by format ----------------------------------------------------------------------- */

fg_status image_probe(const char *path, const uint8_t *data, size_t size, int *height,
                      int *width, fg_error *err)
{
    if (is_png(data, size))
        return probe_png(path, data, size, height, width, err);
    if (is_jpeg(data, size))
        return probe_jpeg(path, data, size, height, width, err);
    return not_an_image(path, data, size, err);
}

fg_status image_decode(const char *path, const uint8_t *data, size_t size, int channels,
                       image_u8 *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    if (is_png(data, size))
        return decode_png(path, data, size, channels, out, err);
    if (is_jpeg(data, size))
        return decode_jpeg(path, data, size, channels, out, err);
    return not_an_image(path, data, size, err);
}

void image_u8_free(image_u8 *img)
{
    free(img->pixels);
    img->pixels = NULL;
}
