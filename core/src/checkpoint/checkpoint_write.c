/* Writing a checkpoint atomically: validate the caller's tensors, build the JSON header by
 * hand (names and metadata escaped, offsets packed in the caller's order), write everything
 * to PATH.tmp.<pid>, fsync, rename over PATH, fsync the folder. Until the rename PATH is the
 * old file; after it, the new one: a crash in between leaves only a temporary behind. */
#include "checkpoint.h"
#include "utf8.h"
#include "io_status.h"
#include "output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tensor bytes go to the file as they sit in memory; safetensors is little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fg_ckpt_write_atomic writes host-order data: add byte swapping for big-endian hosts"
#endif

int fg_ckpt_is_temporary(const char *filename)
{
    const char *base = strrchr(filename, '/');
    return strstr(base ? base + 1 : filename, ".tmp.") != NULL;
}

/* ---- input validation -------------------------------------------------------------- */

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names must be unique: sort a copy of the pointers and compare neighbours. */
static fg_status check_unique(const char *path, const char *const *names, size_t n,
                              const char *what, fg_error *err)
{
    if (n < 2)
        return FG_OK;
    const char **sorted = malloc(n * sizeof *sorted);
    if (!sorted)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    memcpy(sorted, names, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, compare_strings);
    fg_status st = FG_OK;
    for (size_t i = 1; i < n && st == FG_OK; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: %s '%s' appears twice", path, what,
                              sorted[i]);
    free(sorted);
    return st;
}

static fg_status check_tensor(const char *path, const fg_ckpt_tensor *t, size_t i,
                              int64_t *bytes, fg_error *err)
{
    if (!t->name || !t->name[0])
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: tensor %zu has no name", path, i);
    if (strcmp(t->name, "__metadata__") == 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor %zu: the name '__metadata__' is reserved", path, i);
    if (!fg_utf8_valid(t->name))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: tensor %zu: name is not valid UTF-8",
                            path, i);
    if (!fg_ckpt_dtype_tag(t->dtype))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: tensor '%s': dtype %d is unknown",
                            path, t->name, (int)t->dtype);
    if (t->rank < 0 || t->rank > FG_MAX_DIMS)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': rank %d is outside [0, %d]", path, t->name,
                            t->rank, FG_MAX_DIMS);
    if (fg_ckpt_byte_size(t->dtype, t->rank, t->shape, bytes) != 0) {
        char shape[256];
        fg_ckpt_format_shape(shape, sizeof shape, t->rank, t->shape);
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': shape %s is negative or overflows a 64-bit byte "
                            "count", path, t->name, shape);
    }
    if (*bytes > 0 && !t->data)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': data is NULL for %lld bytes", path, t->name,
                            (long long)*bytes);
    return FG_OK;
}

static fg_status check_meta(const char *path, const char *const *keys, const char *const *values,
                            size_t n, fg_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (!keys[i] || !values[i])
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: metadata entry %zu has a NULL %s",
                                path, i, keys[i] ? "value" : "key");
        if (!fg_utf8_valid(keys[i]))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: metadata entry %zu: key is not valid UTF-8", path, i);
        if (!fg_utf8_valid(values[i]))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: metadata '%s': value is not valid UTF-8", path, keys[i]);
    }
    return check_unique(path, keys, n, "metadata key", err);
}

/* Validates everything and fills bytes[i] with each tensor's size. */
static fg_status check_inputs(const char *path, const fg_ckpt_tensor *tensors, size_t count,
                              const char *const *keys, const char *const *values,
                              size_t meta_count, int64_t *bytes, fg_error *err)
{
    if ((count && !tensors) || (meta_count && (!keys || !values)))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: NULL tensor or metadata array", path);
    for (size_t i = 0; i < count; i++) {
        fg_status st = check_tensor(path, &tensors[i], i, &bytes[i], err);
        if (st != FG_OK)
            return st;
    }
    const char **names = malloc((count ? count : 1) * sizeof *names);
    if (!names)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    for (size_t i = 0; i < count; i++)
        names[i] = tensors[i].name;
    fg_status st = check_unique(path, names, count, "tensor name", err);
    free(names);
    if (st != FG_OK)
        return st;
    return check_meta(path, keys, values, meta_count, err);
}

