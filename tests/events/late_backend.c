/* fulgur-backend-latecopy.so, a test fixture (never installed): the CPU backend whose
 * host-to-device copies out of pinned memory complete late, as a GPU's DMA does, and which
 * catches a caller that rewrites a pinned buffer before the copy out of it completed.
 *
 * It loads the real fulgur-backend-cpu.so (LATE_CPU_PLUGIN), hands out its state and runs
 * its ops; only memory, queues, copies and events are its own:
 *   - copy_queue_create makes a copy queue. A copy on it from memory of host_alloc is not
 *     done at once: it is queued, with a hash of its source bytes.
 *   - the copy is applied (its destination written) only when a queue waits for an event
 *     recorded after it (queue_wait_event: the compute queue needs the data now), or when
 *     the host waits (event_sync, queue_sync). A forward that did not wait reads stale data.
 *   - the copy completes only when the host waits: event_sync of an event recorded after
 *     it, or queue_sync of its queue. Until then its source must not change: at every call
 *     of this fixture, and when a copy completes, every copy still in flight has its source
 *     hashed again. A changed source is a violation: the call fails naming the buffer, and
 *     the count is printed at deinit.
 * Everything is deterministic: no thread of its own, no sleeps. Copies from pageable
 * memory complete before copy returns (as CUDA stages them), and the compute queues are the
 * CPU's: synchronous.
 *
 * A test fixture keeps its bookkeeping in one global (a process loads a backend once); a
 * product plugin keeps state in its context. At deinit it prints to stderr:
 *   latecopy: deferred N, applied by a queue wait N, completed by event_sync N, completed by
 *   queue_sync N, violations N */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fulgur/backend.h"

#define LATE_MAX_PINNED 256
#define LATE_MAX_QUEUES 64
#define LATE_MAX_INFLIGHT 512

typedef struct late_copy {
    void *dst;
    const void *src;
    size_t bytes;
    uint64_t hash; /* of the source when the copy was enqueued */
    uint64_t seq;  /* 1-based, per queue */
    int applied;   /* the destination holds the data */
} late_copy;

typedef struct late_queue {
    int device;
    uint64_t enqueued;                    /* seq of the last copy enqueued */
    late_copy flight[LATE_MAX_INFLIGHT];  /* not completed, in seq order */
    int count;
} late_queue;

typedef struct late_event {
    int device;
    late_queue *queue; /* recorded on a copy queue; NULL: complete */
    uint64_t upto;     /* copies of `queue` with seq <= upto */
} late_event;

