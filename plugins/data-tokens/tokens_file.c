/* Opening, checking and reading a token file (tokens_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "tokens_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK_CHUNK_TOKENS (1 << 19) /* 1 MiB a pread while checking the vocabulary */

void tokens_file_close(tokens_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* n bytes at offset, all of them, or the reason it read fewer. */
static fg_status read_exact(const tokens_file *f, int64_t offset, size_t n, void *out,
                            fg_error *err)
{
    size_t done = 0;
    while (done < n) {
        ssize_t got = pread(f->fd, (char *)out + done, n - done, (off_t)(offset + (int64_t)done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: read failed at byte %lld: "
                                "%s", f->path, (long long)(offset + (int64_t)done), strerror(errno));
        if (got == 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: the file ends at byte %lld, "
                                "%lld bytes were expected (%lld at open): was it truncated or "
                                "rewritten during the run?", f->path,
                                (long long)(offset + (int64_t)done), (long long)(offset + (int64_t)n),
                                (long long)f->bytes);
        done += (size_t)got;
    }
    return FG_OK;
}

fg_status tokens_file_read(void *file, int64_t start, int64_t n, void *out, fg_error *err)
{
    const tokens_file *f = file;
    return read_exact(f, f->offset + 2 * start, (size_t)n * 2, out, err);
}

static fg_status open_file(const char *path, tokens_file *f, fg_error *err)
{
    f->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f->fd < 0)
        return fg_error_set(err, errno == ENOENT ? FG_NOT_FOUND : FG_INVALID_ARGUMENT,
                            "tokens: %s: cannot open: %s", path, strerror(errno));
    if (!(f->path = strdup(path)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokens: out of memory");
    struct stat st;
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: not a regular file", path);
    if (st.st_size == 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: the file is empty", path);
    f->bytes = (int64_t)st.st_size;
    return FG_OK;
}

static fg_status read_llmc_header(const char *path, tokens_file *f, const int32_t *head,
                                  fg_error *err)
{
    if (f->bytes < TOKENS_LLMC_HEADER_BYTES || head[0] != TOKENS_LLMC_MAGIC)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: bad magic %d, expected "
                            "llm.c's %d (format = llmc)", path, f->bytes >= 4 ? head[0] : 0,
                            TOKENS_LLMC_MAGIC);
    if (head[1] != 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: llm.c version %d is not "
                            "supported (version 1: uint16 tokens)", path, head[1]);
    int64_t count = head[2];
    int64_t payload = f->bytes - TOKENS_LLMC_HEADER_BYTES;
    if (count < 0 || payload != 2 * count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: the header declares %lld "
                            "tokens (%lld bytes) but %lld bytes follow it", path,
                            (long long)count, (long long)(2 * count), (long long)payload);
    f->offset = TOKENS_LLMC_HEADER_BYTES;
    f->count = count;
    return FG_OK;
}

static fg_status read_raw(const char *path, tokens_file *f, fg_error *err)
{
    if (f->bytes % 2 != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: %lld bytes is an odd count: "
                            "not uint16 tokens", path, (long long)f->bytes);
    f->offset = 0;
    f->count = f->bytes / 2;
    return FG_OK;
}

static fg_status check_tokens(const char *path, tokens_file *f, int32_t vocab,
                              int64_t min_tokens, fg_error *err)
{
    if (f->count < min_tokens)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: %lld tokens, fewer than one "
                            "window of context + 1 = %lld", path, (long long)f->count,
                            (long long)min_tokens);
    uint16_t *chunk = malloc(CHECK_CHUNK_TOKENS * sizeof *chunk);
    if (!chunk)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokens: out of memory");
    fg_status st = FG_OK;
    for (int64_t at = 0; at < f->count && st == FG_OK; at += CHECK_CHUNK_TOKENS) {
        int64_t n = f->count - at < CHECK_CHUNK_TOKENS ? f->count - at : CHECK_CHUNK_TOKENS;
        st = tokens_file_read(f, at, n, chunk, err);
        for (int64_t i = 0; st == FG_OK && i < n; i++)
            if (chunk[i] >= vocab)
                st = fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: token %lld is %u, not "
                                  "below vocab_size = %d", path, (long long)(at + i), chunk[i],
                                  vocab);
    }
    free(chunk);
    return st;
}

fg_status tokens_file_open(const char *path, tokens_format format, int32_t vocab,
                           int64_t min_tokens, tokens_file *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
    int32_t head[3] = {0, 0, 0};
    fg_status st = open_file(path, out, err);
    if (st == FG_OK && out->bytes >= (int64_t)sizeof head)
        st = read_exact(out, 0, sizeof head, head, err);
    if (st == FG_OK && format == TOKENS_AUTO)
        format = out->bytes >= TOKENS_LLMC_HEADER_BYTES && head[0] == TOKENS_LLMC_MAGIC
                     ? TOKENS_LLMC
                     : TOKENS_NANOGPT;
    if (st == FG_OK)
        st = format == TOKENS_LLMC ? read_llmc_header(path, out, head, err)
                                   : read_raw(path, out, err);
    if (st == FG_OK)
        st = check_tokens(path, out, vocab, min_tokens, err);
    if (st != FG_OK)
        tokens_file_close(out);
    return st;
}
