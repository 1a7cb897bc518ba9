/* The page-locked ring of a CUDA graph's per-step values (core/src/train/pinned_ring.c)
 * against a fake backend whose "device" completes copies when the test says: the 4 slots
 * are taken in turn from one host_alloc block, a slot whose copy completed is reused
 * without a host wait (event_query first), one whose copy is still pending is waited for
 * with event_sync before it is handed out again, and a backend without page-locked memory
 * or events is refused naming what it lacks. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pinned_ring.h"

typedef struct fake_event {
    int pending; /* recorded, its copy not yet completed */
} fake_event;

static struct {
    int host_allocs, host_frees, events, syncs, queries, records, destroyed;
    size_t bytes;
    int device_stalls; /* copies recorded now stay pending */
} g;

static fg_status fake_host_alloc(void *st, size_t bytes, void **p, fg_error *err)
{
    (void)st, (void)err;
    g.host_allocs++;
    g.bytes = bytes;
    *p = malloc(bytes);
    return *p ? FG_OK : FG_OUT_OF_MEMORY;
}

static void fake_host_free(void *st, void *p)
{
    (void)st;
    g.host_frees++;
    free(p);
}

static fg_status fake_event_create(void *st, int device, void **ev, fg_error *err)
{
    (void)st, (void)device, (void)err;
    g.events++;
    *ev = calloc(1, sizeof(fake_event));
    return *ev ? FG_OK : FG_OUT_OF_MEMORY;
}

static void fake_event_destroy(void *st, void *ev)
{
    (void)st;
    g.destroyed++;
    free(ev);
}

static fg_status fake_event_record(void *st, void *q, void *ev, fg_error *err)
{
    (void)st, (void)q, (void)err;
    g.records++;
    ((fake_event *)ev)->pending = g.device_stalls;
    return FG_OK;
}

static fg_status fake_wait_event(void *st, void *q, void *ev, fg_error *err)
{
    (void)st, (void)q, (void)ev, (void)err;
    return FG_OK;
}

static fg_status fake_event_sync(void *st, void *ev, fg_error *err)
{
    (void)st, (void)err;
    g.syncs++;
    ((fake_event *)ev)->pending = 0; /* the host waited until the copy completed */
    return FG_OK;
}

static int fake_event_query(void *st, void *ev)
{
    (void)st;
    g.queries++;
    return !((fake_event *)ev)->pending;
}

static fg_backend_vtable fake_backend(void)
{
    fg_backend_vtable be;
    memset(&be, 0, sizeof be);
    be.struct_size = sizeof be;
    be.host_alloc = fake_host_alloc;
    be.host_free = fake_host_free;
    be.event_create = fake_event_create;
    be.event_destroy = fake_event_destroy;
    be.event_record = fake_event_record;
    be.queue_wait_event = fake_wait_event;
    be.event_sync = fake_event_sync;
    be.event_query = fake_event_query;
    return be;
}

/* Takes the next slot, writes a value, "copies" it (records the slot's event). */
static char *step(fg_pinned_ring *r, float v)
{
    fg_error err = {0};
    void *slot = NULL;
    CHECK(fg_pinned_ring_take(r, &slot, &err) == FG_OK, "take: %s", err.message);
    if (slot) *(float *)slot = v;
    CHECK(fg_pinned_ring_copied(r, (void *)1, &err) == FG_OK, "copied: %s", err.message);
    return slot;
}

static void test_cycle_and_fence(void)
{
    memset(&g, 0, sizeof g);
    fg_backend_vtable be = fake_backend();
    fg_pinned_ring r;
    fg_error err = {0};
    CHECK(fg_pinned_ring_init(&r, &be, NULL, 0, 3 * sizeof(float), &err) == FG_OK, "init: %s",
          err.message);
    CHECK_EQ(g.host_allocs, 1);
    CHECK_EQ(g.bytes, FG_PINNED_RING_SLOTS * 3 * sizeof(float));
    CHECK_EQ(g.events, FG_PINNED_RING_SLOTS);
    char *slots[2 * FG_PINNED_RING_SLOTS];
    /* copies complete at once: a whole ring and more without a host wait */
    for (int i = 0; i < 2 * FG_PINNED_RING_SLOTS; i++) slots[i] = step(&r, (float)i);
    CHECK_EQ(g.syncs, 0);
    for (int i = 0; i < FG_PINNED_RING_SLOTS; i++) {
        CHECK(slots[i] == r.host + (size_t)i * 3 * sizeof(float), "slot %d not in turn", i);
        CHECK(slots[i + FG_PINNED_RING_SLOTS] == slots[i], "slot %d not reused", i);
    }
    /* the device stalls: the next ring's slots are handed out while their copies run, the
     * one after must wait for the copy that read it, once per slot */
    g.device_stalls = 1;
    for (int i = 0; i < FG_PINNED_RING_SLOTS; i++) step(&r, 1.0f);
    CHECK_EQ(g.syncs, 0);
    char *again = step(&r, 2.0f);
    CHECK_EQ(g.syncs, 1);
    CHECK(again == slots[0], "the waited slot is not the oldest");
    g.device_stalls = 0;
    fg_pinned_ring_fini(&r);
    CHECK_EQ(g.host_frees, 1);
    CHECK_EQ(g.destroyed, FG_PINNED_RING_SLOTS);
    fg_pinned_ring_fini(&r); /* twice, or on a zeroed ring: nothing */
    CHECK_EQ(g.host_frees, 1);
}

static void test_refusal(void)
{
    memset(&g, 0, sizeof g);
    fg_backend_vtable be = fake_backend();
    be.host_alloc = NULL;
    fg_pinned_ring r;
    fg_error err = {0};
    CHECK(fg_pinned_ring_init(&r, &be, NULL, 0, 12, &err) == FG_UNAVAILABLE);
    CHECK(strstr(err.message, "host_alloc") != NULL, "message: %s", err.message);
    be = fake_backend();
    be.event_sync = NULL;
    CHECK(fg_pinned_ring_init(&r, &be, NULL, 0, 12, &err) == FG_UNAVAILABLE);
    CHECK(strstr(err.message, "event") != NULL, "message: %s", err.message);
    CHECK_EQ(g.host_allocs, 0);
}

int main(void)
{
    test_cycle_and_fence();
    test_refusal();
    return fg_test_report("pinned_ring");
}