static struct {
    pthread_mutex_t mu;
    void *lib;
    const fg_plugin *cpu;
    const fg_backend_vtable *cvt;
    struct { const char *p; size_t n; } pinned[LATE_MAX_PINNED];
    int npinned;
    late_queue *queues[LATE_MAX_QUEUES];
    int nqueues;
    unsigned long long deferred, applied_by_wait, done_by_event_sync, done_by_queue_sync,
        violations;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

static fg_backend_vtable late_vtable = {.struct_size = sizeof(fg_backend_vtable)};

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Called with G.mu held. */
static int late_is_pinned(const void *p, size_t n)
{
    const char *c = p;
    for (int i = 0; i < G.npinned; i++)
        if (c >= G.pinned[i].p && c + n <= G.pinned[i].p + G.pinned[i].n)
            return 1;
    return 0;
}

static int late_is_copy_queue(const void *q)
{
    for (int i = 0; i < G.nqueues; i++)
        if (G.queues[i] == q)
            return 1;
    return 0;
}

/* Every copy in flight still has its source as enqueued; else a violation, err says where. */
static fg_status late_check_sources(fg_error *err)
{
    fg_status st = FG_OK;
    for (int i = 0; i < G.nqueues; i++) {
        late_queue *q = G.queues[i];
        for (int k = 0; k < q->count; k++) {
            late_copy *c = &q->flight[k];
            if (hash_bytes(c->src, c->bytes) == c->hash)
                continue;
            G.violations++;
            c->hash = hash_bytes(c->src, c->bytes); /* counted once per rewrite */
            if (st == FG_OK)
                st = fg_error_set(err, FG_INTERNAL,
                                  "latecopy: pinned buffer %p (%zu bytes) was rewritten while "
                                  "copy %" PRIu64 " out of it (device %d) had not completed: "
                                  "no event_sync of an event recorded after it, nor a "
                                  "queue_sync, came first", c->src, c->bytes, c->seq, q->device);
        }
    }
    return st;
}

/* Writes the destinations of q's copies up to seq `upto`. */
static void late_apply(late_queue *q, uint64_t upto)
{
    for (int k = 0; k < q->count && q->flight[k].seq <= upto; k++) {
        late_copy *c = &q->flight[k];
        if (!c->applied) {
            memcpy(c->dst, c->src, c->bytes);
            c->applied = 1;
            G.applied_by_wait++;
        }
    }
}

/* Completes q's copies up to seq `upto`; counts them in *counter. */
static void late_complete(late_queue *q, uint64_t upto, unsigned long long *counter)
{
    int k = 0;
    for (; k < q->count && q->flight[k].seq <= upto; k++) {
        late_copy *c = &q->flight[k];
        if (!c->applied)
            memcpy(c->dst, c->src, c->bytes);
        (*counter)++;
    }
    memmove(q->flight, q->flight + k, (size_t)(q->count - k) * sizeof *q->flight);
    q->count -= k;
}

/* ---- memory ----------------------------------------------------------------------------- */

static fg_status late_host_alloc(void *state, size_t bytes, void **ptr, fg_error *err)
{
    fg_status st = G.cvt->host_alloc(state, bytes, ptr, err);
    if (st != FG_OK)
        return st;
    pthread_mutex_lock(&G.mu);
    if (G.npinned == LATE_MAX_PINNED) {
        pthread_mutex_unlock(&G.mu);
        G.cvt->host_free(state, *ptr);
        *ptr = NULL;
        return fg_error_set(err, FG_OUT_OF_MEMORY, "latecopy: more than %d pinned buffers",
                            LATE_MAX_PINNED);
    }
    G.pinned[G.npinned].p = *ptr;
    G.pinned[G.npinned].n = bytes;
    G.npinned++;
    pthread_mutex_unlock(&G.mu);
    return FG_OK;
}

static void late_host_free(void *state, void *ptr)
{
    pthread_mutex_lock(&G.mu);
    for (int i = 0; i < G.npinned; i++)
        if (G.pinned[i].p == ptr)
            G.pinned[i] = G.pinned[--G.npinned];
    pthread_mutex_unlock(&G.mu);
    G.cvt->host_free(state, ptr);
}

/* ---- queues and copies ------------------------------------------------------------------ */

static fg_status late_copy_queue_create(void *state, int device, void **queue, fg_error *err)
{
    int count = 0;
    fg_status st = G.cvt->device_count(state, &count, err);
    if (st != FG_OK)
        return st;
    if (device < 0 || device >= count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "latecopy: copy_queue_create: device %d "
                            "does not exist (%d)", device, count);
    late_queue *q = calloc(1, sizeof *q);
    if (!q)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "latecopy: out of memory");
    q->device = device;
    pthread_mutex_lock(&G.mu);
    if (G.nqueues == LATE_MAX_QUEUES) {
        pthread_mutex_unlock(&G.mu);
        free(q);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "latecopy: more than %d copy queues",
                            LATE_MAX_QUEUES);
    }
    G.queues[G.nqueues++] = q;
    pthread_mutex_unlock(&G.mu);
    *queue = q;
    return FG_OK;
}

static void late_queue_destroy(void *state, void *queue)
{
    pthread_mutex_lock(&G.mu);
    int mine = late_is_copy_queue(queue);
    if (mine) {
        late_queue *q = queue;
        fg_error ignored = {FG_OK, ""};
        late_check_sources(&ignored);
        late_complete(q, q->enqueued, &G.done_by_queue_sync);
        for (int i = 0; i < G.nqueues; i++)
            if (G.queues[i] == q)
                G.queues[i] = G.queues[--G.nqueues];
        free(q);
    }
    pthread_mutex_unlock(&G.mu);
    if (!mine)
        G.cvt->queue_destroy(state, queue);
}

static fg_status late_queue_sync(void *state, void *queue, fg_error *err)
{
    pthread_mutex_lock(&G.mu);
    if (!late_is_copy_queue(queue)) {
        pthread_mutex_unlock(&G.mu);
        return G.cvt->queue_sync(state, queue, err);
    }
    late_queue *q = queue;
    fg_status st = late_check_sources(err);
    late_complete(q, q->enqueued, &G.done_by_queue_sync);
    pthread_mutex_unlock(&G.mu);
    return st;
}

static fg_status late_copy_fn(void *state, void *queue, void *dst, int dst_device, const void *src,
                           int src_device, size_t bytes, fg_error *err)
{
    pthread_mutex_lock(&G.mu);
    fg_status st = late_check_sources(err);
    if (st != FG_OK || !late_is_copy_queue(queue)) {
        pthread_mutex_unlock(&G.mu);
        return st != FG_OK ? st : G.cvt->copy(state, queue, dst, dst_device, src, src_device,
                                              bytes, err);
    }
    late_queue *q = queue;
    if (src_device != -1 || dst_device != q->device || !late_is_pinned(src, bytes)) {
        memcpy(dst, src, bytes); /* pageable (or device) memory: done before returning */
    } else if (q->count == LATE_MAX_INFLIGHT) {
        st = fg_error_set(err, FG_INTERNAL, "latecopy: %d copies in flight on one queue: "
                          "nothing waits for them", LATE_MAX_INFLIGHT);
    } else if (bytes) {
        late_copy *c = &q->flight[q->count++];
        *c = (late_copy){dst, src, bytes, hash_bytes(src, bytes), ++q->enqueued, 0};
        G.deferred++;
    }
    pthread_mutex_unlock(&G.mu);
    return st;
}

