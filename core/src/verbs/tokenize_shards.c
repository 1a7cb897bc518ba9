/* Writing llm.c token shards (tokenize_shards.h). */
#define _POSIX_C_SOURCE 200809L
#include "tokenize_shards.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "output_file.h"

#define LLMC_MAGIC 20240520
#define LLMC_HEADER_INTS 256
#define PUT_BATCH 4096

void fg_shard_writer_init(fg_shard_writer *w, const char *dir, const char *prefix,
                          int64_t shard_tokens)
{
    memset(w, 0, sizeof *w);
    w->dir = dir;
    w->prefix = prefix;
    w->shard_tokens = shard_tokens;
}

static fg_status write_failed(fg_shard_writer *w, fg_error *err)
{
    int e = errno;
    return fg_error_set(err, fg_output_errno_status(e), "fulgur tokenize: %s: cannot write: %s",
                        w->tmp, strerror(e));
}

static fg_status write_header(fg_shard_writer *w, fg_error *err)
{
    int32_t header[LLMC_HEADER_INTS] = {LLMC_MAGIC, 1, (int32_t)w->count};
    if (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(header, sizeof header, 1, w->f) != 1)
        return write_failed(w, err);
    return FG_OK;
}

static fg_status open_shard(fg_shard_writer *w, fg_error *err)
{
    snprintf(w->path, sizeof w->path, "%s/%s_%06d.bin", w->dir, w->prefix, w->index);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld", w->path, (long)getpid());
    fg_status st = fg_output_check_target(w->path, err);
    if (st == FG_OK)
        st = fg_output_open(w->tmp, "w", &w->f, err);
    w->count = 0;
    return st == FG_OK ? write_header(w, err) : st;
}

fg_status fg_shard_writer_finish(fg_shard_writer *w, fg_error *err)
{
    if (!w->f)
        return FG_OK;
    fg_status st = write_header(w, err);
    if (st == FG_OK && fflush(w->f) != 0)
        st = write_failed(w, err);
    if (fclose(w->f) != 0 && st == FG_OK)
        st = write_failed(w, err);
    w->f = NULL;
    if (st == FG_OK && rename(w->tmp, w->path) != 0)
        st = fg_error_set(err, fg_output_errno_status(errno), "fulgur tokenize: cannot rename "
                          "%s to %s: %s", w->tmp, w->path, strerror(errno));
    if (st != FG_OK) {
        unlink(w->tmp);
        return st;
    }
    w->shards++;
    w->index++;
    return FG_OK;
}

void fg_shard_writer_abandon(fg_shard_writer *w)
{
    if (!w->f)
        return;
    fclose(w->f);
    w->f = NULL;
    unlink(w->tmp);
}

fg_status fg_shard_writer_put(fg_shard_writer *w, const int32_t *ids, size_t n, fg_error *err)
{
    uint16_t batch[PUT_BATCH];
    fg_status st = FG_OK;
    while (st == FG_OK && n > 0) {
        if (!w->f && (st = open_shard(w, err)) != FG_OK)
            break;
        int64_t room = w->shard_tokens - w->count;
        size_t k = n < PUT_BATCH ? n : PUT_BATCH;
        k = (int64_t)k < room ? k : (size_t)room;
        for (size_t i = 0; i < k; i++)
            batch[i] = (uint16_t)ids[i];
        if (fwrite(batch, sizeof *batch, k, w->f) != k)
            return write_failed(w, err);
        w->count += (int64_t)k;
        w->total += (int64_t)k;
        ids += k;
        n -= k;
        if (w->count == w->shard_tokens)
            st = fg_shard_writer_finish(w, err);
    }
    return st;
}
