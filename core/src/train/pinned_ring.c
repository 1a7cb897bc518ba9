/* A ring of page-locked host slots whose reuse waits for the copy that read them
 * (pinned_ring.h). */
#include <string.h>

#include "pinned_ring.h"

fg_status fg_pinned_ring_init(fg_pinned_ring *r, const fg_backend_vtable *be, void *bs,
                              int device, size_t slot_bytes, fg_error *err)
{
    memset(r, 0, sizeof *r);
    if (!be->host_alloc || !be->host_free || !FG_BACKEND_HAS_EVENTS(be))
        return fg_error_set(err, FG_UNAVAILABLE, "the backend has no page-locked host memory "
                            "or events (host_alloc, host_free, event_*) for the values copied "
                            "before each step");
    r->be = be;
    r->bs = bs;
    r->slot_bytes = slot_bytes;
    fg_status st = be->host_alloc(bs, slot_bytes * FG_PINNED_RING_SLOTS, (void **)&r->host, err);
    for (int i = 0; st == FG_OK && i < FG_PINNED_RING_SLOTS; i++)
        st = be->event_create(bs, device, &r->events[i], err);
    if (st != FG_OK) fg_pinned_ring_fini(r);
    return st;
}

fg_status fg_pinned_ring_take(fg_pinned_ring *r, void **slot, fg_error *err)
{
    void *ev = r->events[r->next];
    /* an event never recorded is complete; one recorded a ring ago almost always is */
    int done = r->be->event_query ? r->be->event_query(r->bs, ev) : 0;
    fg_status st = done ? FG_OK : r->be->event_sync(r->bs, ev, err);
    *slot = st == FG_OK ? r->host + (size_t)r->next * r->slot_bytes : NULL;
    return st;
}

fg_status fg_pinned_ring_copied(fg_pinned_ring *r, void *queue, fg_error *err)
{
    fg_status st = r->be->event_record(r->bs, queue, r->events[r->next], err);
    r->next = (r->next + 1) % FG_PINNED_RING_SLOTS;
    return st;
}

void fg_pinned_ring_fini(fg_pinned_ring *r)
{
    if (!r->be) return;
    for (int i = 0; i < FG_PINNED_RING_SLOTS; i++)
        if (r->events[i]) r->be->event_destroy(r->bs, r->events[i]);
    if (r->host) r->be->host_free(r->bs, r->host);
    memset(r, 0, sizeof *r);
}
