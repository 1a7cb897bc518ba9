/* Copy fences: what keeps a staging buffer from being rewritten while a copy out of it is
 * still running on a device.
 *
 * Each staging slot of a loader has a fence. Whoever copies out of the slot (a replica's
 * batch copier) records an event of the backend after its copy and adds its link (that
 * event) to the slot's fence; the loader calls fg_copy_fence_wait before it rewrites the
 * slot, which waits for every linked event on the host and empties the fence. A link is
 * owned by its copier (one per fence id, its event created once at setup), so adding one
 * allocates nothing and a copier copying twice out of the same slot adds its link once
 * (its event's last record covers both copies: they run in order on its queue).
 *
 * Thread rule: add, wait and unlink may run on different threads (dp's replica threads
 * add to the same fence; a loader worker waits); a fence's mutex orders them. A link is
 * waited for at most once per add. fini and the unlink of a copier going away must not run
 * at the same time (both come from the trainer's thread at teardown). */
#ifndef FG_COPY_FENCE_H
#define FG_COPY_FENCE_H

#include <pthread.h>
#include <stdatomic.h>

#include "fulgur/backend.h"

struct fg_copy_fence;

typedef struct fg_copy_fence_link {
    const fg_backend_vtable *be;
    void *bs;
    void *event;                              /* the copier's, recorded after its copy */
    _Atomic(struct fg_copy_fence *) fence;    /* where it is linked; NULL: nowhere */
    struct fg_copy_fence_link *next;
} fg_copy_fence_link;

typedef struct fg_copy_fence {
    pthread_mutex_t mu;
    int id;                                   /* a copier's link index for this fence */
    fg_copy_fence_link *head;                 /* guarded by mu */
    int ready;                                /* mu initialised */
} fg_copy_fence;

fg_status fg_copy_fence_init(fg_copy_fence *f, int id, fg_error *err);
/* Detaches whatever is still linked (without waiting: the copies' owners synchronise
 * their queues when they go away). */
void fg_copy_fence_fini(fg_copy_fence *f);

/* Links l (whose event was just recorded after a copy out of f's memory) unless it is
 * linked there already; out of another fence first. */
void fg_copy_fence_add(fg_copy_fence *f, fg_copy_fence_link *l);

/* Waits on the host for every linked event, then empties the fence: the memory is free to
 * rewrite. A failed wait returns the backend's error and keeps the links not yet waited. */
fg_status fg_copy_fence_wait(fg_copy_fence *f, fg_error *err);

/* Takes l out of whatever fence holds it (its copier goes away). */
void fg_copy_fence_unlink(fg_copy_fence_link *l);

#endif
