/* A ring of page-locked host slots for small values copied to the device every step (the
 * per-step values of a CUDA graph replay): a copy out of pageable memory may make the host
 * wait for the stream (the driver stages it), a copy out of page-locked memory does not.
 * A slot is rewritten only after the copy that last read it completed: each copy records
 * the slot's event, and taking the slot again asks event_query first, waiting with
 * event_sync only when the host ran a whole ring ahead of the device. */
#ifndef FG_PINNED_RING_H
#define FG_PINNED_RING_H

#include <stddef.h>

#include "fulgur/backend.h"

#define FG_PINNED_RING_SLOTS 4

typedef struct fg_pinned_ring {
    const fg_backend_vtable *be;
    void *bs;
    char *host;                          /* SLOTS * slot_bytes, from host_alloc */
    void *events[FG_PINNED_RING_SLOTS];  /* recorded after each copy out of the slot */
    size_t slot_bytes;
    int next;                            /* the slot fg_pinned_ring_take gives next */
} fg_pinned_ring;

/* Slots of slot_bytes page-locked bytes and an event each, on `device`. Fails naming what
 * the backend lacks (host_alloc/host_free, the events). A zeroed ring is "none". */
fg_status fg_pinned_ring_init(fg_pinned_ring *r, const fg_backend_vtable *be, void *bs,
                              int device, size_t slot_bytes, fg_error *err);
/* The next slot, free to write: the copy that last read it has completed. */
fg_status fg_pinned_ring_take(fg_pinned_ring *r, void **slot, fg_error *err);
/* After the copy out of the slot just taken was enqueued on `queue`. */
fg_status fg_pinned_ring_copied(fg_pinned_ring *r, void *queue, fg_error *err);
/* Frees the slots and events (the caller synchronised the queues that read them). */
void fg_pinned_ring_fini(fg_pinned_ring *r);

#endif
