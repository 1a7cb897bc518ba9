/* Mapping and checking a token file. */
#define _POSIX_C_SOURCE 200809L
#include "tokens_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void tokens_file_close(tokens_file *f)
{
    if (f->map)
        munmap(f->map, f->map_bytes);
    memset(f, 0, sizeof *f);
}

static fg_status map_file(const char *path, tokens_file *f, fg_error *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return fg_error_set(err, errno == ENOENT ? FG_NOT_FOUND : FG_INVALID_ARGUMENT,
                            "tokens: %s: cannot open: %s", path, strerror(errno));
    struct stat st;
    fg_status status = FG_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        status = fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: not a regular file", path);
    else if (st.st_size == 0)
        status = fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: the file is empty", path);
    if (status == FG_OK) {
        f->map_bytes = (size_t)st.st_size;
        f->map = mmap(NULL, f->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            status = fg_error_set(err, FG_OUT_OF_MEMORY, "tokens: %s: cannot map %zu bytes: %s",
                                  path, f->map_bytes, strerror(errno));
        }
    }
    close(fd);
    return status;
}

static int32_t header_word(const tokens_file *f, int i)
{
    int32_t v;
    memcpy(&v, (const char *)f->map + 4 * i, 4);
    return v;
}

static fg_status read_llmc_header(const char *path, tokens_file *f, fg_error *err)
{
    if (f->map_bytes < TOKENS_LLMC_HEADER_BYTES || header_word(f, 0) != TOKENS_LLMC_MAGIC)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: bad magic %d, expected "
                            "llm.c's %d (format = llmc)", path,
                            f->map_bytes >= 4 ? header_word(f, 0) : 0, TOKENS_LLMC_MAGIC);
    if (header_word(f, 1) != 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: llm.c version %d is not "
                            "supported (version 1: uint16 tokens)", path, header_word(f, 1));
    int64_t count = header_word(f, 2);
    int64_t payload = (int64_t)f->map_bytes - TOKENS_LLMC_HEADER_BYTES;
    if (count < 0 || payload != 2 * count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: the header declares %lld "
                            "tokens (%lld bytes) but %lld bytes follow it", path,
                            (long long)count, (long long)(2 * count), (long long)payload);
    f->tokens = (const uint16_t *)((const char *)f->map + TOKENS_LLMC_HEADER_BYTES);
    f->count = count;
    return FG_OK;
}

static fg_status read_raw(const char *path, tokens_file *f, fg_error *err)
{
    if (f->map_bytes % 2 != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: %zu bytes is an odd count: "
                            "not uint16 tokens", path, f->map_bytes);
    f->tokens = f->map;
    f->count = (int64_t)(f->map_bytes / 2);
    return FG_OK;
}

static fg_status check_tokens(const char *path, const tokens_file *f, int32_t vocab,
                              int64_t min_tokens, fg_error *err)
{
    if (f->count < min_tokens)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: %lld tokens, fewer than one "
                            "window of context + 1 = %lld", path, (long long)f->count,
                            (long long)min_tokens);
    for (int64_t i = 0; i < f->count; i++)
        if (f->tokens[i] >= vocab)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: %s: token %lld is %u, not "
                                "below vocab_size = %d", path, (long long)i, f->tokens[i],
                                vocab);
    return FG_OK;
}

fg_status tokens_file_open(const char *path, tokens_format format, int32_t vocab,
                           int64_t min_tokens, tokens_file *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    fg_status st = map_file(path, out, err);
    if (st == FG_OK && format == TOKENS_AUTO)
        format = out->map_bytes >= TOKENS_LLMC_HEADER_BYTES &&
                         header_word(out, 0) == TOKENS_LLMC_MAGIC
                     ? TOKENS_LLMC
                     : TOKENS_NANOGPT;
    if (st == FG_OK)
        st = format == TOKENS_LLMC ? read_llmc_header(path, out, err) : read_raw(path, out, err);
    if (st == FG_OK)
        st = check_tokens(path, out, vocab, min_tokens, err);
    if (st != FG_OK)
        tokens_file_close(out);
    return st;
}
