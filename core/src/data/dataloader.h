/* Data loader: sampler -> worker threads -> staging slots -> in-order prefetch queue.
 *
 * Sits between a data plugin (fulgur/data.h) and the trainer. All staging buffers are
 * allocated once at create (prefetch + num_workers slots, each holding batch_size samples
 * and labels) through the caller's allocator: the backend's pinned host_alloc when
 * pin_memory is on, aligned host memory otherwise. Nothing is allocated per batch.
 *
 * Each slot has a copy fence (copy_fence.h) with id fence_base + slot index: the copies
 * out of a delivered batch (batch_copy.h) link their events into it, and the slot is
 * rewritten only after fg_copy_fence_wait, by the worker about to read into it (or by
 * next() when there are no workers). So a batch can be released as soon as its copies are
 * enqueued: the loader, not the trainer, waits for them, and only when it needs the slot
 * again, `slots` batches later.
 *
 * Slots form a ring: batch b always lands in slot b % slots, workers claim batch numbers
 * in increasing order and the consumer takes them in increasing order, so batches come out
 * strictly in order (b before b + 1) whatever num_workers is, and training is bitwise the
 * same with 0, 1 or 3 workers. A worker only claims batch b once the consumer released
 * batch b - slots, which bounds the look-ahead at `slots` batches.
 *
 * Thread rule: create/start_epoch/next/release/destroy from one thread (the trainer's).
 * The plugin's read() is called from the worker threads concurrently (data.h allows it),
 * or from the caller's thread inside next() when num_workers = 0. */
#ifndef FG_DATALOADER_H
#define FG_DATALOADER_H

#include <stddef.h>
#include <stdint.h>

#include "copy_fence.h"
#include "fulgur/data.h"
#include "fulgur/strategy.h"
#include "sampler.h"

/* Staging allocator: fills *ptr with `bytes` of host memory or fails with a message. */
typedef fg_status (*fg_staging_alloc_fn)(void *ctx, size_t bytes, void **ptr, fg_error *err);
typedef void (*fg_staging_free_fn)(void *ctx, void *ptr);

typedef struct fg_dataloader_options {
    const fg_data_vtable *data; /* the data plugin's vtable (read() is used) */
    void *data_state;           /* the plugin instance */
    void *dataset;              /* from data->open() */
    fg_dataset_info info;       /* from data->open(): sample shape; sample_dtype FG_F32;
                                 * label_dtype FG_I32 or FG_F32, label_elems per sample */
    const char *name;           /* names the loader in messages ("train"); may be NULL */
    int split;                  /* fg_split the batches serve, passed to read() (TRAIN:
                                 * augmented); 0: none */
    /* length = 0 takes info.length; a smaller length uses the first `length` samples
     * (overfit_batches); a larger one fails. */
    fg_sampler_options sampler;
    /* NULL: the sampler's positions are the dataset's indices. Otherwise (val_split) the
     * dataset is read through this table of info.length indices, borrowed for the
     * loader's lifetime: position p reads sample subset[p]. */
    const int64_t *subset;
    int num_workers;            /* 0: read in the calling thread inside next() */
    int prefetch;               /* >= 1: batches ready ahead of the consumer */
    /* NULL alloc: 64-byte aligned malloc'd memory. */
    fg_staging_alloc_fn alloc;
    fg_staging_free_fn free;
    void *alloc_ctx;
    /* The id of slot 0's copy fence; slot i's is fence_base + i. Loaders whose batches
     * reach the same copiers take disjoint ranges (fg_dataloader_slots_for). */
    int fence_base;
    /* i32 labels: ignore_labels set, a label equal to ignore_label becomes FG_IGNORED_LABEL
     * (the loss skips it); any other negative label fails the batch, naming the sample. */
    int ignore_labels;
    int32_t ignore_label;
} fg_dataloader_options;

/* One delivered batch, valid until fg_dataloader_release(). */
typedef struct fg_batch_view {
    float *samples;      /* (count, sample elements) */
    int32_t *labels;     /* (count, info.label_elems) of info.label_dtype (f32 targets are
                          * read through a cast); NULL when label_elems = 0 */
    int count;           /* <= batch_size; the last batch may be short */
    int64_t index;       /* batch number within the epoch */
    int64_t epoch;
    double wait_seconds; /* how long next() blocked for it (the read itself, no workers) */
    struct fg_copy_fence *fence; /* the slot's: copies out of the view link into it */
} fg_batch_view;

typedef struct fg_dataloader fg_dataloader;

/* Validates options (messages name the option and value), allocates every slot, starts
 * the workers. The loader is idle until start_epoch(). */
fg_status fg_dataloader_create(const fg_dataloader_options *opts, fg_dataloader **out,
                               fg_error *err);

/* Begins `epoch` at batch `first_batch` (> 0 resumes inside an epoch; == batches_per_epoch
 * gives an empty epoch). Abandons whatever the previous epoch had in flight: waits for the
 * reads in progress, then reclaims every slot, including views still held (those become
 * invalid; release them before, not after). */
fg_status fg_dataloader_start_epoch(fg_dataloader *dl, int64_t epoch, int64_t first_batch,
                                    fg_error *err);

/* The next batch in order, or *batch = NULL at the end of the epoch. A read error of that
 * batch comes back here, naming the batch, epoch and the dataset's message; the loader
 * then keeps returning it until the next start_epoch(). Holding more than `prefetch` views
 * at once can leave no slot for the next batch: that fails instead of hanging. */
fg_status fg_dataloader_next(fg_dataloader *dl, const fg_batch_view **batch, fg_error *err);

/* Gives the batch's slot back to the workers. Copies out of the view may still be running
 * if they linked their events into view->fence: the slot is rewritten only after they
 * completed. Any other use of the view must be over. NULL is ignored. */
void fg_dataloader_release(fg_dataloader *dl, const fg_batch_view *batch);

/* Stops and joins the workers (a read in progress finishes first), frees every slot. */
void fg_dataloader_destroy(fg_dataloader *dl);

int64_t fg_dataloader_batches_per_epoch(const fg_dataloader *dl);
int64_t fg_dataloader_samples_per_rank(const fg_dataloader *dl);
/* Slots allocated at create: prefetch + num_workers. */
int fg_dataloader_slot_count(const fg_dataloader *dl);
/* The slots (and copy fence ids) a loader with these options will have. */
int fg_dataloader_slots_for(int num_workers, int prefetch);
/* Elements in one sample (the product of info.shape). */
size_t fg_dataloader_sample_elems(const fg_dataloader *dl);
/* The view as the strategy-facing batch, its staging field the slot's copy fence. */
fg_batch fg_dataloader_batch(const fg_dataloader *dl, const fg_batch_view *v);

#endif
