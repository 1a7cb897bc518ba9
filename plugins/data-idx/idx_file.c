/* One IDX file into memory: a byte source over plain or gzip input, then the header
 * checks and an exact-length payload read. Every message starts "idx: <path>: ". */
#define _POSIX_C_SOURCE 200809L

#include "idx_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* A byte source over a plain or a gzip file: the reader above never knows which. */
typedef struct idx_source {
    const char *path;
    FILE *plain;
    gzFile gz;
    int64_t offset;   /* bytes delivered so far (decompressed, for gzip) */
    int64_t expected; /* bytes the header declares in all, once known; 0 before */
} idx_source;

static const char *errno_text(int e, char *buf, size_t size)
{
    if (strerror_r(e, buf, size) != 0)
        snprintf(buf, size, "errno %d", e);
    return buf;
}

int idx_is_fashion_mnist_name(const char *name)
{
    static const char *const names[] = {IDX_FASHION_TRAIN_IMAGES, IDX_FASHION_TRAIN_LABELS,
                                        IDX_FASHION_TEST_IMAGES, IDX_FASHION_TEST_LABELS};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return 1;
    return 0;
}

static fg_status open_failure(const char *path, int e, fg_error *err)
{
    char text[128];
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* The defaults point at the Debian package; say how to get it rather than just "missing". */
    const char *hint = (e == ENOENT && idx_is_fashion_mnist_name(base))
                           ? " (the Fashion-MNIST files come with the Debian package "
                             "dataset-fashion-mnist in " IDX_FASHION_DIR
                             ": install the Debian package dataset-fashion-mnist)"
                           : "";
    return fg_error_set(err, e == ENOENT ? FG_NOT_FOUND : FG_INVALID_ARGUMENT,
                        "idx: cannot open %s: %s%s", path, errno_text(e, text, sizeof text), hint);
}

static fg_status source_open(idx_source *src, const char *path, fg_error *err)
{
    memset(src, 0, sizeof *src);
    src->path = path;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return open_failure(path, errno, err);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "idx: %s: not a regular file (a FIFO, device or folder cannot be "
                            "a data file)", path);
    }
    unsigned char magic[2] = {0, 0};
    if (pread(fd, magic, sizeof magic, 0) < 0) {
        int e = errno;
        close(fd);
        char text[128];
        return fg_error_set(err, FG_INVALID_ARGUMENT, "idx: cannot read %s: %s", path,
                            errno_text(e, text, sizeof text));
    }
    if (magic[0] == 0x1f && magic[1] == 0x8b) {
        src->gz = gzdopen(fd, "rb");
        if (src->gz) {
            gzbuffer(src->gz, 1u << 17); /* fewer syscalls on 26 MB files */
            return FG_OK;
        }
    } else {
        src->plain = fdopen(fd, "rb");
        if (src->plain)
            return FG_OK;
    }
    close(fd);
    return fg_error_set(err, FG_OUT_OF_MEMORY, "idx: %s: out of memory opening the file", path);
}

static void source_close(idx_source *src)
{
    if (src->gz)
        gzclose_r(src->gz);
    if (src->plain)
        fclose(src->plain);
    src->gz = NULL;
    src->plain = NULL;
}

/* zlib's message without the "<fd:N>: " prefix gzdopen gives it: we name the path ourselves. */
static const char *zlib_text(gzFile gz, int *errnum)
{
    const char *m = gzerror(gz, errnum);
    const char *p = (m && m[0] == '<') ? strstr(m, ">: ") : NULL;
    return p ? p + 3 : (m ? m : "unknown error");
}

static fg_status gz_failure(idx_source *src, int64_t at, fg_error *err)
{
    int errnum = Z_OK;
    const char *text = zlib_text(src->gz, &errnum);
    if (src->expected > 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "idx: %s: truncated or corrupt gzip stream: zlib: %s (after %lld "
                            "of %lld expected bytes)",
                            src->path, text, (long long)at, (long long)src->expected);
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "idx: %s: truncated or corrupt gzip stream: zlib: %s (after %lld "
                        "bytes)",
                        src->path, text, (long long)at);
}