/* ---- the header -------------------------------------------------------------------- */

/* A growing text buffer; an allocation failure sticks and is reported once at the end. */
typedef struct text_buf {
    char *p;
    size_t len, cap;
    int oom;
} text_buf;

static void buf_reserve(text_buf *b, size_t extra)
{
    if (b->oom || b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void buf_add(text_buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static FG_PRINTF(2, 3) void buf_printf(text_buf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        buf_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string: quotes, backslashes and control characters escaped; UTF-8 passes. */
static void buf_json_string(text_buf *b, const char *s)
{
    buf_add(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char esc[2] = { '\\', (char)c };
            buf_add(b, esc, 2);
        } else if (c < 0x20) {
            buf_printf(b, "\\u%04x", c);
        } else {
            buf_add(b, (const char *)&c, 1);
        }
    }
    buf_add(b, "\"", 1);
}

static void buf_tensor(text_buf *b, const fg_ckpt_tensor *t, int64_t begin, int64_t end)
{
    buf_json_string(b, t->name);
    buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", fg_ckpt_dtype_tag(t->dtype));
    for (int d = 0; d < t->rank; d++)
        buf_printf(b, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    buf_printf(b, "],\"data_offsets\":[%lld,%lld]}", (long long)begin, (long long)end);
}

/* The header text, padded with spaces so that 8 + its length is a multiple of 8. */
static fg_status build_header(const char *path, const fg_ckpt_tensor *tensors, size_t count,
                              const int64_t *bytes, const char *const *keys,
                              const char *const *values, size_t meta_count, text_buf *b,
                              fg_error *err)
{
    buf_add(b, "{", 1);
    if (meta_count) {
        buf_add(b, "\"__metadata__\":{", 16);
        for (size_t i = 0; i < meta_count; i++) {
            if (i)
                buf_add(b, ",", 1);
            buf_json_string(b, keys[i]);
            buf_add(b, ":", 1);
            buf_json_string(b, values[i]);
        }
        buf_add(b, "}", 1);
    }
    int64_t offset = 0;
    for (size_t i = 0; i < count; i++) {
        int64_t end;
        if (__builtin_add_overflow(offset, bytes[i], &end))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: the tensors' total size overflows 64 bits at tensor '%s'",
                                path, tensors[i].name);
        if (i || meta_count)
            buf_add(b, ",", 1);
        buf_tensor(b, &tensors[i], offset, end);
        offset = end;
    }
    buf_add(b, "}", 1);
    while (b->len % 8)
        buf_add(b, " ", 1);
    if (b->oom)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for the header", path);
    return FG_OK;
}

/* ---- the file ---------------------------------------------------------------------- */

static fg_status write_all(const char *tmp, int fd, const void *data, size_t n, fg_error *err)
{
    const char *p = data;
    while (n > 0) {
        ssize_t put = write(fd, p, n);
        if (put < 0 && errno == EINTR)
            continue;
        if (put < 0)
            return fg_error_set(err, fg_io_status(errno), "%s: write failed: %s", tmp,
                                strerror(errno));
        p += put;
        n -= (size_t)put;
    }
    return FG_OK;
}

static fg_status write_contents(const char *tmp, int fd, const text_buf *header,
                                const fg_ckpt_tensor *tensors, size_t count,
                                const int64_t *bytes, fg_error *err)
{
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)header->len >> (8 * i));
    fg_status st = write_all(tmp, fd, len, 8, err);
    if (st == FG_OK)
        st = write_all(tmp, fd, header->p, header->len, err);
    for (size_t i = 0; i < count && st == FG_OK; i++)
        st = write_all(tmp, fd, tensors[i].data, (size_t)bytes[i], err);
    if (st == FG_OK && fsync(fd) != 0)
        st = fg_error_set(err, fg_io_status(errno), "%s: fsync failed: %s", tmp, strerror(errno));
    return st;
}

/* The rename is durable only once the folder's entry is on disk. */
static fg_status sync_folder(const char *path, fg_error *err)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    fg_status st = FG_OK;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT,
                          "%s: written, but its folder %s could not be synced: %s", path, dir,
                          strerror(errno));
    if (fd >= 0)
        close(fd);
    free(dir);
    return st;
}

