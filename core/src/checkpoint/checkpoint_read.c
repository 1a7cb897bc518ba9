/* Reading a checkpoint: the header is read and validated whole at open time
 * (checkpoint_header.c); tensor bytes are read on demand with pread, so a reader holds one
 * tensor at a time, never the file. */
#include "checkpoint.h"
#include "core_util.h"
#include "hf_index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct fg_ckpt {
    char *path;
    int fd;
    uint64_t data_start; /* 8 + header length */
    fg_ckpt_header header;
    int refuse_nonfinite;
    /* a Hugging Face index (hf_index.h): its shards, and each entry's shard; the entries'
     * offsets are then the shard's */
    fg_ckpt **shards;
    size_t shard_count;
    size_t *shard_of;
};

/* Reads exactly n bytes at off; a short file is an error, not a partial read. */
static fg_status read_exact(const char *path, int fd, void *dst, size_t n, uint64_t off,
                            const char *what, fg_error *err)
{
    char *p = dst;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: reading %s at byte %llu: %s",
                                path, what, (unsigned long long)off, strerror(errno));
        if (got == 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: reading %s at byte %llu: unexpected end of file", path,
                                what, (unsigned long long)off);
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return FG_OK;
}

static fg_status open_file(const char *path, int *fd_out, uint64_t *size, fg_error *err)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below (and a
     * regular file reads the same either way). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return fg_error_set(err, errno == ENOENT ? FG_NOT_FOUND : FG_INVALID_ARGUMENT,
                            "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fg_status s = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: not a regular file", path);
        close(fd);
        return s;
    }
    *fd_out = fd;
    *size = (uint64_t)st.st_size;
    return FG_OK;
}

/* The 8-byte length prefix, bounded by the file and by FG_CKPT_MAX_HEADER. */
static fg_status read_header_length(fg_ckpt *c, uint64_t file_size, uint64_t *len,
                                    fg_error *err)
{
    if (file_size < 8)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: file is %llu bytes, too short for the 8-byte header length",
                            c->path, (unsigned long long)file_size);
    unsigned char b[8];
    fg_status st = read_exact(c->path, c->fd, b, 8, 0, "the header length", err);
    if (st != FG_OK)
        return st;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | b[i];
    if (n > file_size - 8)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: header length %llu exceeds the %llu bytes after it", c->path,
                            (unsigned long long)n, (unsigned long long)(file_size - 8));
    if (n > FG_CKPT_MAX_HEADER)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: header length %llu exceeds the %llu-byte limit", c->path,
                            (unsigned long long)n, (unsigned long long)FG_CKPT_MAX_HEADER);
    *len = n;
    return FG_OK;
}

static fg_status read_header(fg_ckpt *c, fg_error *err)
{
    uint64_t file_size = 0, len = 0;
    fg_status st = open_file(c->path, &c->fd, &file_size, err);
    if (st == FG_OK)
        st = read_header_length(c, file_size, &len, err);
    if (st != FG_OK)
        return st;
    char *text = malloc(len ? (size_t)len : 1);
    if (!text)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for a %llu-byte header",
                            c->path, (unsigned long long)len);
    st = read_exact(c->path, c->fd, text, (size_t)len, 8, "the header", err);
    c->data_start = 8 + len;
    if (st == FG_OK)
        st = fg_ckpt_header_parse(c->path, text, (size_t)len, file_size - c->data_start,
                                  &c->header, err);
    free(text);
    return st;
}

/* The weight_map's tensor i, found in its shard, as entry i of c. */
static fg_status take_entry(fg_ckpt *c, const fg_hf_index *x, size_t i, fg_error *err)
{
    fg_ckpt *shard = c->shards[x->file_of[i]];
    const fg_ckpt_header *h = &shard->header;
    for (size_t k = 0; k < h->count; k++)
        if (strcmp(h->entries[k].name, x->names[i]) == 0) {
            c->header.entries[i] = h->entries[k];
            c->header.entries[i].name = strdup(x->names[i]);
            c->shard_of[i] = x->file_of[i];
            c->header.count++;
            return c->header.entries[i].name ? FG_OK
                   : fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", c->path);
        }
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: weight_map puts '%s' in %s, which does "
                        "not hold it", c->path, x->names[i], shard->path);
}

/* Every tensor of every shard is in the weight_map, under that shard. */
static fg_status check_shards_listed(const fg_ckpt *c, const fg_hf_index *x, fg_error *err)
{
    for (size_t f = 0; f < c->shard_count; f++) {
        const fg_ckpt_header *h = &c->shards[f]->header;
        for (size_t k = 0; k < h->count; k++) {
            size_t i = 0;
            while (i < x->count && strcmp(x->names[i], h->entries[k].name) != 0)
                i++;
            if (i == x->count || x->file_of[i] != f)
                return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: %s holds '%s', which "
                                    "weight_map %s", c->path, c->shards[f]->path,
                                    h->entries[k].name,
                                    i == x->count ? "does not name" : "puts in another file");
        }
    }
    return FG_OK;
}

/* A Hugging Face index read as one file: its shards opened, their tensors as its own. */
static fg_status open_index(fg_ckpt *c, fg_error *err)
{
    fg_hf_index x;
    fg_status st = fg_hf_index_read(c->path, &x, err);
    if (st != FG_OK)
        return st;
    c->shards = calloc(x.file_count, sizeof *c->shards);
    c->shard_of = calloc(x.count, sizeof *c->shard_of);
    c->header.entries = calloc(x.count, sizeof *c->header.entries);
    if (!c->shards || !c->shard_of || !c->header.entries)
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", c->path);
    for (size_t f = 0; st == FG_OK && f < x.file_count; f++, c->shard_count++)
        st = access(x.files[f], R_OK) != 0
                 ? fg_error_set(err, errno == ENOENT ? FG_NOT_FOUND : FG_INVALID_ARGUMENT,
                                "%s: weight_map names %s, which cannot be opened: %s",
                                c->path, x.files[f], strerror(errno))
                 : fg_ckpt_open(x.files[f], &c->shards[f], err);
    for (size_t i = 0; st == FG_OK && i < x.count; i++)
        st = take_entry(c, &x, i, err);
    if (st == FG_OK)
        st = check_shards_listed(c, &x, err);
    fg_hf_index_free(&x);
    return st;
}

