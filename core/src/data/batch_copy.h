/* The batch copier: a batch's samples and labels from host staging memory to a device,
 * fenced so that the staging buffer is rewritten only after the copy completed, and
 * overlapping compute where the backend has a copy queue.
 *
 * One copier per compute queue that reads batches (a replica, a pipeline stage). It owns
 * the device buffers the batches land in, `areas` of them (a replica: 1; a stage: one per
 * micro-batch in flight), each of sample_bytes + label_bytes. Everything is created at
 * setup: with a backend that has events, one event per fence id (copy_fence.h; the
 * loaders' staging slots) and one for batches without a fence; with a copy queue too, the
 * queue, a second buffer per area and an event per buffer saying when the compute queue
 * has finished reading it.
 *
 * A step then, with a copy queue: the copy queue waits (on the device) until the compute
 * queue has finished with the buffer the copy goes to, copies, records the slot's event and
 * links it into the slot's fence; the compute queue waits for that event; the loader waits
 * for it on the host before it rewrites the slot. Two buffers per area let the next batch's
 * copy run while the compute queue still reads this one. Without a copy queue the copy runs
 * on the compute queue, in order, and only the host side is fenced. Without events (a
 * synchronous backend) the copy has completed when it returns. Nothing is allocated and
 * nothing waited for on the host in a step.
 *
 * A backend that computes on host memory in the calling thread (`host_synchronous`, ABI
 * 1.3: the CPU backend) gets no copy at all: upload hands over the staging pointers, the
 * copier holds no device buffers, and no fence is needed, since every op reading the batch
 * has completed when the strategy's step returns and the loader's slot is released after
 * that.
 *
 * Thread rule: one thread at a time per copier (its compute queue's). */
#ifndef FG_BATCH_COPY_H
#define FG_BATCH_COPY_H

#include <stddef.h>

#include "fulgur/backend.h"
#include "fulgur/strategy.h"

typedef struct fg_batch_copier_options {
    const fg_backend_vtable *be;
    void *bs;
    int device;
    void *compute_queue; /* borrowed: the queue whose work reads the batches */
    int fence_count;     /* fence ids 0 .. fence_count - 1 get an event each */
    int areas;           /* >= 1 */
    size_t sample_bytes; /* per area; 0: samples are not copied */
    size_t label_bytes;  /* per area; 0: labels are not copied */
} fg_batch_copier_options;

typedef struct fg_batch_copier fg_batch_copier;

fg_status fg_batch_copier_create(const fg_batch_copier_options *o, fg_batch_copier **out,
                                 fg_error *err);
/* The caller has synchronised the compute queue (nothing reads the buffers any more). NULL
 * is ignored. */
void fg_batch_copier_destroy(fg_batch_copier *c);

/* Copies the batch's count samples (count * sample_elems floats, when the copier takes
 * samples) and count labels (when it takes labels) into area `area`'s next buffer; *x and
 * *y point at them (NULL for a part not taken). Work enqueued on the compute queue after
 * this call reads the copies. A batch without a staging fence (b->staging NULL, or an
 * older struct) has been copied when this returns. */
fg_status fg_batch_copier_upload(fg_batch_copier *c, int area, const fg_batch *b, float **x,
                                 int32_t **y, fg_error *err);

/* Everything that reads area's current buffer is enqueued on the compute queue: the next
 * copy into that buffer may start once the compute queue gets here. Without it, that copy
 * waits for all the compute work enqueued before it (correct, but not overlapped). */
fg_status fg_batch_copier_done(fg_batch_copier *c, int area, fg_error *err);

/* Device bytes of the copier's buffers (for the memory report). */
size_t fg_batch_copier_device_bytes(const fg_batch_copier *c);

#endif