/* Reads up to n bytes; *got < n only at the end of the input. A read or decompression
 * error fails with a message instead of looking like a short file. */
static fg_status source_read(idx_source *src, void *buf, size_t n, size_t *got, fg_error *err)
{
    size_t total = 0;
    if (src->plain) {
        total = fread(buf, 1, n, src->plain);
        if (total < n && ferror(src->plain)) {
            char text[128];
            return fg_error_set(err, FG_INVALID_ARGUMENT, "idx: cannot read %s: %s", src->path,
                                errno_text(errno, text, sizeof text));
        }
    } else {
        while (total < n) {
            size_t chunk = n - total > (1u << 30) ? (1u << 30) : n - total;
            int r = gzread(src->gz, (unsigned char *)buf + total, (unsigned)chunk);
            if (r < 0)
                return gz_failure(src, src->offset + (int64_t)total, err);
            if (r == 0)
                break;
            total += (size_t)r;
        }
        int errnum = Z_OK;
        if (total < n && (zlib_text(src->gz, &errnum), errnum != Z_OK))
            return gz_failure(src, src->offset + (int64_t)total, err);
    }
    src->offset += (int64_t)total;
    *got = total;
    return FG_OK;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Magic, rank and dimensions; fills everything in `out` but data. */
static fg_status read_header(idx_source *src, int expected_rank, const char *what, idx_array *out,
                             fg_error *err)
{
    unsigned char h[4 + 4 * IDX_MAX_RANK];
    size_t got = 0;
    fg_status st = source_read(src, h, 4, &got, err);
    if (st != FG_OK)
        return st;
    if (got < 4)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "idx: %s: truncated header: expected 4 bytes of magic, read %zu",
                            src->path, got);
    uint32_t expected_magic = 0x00000800u | (uint32_t)expected_rank;
    uint32_t magic = be32(h);
    if (h[0] != 0 || h[1] != 0 || h[2] != 0x08)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "idx: %s: wrong magic: expected 0x%08x (IDX %s of unsigned bytes), "
                            "found 0x%08x",
                            src->path, expected_magic, what, magic);
    if (h[3] != expected_rank)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "idx: %s: wrong rank: expected %d dimensions for %s (magic 0x%08x), "
                            "found %d (magic 0x%08x)",
                            src->path, expected_rank, what, expected_magic, h[3], magic);
    size_t want = 4 * (size_t)expected_rank;
    st = source_read(src, h + 4, want, &got, err);
    if (st != FG_OK)
        return st;
    if (got < want)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "idx: %s: truncated header: expected %zu bytes, read %zu", src->path,
                            4 + want, 4 + got);
    out->rank = expected_rank;
    out->item_bytes = 1;
    for (int d = 0; d < expected_rank; d++) {
        out->dims[d] = be32(h + 4 + 4 * d);
        if (out->dims[d] == 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "idx: %s: dimension %d of the header is 0; every dimension must "
                                "be > 0",
                                src->path, d);
        if (d > 0)
            out->item_bytes *= out->dims[d]; /* <= 2^24 * 2^32 before the check: no overflow */
        if (out->item_bytes > IDX_MAX_ITEM_BYTES)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "idx: %s: %s of more than %lld bytes each (dimension %d is %lld): "
                                "not a sane IDX file",
                                src->path, what, (long long)IDX_MAX_ITEM_BYTES, d,
                                (long long)out->dims[d]);
    }
    out->count = out->dims[0];
    return FG_OK;
}

/* Reads exactly `total` bytes, growing the buffer as data arrives: a header that lies
 * about its count costs an error, never a giant allocation. */