/* ---- events ----------------------------------------------------------------------------- */

static fg_status late_event_create(void *state, int device, void **event, fg_error *err)
{
    (void)state;
    late_event *e = calloc(1, sizeof *e);
    if (!e)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "latecopy: out of memory");
    e->device = device;
    *event = e;
    return FG_OK;
}

static void late_event_destroy(void *state, void *event)
{
    (void)state;
    free(event);
}

static fg_status late_event_record(void *state, void *queue, void *event, fg_error *err)
{
    (void)state;
    late_event *e = event;
    pthread_mutex_lock(&G.mu);
    fg_status st = late_check_sources(err);
    if (late_is_copy_queue(queue)) {
        e->queue = queue;
        e->upto = e->queue->enqueued;
    } else {
        e->queue = NULL; /* the CPU's queues: everything before has completed */
    }
    pthread_mutex_unlock(&G.mu);
    return st;
}

static fg_status late_queue_wait_event(void *state, void *queue, void *event, fg_error *err)
{
    (void)state;
    (void)queue;
    late_event *e = event;
    pthread_mutex_lock(&G.mu);
    fg_status st = late_check_sources(err);
    if (st == FG_OK && e->queue)
        late_apply(e->queue, e->upto);
    pthread_mutex_unlock(&G.mu);
    return st;
}

static fg_status late_event_sync(void *state, void *event, fg_error *err)
{
    (void)state;
    late_event *e = event;
    pthread_mutex_lock(&G.mu);
    fg_status st = late_check_sources(err);
    if (st == FG_OK && e->queue)
        late_complete(e->queue, e->upto, &G.done_by_event_sync);
    pthread_mutex_unlock(&G.mu);
    return st;
}

/* 1 when no copy the event covers is still in flight: they complete only when the host
 * waits, so a caller that asks first still has to wait for them. */
static int late_event_query(void *state, void *event)
{
    (void)state;
    late_event *e = event;
    pthread_mutex_lock(&G.mu);
    int done = 1;
    for (int i = 0; e->queue && i < e->queue->count; i++)
        if (e->queue->flight[i].seq <= e->upto)
            done = 0;
    pthread_mutex_unlock(&G.mu);
    return done;
}

/* ---- the plugin ------------------------------------------------------------------------- */

static const fg_option late_options[] = {
    {"devices", FG_OPT_INT, "1", 1, 64, NULL, "as backend.cpu"},
    {"threads", FG_OPT_INT, "0", 0, 1024, NULL, "as backend.cpu"},
    {"memory_limit_mb", FG_OPT_INT, "0", 0, 1 << 30, NULL, "as backend.cpu"},
};

static fg_status late_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    G.lib = dlopen(LATE_CPU_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    G.cpu = G.lib ? dlsym(G.lib, FG_PLUGIN_ENTRY_NAME) : NULL;
    if (!G.cpu)
        return fg_error_set(err, FG_UNAVAILABLE, "latecopy: cannot load %s: %s",
                            LATE_CPU_PLUGIN, dlerror());
    G.cvt = G.cpu->vtable;
    fg_status st = G.cpu->init(host, state, err);
    if (st != FG_OK)
        return st;
    late_vtable = *G.cvt;
    late_vtable.host_alloc = late_host_alloc;
    late_vtable.host_free = late_host_free;
    late_vtable.queue_destroy = late_queue_destroy;
    late_vtable.queue_sync = late_queue_sync;
    late_vtable.copy = late_copy_fn;
    late_vtable.copy_queue_create = late_copy_queue_create;
    late_vtable.event_create = late_event_create;
    late_vtable.event_destroy = late_event_destroy;
    late_vtable.event_record = late_event_record;
    late_vtable.queue_wait_event = late_queue_wait_event;
    late_vtable.event_sync = late_event_sync;
    late_vtable.event_query = late_event_query;
    late_vtable.host_synchronous = NULL; /* its copies complete late: batches must be copied */
    return FG_OK;
}

static void late_deinit(void *state)
{
    fprintf(stderr, "latecopy: deferred %llu, applied by a queue wait %llu, completed by "
            "event_sync %llu, completed by queue_sync %llu, violations %llu\n", G.deferred,
            G.applied_by_wait, G.done_by_event_sync, G.done_by_queue_sync, G.violations);
    if (G.cpu)
        G.cpu->deinit(state);
}

FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
    FG_PLUGIN_HEADER(FG_KIND_BACKEND, 0),
    .name = "latecopy",
    .version = "1.0.0",
    .description = "test fixture: the CPU backend with copies that complete late",
    FG_PLUGIN_OPTIONS(late_options),
    .init = late_init,
    .deinit = late_deinit,
    .vtable = &late_vtable,
};
