/* The pinned host memory of comm.mpi's staging (mpi_staging.h): the decision, the chunks,
 * and the copies in and out. */
#include <string.h>

#include "config_value.h"
#include "mpi_comm.h"

#define STAGE_ALIGN 64
#define STAGE_ROUND 4096

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* `[backend] name` of the run, from the resolved config; NULL when the host cannot say. */
static const char *backend_name(const fg_host *h)
{
    const char *name = NULL;
    fg_plugin_config_value(h, "backend", "name", &name);
    return name;
}

/* The mode: "auto", "true" or "false" (a host without the key, as a test driver's: auto). */
static fg_status read_mode(const fg_host *h, const char **mode, fg_error *err)
{
    *mode = "auto";
    if (!h->get_string) return FG_OK;
    fg_status st = h->get_string(h, "stage_device_buffers", mode);
    if (st == FG_NOT_FOUND) {
        *mode = "auto";
        return FG_OK;
    }
    if (st != FG_OK || !*mode || (strcmp(*mode, "auto") && strcmp(*mode, "true") && strcmp(*mode, "false")))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] stage_device_buffers = %s: want auto, "
                            "true or false", h->section, st == FG_OK && *mode ? *mode : "?");
    return FG_OK;
}

static fg_status bind_backend(fg_mpi_comm *c, const char *mode, fg_error *err)
{
    const fg_host *h = c->host;
    fg_mpi_staging *s = &c->stage;
    const void *vt = NULL;
    fg_error e = {0};
    if (!h->find_plugin || h->find_plugin(h, FG_KIND_BACKEND, &vt, &s->be_state, &e) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] stage_device_buffers = %s: staging "
                            "needs a [backend] to copy and pin memory with: %s", h->section, mode,
                            e.message[0] ? e.message : "the host cannot find plugins");
    s->be = vt;
    if (!FG_HAS_FIELD(s->be, fg_backend_vtable, copy) || !s->be->host_alloc || !s->be->host_free ||
        !s->be->queue_create || !s->be->queue_destroy || !s->be->queue_sync || !s->be->copy ||
        !s->be->device_count)
        return fg_error_set(err, FG_INCOMPATIBLE, "[%s] stage_device_buffers: the backend lacks "
                            "host_alloc/queue_create/queue_sync/copy/device_count", h->section);
    int count = 0;
    fg_status st = s->be->device_count(s->be_state, &count, err);
    if (st != FG_OK) return st;
    if (count < 1)
        return fg_error_set(err, FG_UNAVAILABLE, "[%s] stage_device_buffers: the backend has no "
                            "devices", h->section);
    s->device = c->topo.local_rank % count;
    return FG_OK;
}

fg_status fg_mpi_staging_init(fg_mpi_comm *c, fg_error *err)
{
    const fg_host *h = c->host;
    const char *mode = NULL, *backend = backend_name(h);
    fg_status st = read_mode(h, &mode, err);
    if (st != FG_OK) return st;
    int want = strcmp(mode, "auto") == 0 ? backend && strcmp(backend, "cpu") != 0
                                          : strcmp(mode, "true") == 0;
    if (want && (st = bind_backend(c, mode, err)) != FG_OK) return st;
    c->stage.enabled = want;
    if (c->stage.enabled)
        h->log(h, FG_LOG_DEBUG, "rank %d: staging device buffers through pinned host memory of "
               "backend %s, device %d (stage_device_buffers = %s)", c->topo.rank,
               backend ? backend : "?", c->stage.device, mode);
    return FG_OK;
}

void fg_mpi_staging_deinit(fg_mpi_comm *c)
{
    fg_mpi_staging *s = &c->stage;
    if (!s->enabled) return;
    c->host->log(c->host, FG_LOG_DEBUG, "rank %d: staged %llu calls, %llu bytes in, %llu bytes "
                 "out, through at most %zu bytes of pinned memory (%llu allocations)", c->topo.rank,
                 (unsigned long long)s->calls, (unsigned long long)s->bytes_in,
                 (unsigned long long)s->bytes_out, s->peak, (unsigned long long)s->allocations);
    for (int i = 0; i < s->chunks; i++) s->be->host_free(s->be_state, s->chunk[i].base);
    s->chunks = 0;
    if (s->own_queue) s->be->queue_destroy(s->be_state, s->own_queue);
    s->own_queue = NULL;
}

static size_t held(const fg_mpi_staging *s)
{
    size_t total = 0;
    for (int i = 0; i < s->chunks; i++) total += s->chunk[i].cap;
    return total;
}

