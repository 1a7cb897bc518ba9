/* events.fixture: the latecopy fixture (late_backend.c) can fail a test. Driven through its
 * vtable alone: a copy out of pinned memory on a copy queue does not reach the device until
 * a queue waits for an event recorded after it; the host waiting (event_sync) completes it;
 * and a pinned buffer rewritten before that is refused, naming the buffer. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "fulgur/backend.h"

static int failures;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

enum { N = 256 };

typedef struct rig {
    const fg_backend_vtable *vt;
    void *bs, *compute, *copyq, *ev;
    float *pinned, *dev;
} rig;

static int open_rig(const fg_plugin *p, rig *r)
{
    fg_error err = {FG_OK, ""};
    memset(r, 0, sizeof *r);
    if (p->init(NULL, &r->bs, &err) != FG_OK) {
        fprintf(stderr, "init: %s\n", err.message);
        return 0;
    }
    r->vt = p->vtable;
    const fg_backend_vtable *vt = r->vt;
    int ok = FG_BACKEND_HAS_EVENTS(vt) && vt->copy_queue_create &&
             vt->queue_create(r->bs, 0, &r->compute, &err) == FG_OK &&
             vt->copy_queue_create(r->bs, 0, &r->copyq, &err) == FG_OK &&
             vt->event_create(r->bs, 0, &r->ev, &err) == FG_OK &&
             vt->host_alloc(r->bs, N * sizeof(float), (void **)&r->pinned, &err) == FG_OK &&
             vt->alloc(r->bs, 0, N * sizeof(float), (void **)&r->dev, &err) == FG_OK;
    if (!ok)
        fprintf(stderr, "setting up: %s\n", err.message[0] ? err.message : "entries missing");
    return ok;
}

static void close_rig(const fg_plugin *p, rig *r)
{
    const fg_backend_vtable *vt = r->vt;
    vt->free(r->bs, 0, r->dev);
    vt->event_destroy(r->bs, r->ev);
    vt->queue_destroy(r->bs, r->copyq);
    vt->queue_destroy(r->bs, r->compute);
    vt->host_free(r->bs, r->pinned);
    p->deinit(r->bs);
}

/* Copy, record, let the compute queue wait: the data arrives at the wait, not before. */
static void copy_arrives_late(rig *r)
{
    const fg_backend_vtable *vt = r->vt;
    fg_error err = {FG_OK, ""};
    for (int i = 0; i < N; i++) {
        r->pinned[i] = (float)i;
        r->dev[i] = -1.0f;
    }
    CHECK(vt->copy(r->bs, r->copyq, r->dev, 0, r->pinned, -1, N * sizeof(float), &err) == FG_OK,
          "%s", err.message);
    CHECK(vt->event_record(r->bs, r->copyq, r->ev, &err) == FG_OK, "%s", err.message);
    CHECK(r->dev[N - 1] == -1.0f, "the copy reached the device before anything waited");
    CHECK(vt->queue_wait_event(r->bs, r->compute, r->ev, &err) == FG_OK, "%s", err.message);
    CHECK(r->dev[N - 1] == (float)(N - 1), "the compute queue waited, the data is not there");
    CHECK(vt->event_sync(r->bs, r->ev, &err) == FG_OK, "%s", err.message);
    for (int i = 0; i < N; i++)
        r->pinned[i] = 0.0f; /* completed: the buffer is the caller's again */
    CHECK(vt->event_sync(r->bs, r->ev, &err) == FG_OK, "after completion: %s", err.message);
}

/* The buffer rewritten between the copy and the host's wait: the next call fails. */
static void early_rewrite_caught(rig *r)
{
    const fg_backend_vtable *vt = r->vt;
    fg_error err = {FG_OK, ""};
    for (int i = 0; i < N; i++)
        r->pinned[i] = (float)(2 * i);
    CHECK(vt->copy(r->bs, r->copyq, r->dev, 0, r->pinned, -1, N * sizeof(float), &err) == FG_OK,
          "%s", err.message);
    CHECK(vt->event_record(r->bs, r->copyq, r->ev, &err) == FG_OK, "%s", err.message);
    CHECK(vt->queue_wait_event(r->bs, r->compute, r->ev, &err) == FG_OK, "%s", err.message);
    r->pinned[7] = 1234.0f; /* a loader recycling the slot before event_sync */
    fg_status st = vt->event_sync(r->bs, r->ev, &err);
    CHECK(st == FG_INTERNAL && strstr(err.message, "was rewritten while copy"),
          "a rewrite before completion was not caught: %s: %s", fg_status_name(st), err.message);
}

/* Pageable memory is copied before copy returns: nothing to wait for. */
static void pageable_is_immediate(rig *r)
{
    const fg_backend_vtable *vt = r->vt;
    fg_error err = {FG_OK, ""};
    float host[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)(3 * i);
    CHECK(vt->copy(r->bs, r->copyq, r->dev, 0, host, -1, sizeof host, &err) == FG_OK, "%s",
          err.message);
    CHECK(r->dev[N - 1] == (float)(3 * (N - 1)), "a pageable copy was deferred");
}

int main(void)
{
    void *lib = dlopen(LATE_FIXTURE, RTLD_NOW | RTLD_LOCAL);
    const fg_plugin *p = lib ? dlsym(lib, FG_PLUGIN_ENTRY_NAME) : NULL;
    if (!p) {
        fprintf(stderr, "cannot load %s: %s\n", LATE_FIXTURE, dlerror());
        return 1;
    }
    rig r;
    if (!open_rig(p, &r))
        return 1;
    copy_arrives_late(&r);
    early_rewrite_caught(&r);
    pageable_is_immediate(&r);
    close_rig(p, &r);
    if (failures) {
        fprintf(stderr, "events.fixture: %d check(s) failed\n", failures);
        return 1;
    }
    printf("events.fixture: ok\n");
    return 0;
}