/* Fault injection for the tests of issue 17 (harden.rotation_kill): FULGUR_TEST_CKPT_KILL =
 * "TEXT:STAGE" kills the process with SIGKILL at STAGE (created, written, renamed) of the
 * write of a checkpoint whose path contains TEXT, so a test stops a writer at an exact
 * point without timing. Unset, it costs one getenv per checkpoint. */
static void test_kill_point(const char *path, const char *stage)
{
    const char *spec = secure_getenv("FULGUR_TEST_CKPT_KILL");
    const char *colon = spec ? strrchr(spec, ':') : NULL;
    if (!colon || strcmp(colon + 1, stage) != 0)
        return;
    char text[256];
    size_t n = (size_t)(colon - spec);
    if (n == 0 || n >= sizeof text)
        return;
    memcpy(text, spec, n);
    text[n] = '\0';
    if (strstr(path, text))
        kill(getpid(), SIGKILL);
}

static fg_status write_and_rename(const char *path, const char *tmp, const text_buf *header,
                                  const fg_ckpt_tensor *tensors, size_t count,
                                  const int64_t *bytes, fg_error *err)
{
    fg_status st = fg_output_check_target(path, err);
    if (st != FG_OK)
        return st;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return fg_error_set(err, fg_io_status(errno), "%s: cannot create: %s", tmp,
                            strerror(errno));
    test_kill_point(path, "created");
    st = write_contents(tmp, fd, header, tensors, count, bytes, err);
    if (close(fd) != 0 && st == FG_OK)
        st = fg_error_set(err, fg_io_status(errno), "%s: close failed: %s", tmp, strerror(errno));
    if (st == FG_OK)
        test_kill_point(path, "written");
    if (st == FG_OK) /* again: the write took time, and a node may have appeared meanwhile */
        st = fg_output_check_target(path, err);
    if (st == FG_OK && rename(tmp, path) != 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: cannot rename %s over it: %s", path,
                          tmp, strerror(errno));
    if (st != FG_OK) {
        unlink(tmp);
        return st;
    }
    test_kill_point(path, "renamed");
    return sync_folder(path, err);
}

fg_status fg_ckpt_write_atomic(const char *path, const fg_ckpt_tensor *tensors, size_t count,
                               const char *const *meta_keys, const char *const *meta_values,
                               size_t meta_count, fg_error *err)
{
    if (!path || !path[0])
        return fg_error_set(err, FG_INVALID_ARGUMENT, "checkpoint path is empty");
    int64_t *bytes = calloc(count ? count : 1, sizeof *bytes);
    text_buf header = { 0 };
    char *tmp = NULL;
    fg_status st = FG_OK;
    if (!bytes) {
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    st = check_inputs(path, tensors, count, meta_keys, meta_values, meta_count, bytes, err);
    if (st == FG_OK)
        st = build_header(path, tensors, count, bytes, meta_keys, meta_values, meta_count,
                          &header, err);
    if (st != FG_OK)
        goto done;
    size_t tmp_len = strlen(path) + 32;
    if (!(tmp = malloc(tmp_len))) {
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    snprintf(tmp, tmp_len, "%s.tmp.%ld", path, (long)getpid());
    st = write_and_rename(path, tmp, &header, tensors, count, bytes, err);
done:
    free(tmp);
    free(header.p);
    free(bytes);
    return st;
}
