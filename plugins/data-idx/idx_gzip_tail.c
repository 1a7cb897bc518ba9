/* gzread stops at the end of the last gzip member and ignores whatever follows, so a file
 * with garbage after its stream reads as if it were whole. This pass walks the members
 * with inflate itself: each must be complete, and nothing but another member may follow. */
#define _POSIX_C_SOURCE 200809L

#include "idx_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define IDX_GZ_CHUNK (1u << 16)

typedef struct gz_walk {
    FILE *f;
    z_stream zs;
    unsigned char in[IDX_GZ_CHUNK], out[IDX_GZ_CHUNK];
    int64_t consumed; /* compressed bytes before zs.next_in */
} gz_walk;

/* Refills the input when empty; 0 at the end of the file. */
static size_t refill(gz_walk *w)
{
    if (w->zs.avail_in > 0)
        return w->zs.avail_in;
    w->consumed += (int64_t)(w->zs.next_in ? w->zs.next_in - w->in : 0);
    size_t got = fread(w->in, 1, sizeof w->in, w->f);
    w->zs.next_in = w->in;
    w->zs.avail_in = (uInt)got;
    return got;
}

/* Counts what is left of the file from zs.next_in on. */
static int64_t bytes_left(gz_walk *w)
{
    int64_t n = w->zs.avail_in;
    size_t got;
    while ((got = fread(w->in, 1, sizeof w->in, w->f)) > 0)
        n += (int64_t)got;
    return n;
}

/* Inflates one member to its end; FG_OK, or an error for a torn or corrupt member. */
static fg_status inflate_member(gz_walk *w, const char *path, fg_error *err)
{
    for (;;) {
        if (refill(w) == 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "idx: %s: truncated gzip stream (it ends inside a member)", path);
        w->zs.next_out = w->out;
        w->zs.avail_out = sizeof w->out;
        int r = inflate(&w->zs, Z_NO_FLUSH);
        if (r == Z_STREAM_END)
            return FG_OK;
        if (r != Z_OK && r != Z_BUF_ERROR)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "idx: %s: corrupt gzip stream: zlib: %s",
                                path, w->zs.msg ? w->zs.msg : "error");
    }
}

/* After a member: the end of the file, another member (1f 8b), or garbage. */
static fg_status check_after_member(gz_walk *w, const char *path, int *more, fg_error *err)
{
    *more = 0;
    if (refill(w) == 0)
        return FG_OK;
    if (w->zs.avail_in < 2) { /* a member's magic may straddle two reads */
        unsigned char first = w->zs.next_in[0];
        size_t got = fread(w->in + 1, 1, sizeof w->in - 1, w->f);
        w->consumed += (int64_t)(w->zs.next_in - w->in);
        w->in[0] = first;
        w->zs.next_in = w->in;
        w->zs.avail_in = (uInt)(1 + got);
    }
    if (w->zs.avail_in >= 2 && w->zs.next_in[0] == 0x1f && w->zs.next_in[1] == 0x8b) {
        *more = 1;
        return inflateReset(&w->zs) == Z_OK
                   ? FG_OK
                   : fg_error_set(err, FG_OUT_OF_MEMORY, "idx: %s: zlib reset failed", path);
    }
    int64_t at = w->consumed + (int64_t)(w->zs.next_in - w->in);
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "idx: %s: %lld bytes of trailing garbage after the gzip stream (from "
                        "byte %lld of the file)", path, (long long)bytes_left(w), (long long)at);
}

fg_status idx_gzip_check_tail(const char *path, fg_error *err)
{
    static const gz_walk zero;
    gz_walk *w = malloc(sizeof *w);
    if (w == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "idx: %s: out of memory", path);
    *w = zero;
    w->f = fopen(path, "rb");
    if (w->f == NULL) {
        free(w);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "idx: cannot reopen %s: %s", path,
                            strerror(errno));
    }
    fg_status st = FG_OK;
    if (inflateInit2(&w->zs, 16 + MAX_WBITS) != Z_OK)
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "idx: %s: zlib init failed", path);
    else {
        for (int more = 1; st == FG_OK && more;) {
            st = inflate_member(w, path, err);
            if (st == FG_OK)
                st = check_after_member(w, path, &more, err);
        }
        inflateEnd(&w->zs);
    }
    fclose(w->f);
    free(w);
    return st;
}
