/* IDX test files: built in memory, compressed with zlib here (not by the plugin), and
 * written into a private temporary folder. */
#define _POSIX_C_SOURCE 200809L

#include "idx_fixture.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

int fixture_create(fixture *fx)
{
    snprintf(fx->dir, sizeof fx->dir, "/tmp/fulgur-data-XXXXXX");
    if (!mkdtemp(fx->dir)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

void fixture_destroy(fixture *fx)
{
    DIR *d = opendir(fx->dir);
    if (d) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                unlink(fixture_path(fx, e->d_name, path, sizeof path));
        closedir(d);
    }
    rmdir(fx->dir);
}

const char *fixture_path(const fixture *fx, const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", fx->dir, name);
    return buf;
}

void bytes_free(bytes *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

bytes idx_bytes(uint32_t magic, const uint32_t *dims, int rank, const uint8_t *payload,
                size_t payload_len)
{
    bytes b;
    b.len = 4 + 4 * (size_t)rank + payload_len;
    b.data = malloc(b.len);
    uint32_t words[4];
    words[0] = magic;
    for (int d = 0; d < rank; d++)
        words[d + 1] = dims[d];
    for (int w = 0; w <= rank; w++)
        for (int k = 0; k < 4; k++)
            b.data[4 * w + k] = (uint8_t)(words[w] >> (24 - 8 * k));
    if (payload_len)
        memcpy(b.data + 4 + 4 * rank, payload, payload_len);
    return b;
}

bytes idx_images(uint32_t count, uint32_t rows, uint32_t cols)
{
    size_t n = (size_t)count * rows * cols;
    uint8_t *px = malloc(n ? n : 1);
    for (size_t i = 0; i < count; i++)
        for (size_t p = 0; p < (size_t)rows * cols; p++)
            px[i * rows * cols + p] = fixture_pixel((int64_t)i, (int64_t)p);
    uint32_t dims[3] = {count, rows, cols};
    bytes b = idx_bytes(0x00000803u, dims, 3, px, n);
    free(px);
    return b;
}

bytes idx_labels(uint32_t count, uint32_t classes)
{
    uint8_t *l = malloc(count ? count : 1);
    for (uint32_t i = 0; i < count; i++)
        l[i] = (uint8_t)(i % classes);
    bytes b = idx_bytes(0x00000801u, &count, 1, l, count);
    free(l);
    return b;
}

int write_plain(const fixture *fx, const char *name, const bytes *b)
{
    char path[512];
    FILE *f = fopen(fixture_path(fx, name, path, sizeof path), "wb");
    if (!f)
        return -1;
    size_t w = fwrite(b->data, 1, b->len, f);
    return (fclose(f) == 0 && w == b->len) ? 0 : -1;
}

bytes gzip_bytes(const bytes *b)
{
    bytes out = {NULL, 0};
    z_stream z;
    memset(&z, 0, sizeof z);
    /* 15 + 16: a gzip wrapper, as gzip(1) writes it. */
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return out;
    size_t cap = deflateBound(&z, (uLong)b->len) + 64;
    out.data = malloc(cap);
    z.next_in = b->data;
    z.avail_in = (uInt)b->len;
    z.next_out = out.data;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
        free(out.data);
        out.data = NULL;
    } else {
        out.len = cap - z.avail_out;
    }
    deflateEnd(&z);
    return out;
}

int write_gzip(const fixture *fx, const char *name, const bytes *b)
{
    bytes gz = gzip_bytes(b);
    if (!gz.data)
        return -1;
    int rc = write_plain(fx, name, &gz);
    bytes_free(&gz);
    return rc;
}
