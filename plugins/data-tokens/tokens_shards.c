/* A split over many token files (tokens_shards.h). */
#include "tokens_shards.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

void tokens_shards_close(tokens_shards *s)
{
    for (int i = 0; i < s->count; i++)
        tokens_file_close(&s->files[i]);
    free(s->files);
    free(s->first);
    memset(s, 0, sizeof *s);
}

static fg_status alloc_files(tokens_shards *s, size_t n, fg_error *err)
{
    s->files = calloc(n, sizeof *s->files);
    s->first = calloc(n, sizeof *s->first);
    if (!s->files || !s->first)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokens: out of memory");
    return FG_OK;
}

static fg_status open_matches(const char *key, const char *pattern, tokens_format format,
                              int32_t vocab, int64_t min_tokens, tokens_shards *s,
                              fg_error *err)
{
    glob_t g;
    int rc = glob(pattern, GLOB_ERR, NULL, &g);
    if (rc == GLOB_NOMATCH)
        return fg_error_set(err, FG_NOT_FOUND, "tokens: option %s = \"%s\" matches no file",
                            key, pattern);
    if (rc != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: option %s = \"%s\": the glob "
                            "failed (an unreadable folder?)", key, pattern);
    fg_status st = alloc_files(s, g.gl_pathc, err);
    for (size_t i = 0; st == FG_OK && i < g.gl_pathc; i++) { /* glob sorts the names */
        st = tokens_file_open(g.gl_pathv[i], format, vocab, 1, &s->files[i], err);
        if (st == FG_OK) {
            s->first[i] = s->total;
            s->total += s->files[i].count;
            s->count++;
        }
    }
    if (st == FG_OK && s->total < min_tokens)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: option %s = \"%s\": %zu files "
                          "hold %lld tokens, fewer than one window of context + 1 = %lld", key,
                          pattern, g.gl_pathc, (long long)s->total, (long long)min_tokens);
    globfree(&g);
    return st;
}

fg_status tokens_shards_open(const char *key, const char *name, tokens_format format,
                             int32_t vocab, int64_t min_tokens, tokens_shards *out,
                             fg_error *err)
{
    memset(out, 0, sizeof *out);
    fg_status st;
    if (strpbrk(name, "*?[")) {
        st = open_matches(key, name, format, vocab, min_tokens, out, err);
    } else {
        st = alloc_files(out, 1, err);
        if (st == FG_OK)
            st = tokens_file_open(name, format, vocab, min_tokens, &out->files[0], err);
        if (st == FG_OK) {
            out->count = 1;
            out->total = out->files[0].count;
        }
    }
    if (st != FG_OK)
        tokens_shards_close(out);
    return st;
}

/* The file holding stream offset at: the last whose first token is at or before it. */
static int shard_of(const tokens_shards *s, int64_t at)
{
    int lo = 0, hi = s->count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (s->first[mid] <= at)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

fg_status tokens_shards_read(void *shards, int64_t start, int64_t n, void *out, fg_error *err)
{
    const tokens_shards *s = shards;
    uint16_t *dst = out;
    fg_status st = FG_OK;
    while (st == FG_OK && n > 0) {
        int i = shard_of(s, start);
        int64_t local = start - s->first[i];
        int64_t k = s->files[i].count - local < n ? s->files[i].count - local : n;
        st = tokens_file_read((void *)&s->files[i], local, k, dst, err);
        dst += k;
        start += k;
        n -= k;
    }
    return st;
}