fg_status fg_ckpt_open(const char *path, fg_ckpt **out, fg_error *err)
{
    *out = NULL;
    fg_ckpt *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    c->fd = -1;
    fg_status st = fg_hf_index_is(path) ? open_index(c, err) : read_header(c, err);
    if (st == FG_OK)
        st = fg_ckpt_check_trainer_meta(c, err);
    return FG_CREATED(st, c, out, fg_ckpt_close);
}

void fg_ckpt_close(fg_ckpt *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    for (size_t f = 0; f < c->shard_count; f++)
        fg_ckpt_close(c->shards[f]);
    free(c->shards);
    free(c->shard_of);
    fg_ckpt_header_free(&c->header);
    free(c->path);
    free(c);
}

const char *fg_ckpt_path(const fg_ckpt *c)
{
    return c->path;
}

const char *fg_ckpt_meta(const fg_ckpt *c, const char *key)
{
    for (size_t i = 0; i < c->header.meta_count; i++)
        if (strcmp(c->header.meta_keys[i], key) == 0)
            return c->header.meta_values[i];
    return NULL;
}

size_t fg_ckpt_meta_count(const fg_ckpt *c)
{
    return c->header.meta_count;
}

const char *fg_ckpt_meta_key(const fg_ckpt *c, size_t i)
{
    return i < c->header.meta_count ? c->header.meta_keys[i] : NULL;
}

size_t fg_ckpt_tensor_count(const fg_ckpt *c)
{
    return c->header.count;
}

const char *fg_ckpt_tensor_name(const fg_ckpt *c, size_t i)
{
    return i < c->header.count ? c->header.entries[i].name : NULL;
}

/* A linear scan: checkpoints hold hundreds of tensors, and each is read once. */
static const fg_ckpt_entry *find_entry(const fg_ckpt *c, const char *name, fg_error *err)
{
    for (size_t i = 0; i < c->header.count; i++)
        if (strcmp(c->header.entries[i].name, name) == 0)
            return &c->header.entries[i];
    fg_error_set(err, FG_NOT_FOUND, "%s: no tensor '%s' (the file holds %zu tensors)", c->path,
                 name, c->header.count);
    return NULL;
}

fg_status fg_ckpt_tensor_info(const fg_ckpt *c, const char *name, fg_dtype *dtype, int *rank,
                              int64_t *shape, fg_error *err)
{
    const fg_ckpt_entry *e = find_entry(c, name, err);
    if (!e)
        return FG_NOT_FOUND;
    if (dtype)
        *dtype = e->dtype;
    if (rank)
        *rank = e->rank;
    if (shape)
        memcpy(shape, e->shape, sizeof e->shape);
    return FG_OK;
}

static fg_status check_expectation(const fg_ckpt *c, const fg_ckpt_entry *e, fg_dtype dtype,
                                   int rank, const int64_t *shape, fg_error *err)
{
    if (e->dtype != dtype) {
        const char *want = fg_ckpt_dtype_tag(dtype);
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: tensor '%s': expected dtype %s but the file holds %s", c->path,
                            e->name, want ? want : "(invalid)", fg_ckpt_dtype_tag(e->dtype));
    }
    int same = rank == e->rank;
    for (int d = 0; same && d < rank; d++)
        same = shape[d] == e->shape[d];
    if (!same) {
        char want[256], got[256];
        fg_ckpt_format_shape(want, sizeof want, rank, shape);
        fg_ckpt_format_shape(got, sizeof got, e->rank, e->shape);
        return fg_error_set(err, FG_INCOMPATIBLE,
                            "%s: tensor '%s': expected shape %s but the file holds %s", c->path,
                            e->name, want, got);
    }
    return FG_OK;
}

fg_status fg_ckpt_read_tensor(fg_ckpt *c, const char *name, fg_dtype dtype, int rank,
                              const int64_t *shape, void *dst, fg_error *err)
{
    const fg_ckpt_entry *e = find_entry(c, name, err);
    if (!e)
        return FG_NOT_FOUND;
    if (rank < 0 || rank > FG_MAX_DIMS || (rank > 0 && !shape))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': the caller's expected rank %d is invalid%s",
                            c->path, name, rank, rank > 0 && !shape ? " (shape is NULL)" : "");
    fg_status st = check_expectation(c, e, dtype, rank, shape, err);
    if (st != FG_OK)
        return st;
    if (c->shards) { /* the shard reads (and checks) it */
        fg_ckpt *shard = c->shards[c->shard_of[e - c->header.entries]];
        shard->refuse_nonfinite = c->refuse_nonfinite;
        return fg_ckpt_read_tensor(shard, name, dtype, rank, shape, dst, err);
    }
    char what[64 + 256];
    snprintf(what, sizeof what, "tensor '%s'", e->name);
    size_t bytes = (size_t)(e->end - e->begin);
    st = read_exact(c->path, c->fd, dst, bytes, c->data_start + e->begin, what, err);
    if (st == FG_OK && c->refuse_nonfinite)
        st = fg_ckpt_check_finite(c, e->name, e->dtype, dst, bytes, err);
    return st;
}

void fg_ckpt_refuse_nonfinite(fg_ckpt *c, int refuse)
{
    c->refuse_nonfinite = refuse;
}