static fg_status add_chunk(fg_mpi_comm *c, size_t cap, fg_error *err)
{
    fg_mpi_staging *s = &c->stage;
    if (s->chunks == FG_MPI_STAGE_CHUNKS)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "comm.mpi: staging: %d chunks of pinned memory "
                            "are in use by collectives not yet waited; wait some first",
                            FG_MPI_STAGE_CHUNKS);
    void *p = NULL;
    fg_status st = s->be->host_alloc(s->be_state, cap, &p, err);
    if (st != FG_OK) return st;
    s->chunk[s->chunks++] = (fg_mpi_stage_chunk){p, cap, 0, 0};
    s->allocations++;
    if (held(s) > s->peak) s->peak = held(s);
    return FG_OK;
}

/* Nothing in flight and more than one chunk: one chunk of their total size replaces them,
 * so the next step with the same demand fits in it (a growth, never per step). */
static fg_status merge_chunks(fg_mpi_comm *c, fg_error *err)
{
    fg_mpi_staging *s = &c->stage;
    if (s->in_flight || s->chunks < 2) return FG_OK;
    size_t total = held(s);
    for (int i = 0; i < s->chunks; i++) s->be->host_free(s->be_state, s->chunk[i].base);
    s->chunks = 0;
    return add_chunk(c, total, err);
}

/* A region of `bytes` (a multiple of STAGE_ALIGN) from the first chunk with room. */
static fg_status take(fg_mpi_comm *c, size_t bytes, fg_mpi_stage *out, fg_error *err)
{
    fg_mpi_staging *s = &c->stage;
    fg_status st = merge_chunks(c, err);
    if (st != FG_OK) return st;
    int i = 0;
    while (i < s->chunks && s->chunk[i].cap - s->chunk[i].top < bytes) i++;
    if (i == s->chunks) {
        size_t cap = round_up(bytes > held(s) ? bytes : held(s), STAGE_ROUND);
        if ((st = add_chunk(c, cap, err)) != FG_OK) return st;
    }
    fg_mpi_stage_chunk *k = &s->chunk[i];
    out->host = k->base + k->top;
    out->chunk = i;
    k->top += bytes;
    k->users++;
    s->in_flight++;
    return FG_OK;
}

void fg_mpi_stage_release(fg_mpi_comm *c, fg_mpi_stage *r)
{
    fg_mpi_staging *s = &c->stage;
    if (!r->host) return;
    fg_mpi_stage_chunk *k = &s->chunk[r->chunk];
    if (--k->users == 0) k->top = 0;
    s->in_flight--;
    r->host = NULL;
}

static fg_status queue_for(fg_mpi_comm *c, void *queue, void **out, fg_error *err)
{
    fg_mpi_staging *s = &c->stage;
    if (!queue && !s->own_queue) {
        fg_status st = s->be->queue_create(s->be_state, s->device, &s->own_queue, err);
        if (st != FG_OK) return st;
    }
    *out = queue ? queue : s->own_queue;
    return FG_OK;
}

fg_status fg_mpi_stage_in(fg_mpi_comm *c, void *queue, const void *src, size_t in_bytes,
                          size_t bytes, fg_mpi_stage *out, fg_error *err)
{
    fg_mpi_staging *s = &c->stage;
    out->host = NULL;
    fg_status st = queue_for(c, queue, &out->queue, err);
    if (st == FG_OK) st = take(c, round_up(bytes ? bytes : 1, STAGE_ALIGN), out, err);
    if (st != FG_OK) return st;
    s->calls++;
    if (in_bytes) {
        st = s->be->copy(s->be_state, out->queue, out->host, -1, src, s->device, in_bytes, err);
        if (st == FG_OK) st = s->be->queue_sync(s->be_state, out->queue, err);
        s->bytes_in += in_bytes;
    }
    if (st != FG_OK) fg_mpi_stage_release(c, out);
    return st;
}

fg_status fg_mpi_stage_out(fg_mpi_comm *c, fg_mpi_stage *r, void *dst, size_t offset,
                           size_t bytes, fg_error *err)
{
    fg_mpi_staging *s = &c->stage;
    fg_status st = FG_OK;
    if (bytes) {
        st = s->be->copy(s->be_state, r->queue, dst, s->device, r->host + offset, -1, bytes, err);
        /* Synchronised: a NULL-queue caller reads the result on return, and the region is
         * reused by the next collective. */
        if (st == FG_OK) st = s->be->queue_sync(s->be_state, r->queue, err);
        s->bytes_out += bytes;
    }
    fg_mpi_stage_release(c, r);
    return st;
}