static fg_status read_payload(idx_source *src, int64_t total, uint8_t **data, int64_t *have_out,
                              fg_error *err)
{
    size_t cap = total < (1 << 20) ? (size_t)total : (size_t)1 << 20;
    size_t have = 0;
    uint8_t *buf = malloc(cap);
    if (!buf)
        goto oom;
    for (;;) {
        size_t got = 0;
        fg_status st = source_read(src, buf + have, cap - have, &got, err);
        if (st != FG_OK) {
            free(buf);
            return st;
        }
        have += got;
        if (have < cap || have == (size_t)total)
            break;
        cap = (int64_t)cap * 2 > total ? (size_t)total : cap * 2;
        uint8_t *bigger = realloc(buf, cap);
        if (!bigger) {
            free(buf);
            goto oom;
        }
        buf = bigger;
    }
    *data = buf;
    *have_out = (int64_t)have;
    return FG_OK;
oom:
    return fg_error_set(err, FG_OUT_OF_MEMORY, "idx: %s: out of memory reading %lld bytes",
                        src->path, (long long)total);
}

/* Anything after the declared items means the header and the file disagree. */
static fg_status check_no_trailing_data(idx_source *src, const idx_array *a, const char *what,
                                        fg_error *err)
{
    unsigned char scratch[4096];
    int64_t extra = 0;
    for (;;) {
        size_t got = 0;
        fg_status st = source_read(src, scratch, sizeof scratch, &got, err);
        if (st != FG_OK)
            return st;
        extra += (int64_t)got;
        if (got < sizeof scratch)
            break;
    }
    if (extra > 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "idx: %s: %lld bytes of trailing data after the %lld %s the header "
                            "declares",
                            src->path, (long long)extra, (long long)a->count, what);
    return FG_OK;
}

/* Opens path and reads its header into out: on FG_OK src is open, otherwise closed. */
static fg_status open_with_header(idx_source *src, const char *path, int expected_rank,
                                  const char *what, idx_array *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    if (expected_rank < 1 || expected_rank > IDX_MAX_RANK)
        return fg_error_set(err, FG_INTERNAL, "idx: %s: rank %d is not supported", path,
                            expected_rank);
    fg_status st = source_open(src, path, err);
    if (st != FG_OK)
        return st;
    st = read_header(src, expected_rank, what, out, err);
    if (st != FG_OK)
        source_close(src);
    return st;
}

fg_status idx_file_read(const char *path, int expected_rank, const char *what, idx_array *out,
                        fg_error *err)
{
    idx_source src;
    fg_status st = open_with_header(&src, path, expected_rank, what, out, err);
    if (st != FG_OK) {
        idx_array_free(out);
        return st;
    }
    int64_t header_bytes = 4 + 4 * (int64_t)expected_rank;
    int64_t total = out->count * out->item_bytes; /* < 2^32 * 2^24: no overflow */
    src.expected = header_bytes + total;
    int64_t have = 0;
    st = read_payload(&src, total, &out->data, &have, err);
    if (st != FG_OK)
        goto fail;
    if (have < total) {
        st = fg_error_set(err, FG_INVALID_ARGUMENT,
                          "idx: %s: truncated: the header declares %lld %s (%lld bytes after "
                          "the %lld-byte header), read %lld",
                          path, (long long)out->count, what, (long long)total,
                          (long long)header_bytes, (long long)have);
        goto fail;
    }
    st = check_no_trailing_data(&src, out, what, err);
    if (st == FG_OK && src.gz)
        st = idx_gzip_check_tail(path, err);
    if (st != FG_OK)
        goto fail;
    source_close(&src);
    return FG_OK;
fail:
    source_close(&src);
    idx_array_free(out);
    return st;
}

fg_status idx_file_read_header(const char *path, int expected_rank, const char *what,
                               idx_array *out, fg_error *err)
{
    idx_source src;
    fg_status st = open_with_header(&src, path, expected_rank, what, out, err);
    if (st == FG_OK)
        source_close(&src);
    return st;
}

void idx_array_free(idx_array *a)
{
    free(a->data);
    a->data = NULL;
}
