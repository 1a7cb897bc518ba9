/* IDX files written by the tests into a private temporary folder: good ones, and
 * broken ones made from good bytes (truncated, flipped, wrong header). */
#ifndef FG_IDX_FIXTURE_H
#define FG_IDX_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

typedef struct fixture {
    char dir[256];
} fixture;

/* 0 on success; the folder is /tmp/fulgur-data-XXXXXX. */
int fixture_create(fixture *fx);
/* Removes every file in the folder, then the folder. */
void fixture_destroy(fixture *fx);
/* dir/name into buf. */
const char *fixture_path(const fixture *fx, const char *name, char *buf, size_t size);

/* A byte buffer: what a file holds. */
typedef struct bytes {
    uint8_t *data;
    size_t len;
} bytes;

void bytes_free(bytes *b);

/* The bytes of an IDX file: magic, rank big-endian dims, then the payload. */
bytes idx_bytes(uint32_t magic, const uint32_t *dims, int rank, const uint8_t *payload,
                size_t payload_len);
/* count images of rows x cols: pixel p of image i is (i * 31 + p * 7) % 256, so every
 * byte value occurs and neighbours differ. */
bytes idx_images(uint32_t count, uint32_t rows, uint32_t cols);
/* count labels, label i = i % classes. */
bytes idx_labels(uint32_t count, uint32_t classes);
/* The pixel idx_images writes. */
static inline uint8_t fixture_pixel(int64_t i, int64_t p)
{
    return (uint8_t)((i * 31 + p * 7) % 256);
}

/* 0 on success. */
int write_plain(const fixture *fx, const char *name, const bytes *b);
int write_gzip(const fixture *fx, const char *name, const bytes *b);
/* gzip-compressed bytes of b, in memory (to cut or flip before writing). */
bytes gzip_bytes(const bytes *b);

#endif
