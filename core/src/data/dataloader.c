/* Data loader: persistent worker threads fill a ring of staging slots in batch order.
 * See dataloader.h for the contract; the invariants that make it work:
 *   - batch b only ever lives in slot b % slot_count;
 *   - workers claim batch numbers in increasing order (next_claim), under the mutex, and
 *     only when that slot is FREE (its previous batch was released);
 *   - the consumer takes batches in increasing order (next_deliver) and waits on READY;
 *   - a slot's buffers are touched outside the mutex only by the one thread that owns it
 *     (FILLING: its worker; HELD: the consumer), so the mutex orders every hand-over;
 *   - a slot is rewritten only after its copy fence was waited for (fg_fill_slot): device
 *     copies of its previous batch may outlive the release.
 * No sleeps, no polling: workers wait on work_cv, the consumer on ready_cv, start_epoch on
 * idle_cv (no read in progress). */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "dataloader.h"
#include "core_util.h"

#include "fulgur/backend.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FG_STAGING_ALIGN 64

enum fg_slot_state {
    FG_SLOT_FREE = 0, /* may be claimed by a worker */
    FG_SLOT_FILLING,  /* a worker is reading into it */
    FG_SLOT_READY,    /* filled, waiting for the consumer */
    FG_SLOT_FAILED,   /* the read failed; `error` says why */
    FG_SLOT_HELD      /* handed to the consumer, not yet released */
};

typedef struct fg_slot {
    fg_batch_view view; /* first member: release() finds the slot from the view */
    int state;
    void *block;        /* the staging allocation: samples, then labels */
    fg_error error;
    fg_copy_fence fence; /* copies out of the slot still running on a device */
} fg_slot;

typedef struct fg_worker {
    struct fg_dataloader *dl;
    int64_t *indices; /* (batch_size) */
} fg_worker;

struct fg_dataloader {
    fg_dataloader_options opts;
    char name[64];
    fg_sampler *sampler;
    size_t sample_elems;
    int slot_count;
    fg_slot *slots;        /* (slot_count) */
    int worker_count;
    fg_worker *workers;    /* (worker_count) */
    pthread_t *threads;    /* (worker_count) */
    int64_t *indices;      /* (worker_count + 1, batch_size); the last row for next() */

    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* a slot was freed, an epoch started, or shutdown */
    pthread_cond_t ready_cv; /* a slot became READY or FAILED */
    pthread_cond_t idle_cv;  /* busy dropped to 0 */
    int sync_ready;          /* mutex and condition variables initialised */
    /* Guarded by mu: */
    int shutdown;
    int active;              /* an epoch was started */
    int stop_claiming;       /* a read failed or the epoch is being torn down */
    int busy;                /* workers inside a read */
    int64_t epoch;
    int64_t next_claim;
    int64_t next_deliver;
    int64_t end;
};

static size_t fg_align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

static fg_slot *fg_slot_of(fg_dataloader *dl, int64_t batch)
{
    return &dl->slots[batch % dl->slot_count];
}

/* ---- the default staging allocator -------------------------------------------------- */

static fg_status fg_default_alloc(void *ctx, size_t bytes, void **ptr, fg_error *err)
{
    (void)ctx;
    if (posix_memalign(ptr, FG_STAGING_ALIGN, bytes ? bytes : 1) != 0) {
        *ptr = NULL;
        return fg_error_set(err, FG_OUT_OF_MEMORY,
                            "data loader: out of memory for a %zu-byte staging buffer", bytes);
    }
    return FG_OK;
}

static void fg_default_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

/* ---- reading one batch (a worker, or next() when there are none) --------------------- */

/* Reads batch b of `epoch` into the slot using `indices` (batch_size entries). On failure
 * the message names the loader, batch, epoch, rank and carries the dataset's message. */

/* i32 labels as the loss reads them: [model] ignore_index's value becomes
 * FG_IGNORED_LABEL; another negative label is the data's error, caught here with its
 * sample rather than ignored by the loss. */
static fg_status fg_mark_ignored_labels(const fg_dataloader *dl, const int64_t *indices,
                                        int count, int32_t *labels, fg_error *err)
{
    const fg_dataset_info *info = &dl->opts.info;
    if (!labels || info->label_dtype != FG_I32)
        return FG_OK;
    int per = info->label_elems > 0 ? info->label_elems : 1;
    for (int64_t i = 0; i < (int64_t)count * per; i++) {
        if (dl->opts.ignore_labels && labels[i] == dl->opts.ignore_label)
            labels[i] = FG_IGNORED_LABEL;
        else if (labels[i] < 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "sample %" PRId64 " has label %d "
                                "(position %" PRId64 "); a negative label is an error unless "
                                "[model] ignore_index names it", indices[i / per], labels[i],
                                i % per);
    }
    return FG_OK;
}

static fg_status fg_fill_slot(fg_dataloader *dl, fg_slot *slot, int64_t epoch, int64_t b,
                              int64_t *indices, fg_error *err)
{
    fg_error inner = {FG_OK, ""};
    int count = 0;
    /* The slot's last batch may still be copied out of: wait before rewriting it. */
    fg_status st = fg_copy_fence_wait(&slot->fence, &inner);
    if (st != FG_OK)
        return fg_error_set(err, st,
                            "data loader '%s': batch %" PRId64 " of epoch %" PRId64
                            ": waiting for the device copy out of its staging buffer "
                            "failed: %s",
                            dl->name, b, epoch,
                            inner.message[0] ? inner.message : fg_status_name(st));
    st = fg_sampler_batch(dl->sampler, epoch, b, indices, &count, &inner);
    if (st == FG_OK && dl->opts.subset)
        for (int i = 0; i < count; i++)
            indices[i] = dl->opts.subset[indices[i]];
    fg_data_read_args args = {sizeof args, dl->opts.split, dl->opts.sampler.seed, epoch};
    if (st == FG_OK)
        st = dl->opts.data->read(dl->opts.data_state, dl->opts.dataset, &args, indices, count,
                                 slot->view.samples, slot->view.labels, &inner);
    if (st == FG_OK)
        st = fg_mark_ignored_labels(dl, indices, count, slot->view.labels, &inner);
    if (st != FG_OK)
        return fg_error_set(err, st,
                            "data loader '%s': reading batch %" PRId64 " of epoch %" PRId64
                            " (rank %d) failed: %s",
                            dl->name, b, epoch, dl->opts.sampler.rank,
                            inner.message[0] ? inner.message : fg_status_name(st));
    slot->view.count = count;
    slot->view.index = b;
    slot->view.epoch = epoch;
    return FG_OK;
}

/* ---- workers ------------------------------------------------------------------------- */

/* Called with mu held. */
static int fg_can_claim(fg_dataloader *dl)
{
    return dl->active && !dl->stop_claiming && dl->next_claim < dl->end &&
           fg_slot_of(dl, dl->next_claim)->state == FG_SLOT_FREE;
}

static void *fg_worker_main(void *arg)
{
    fg_worker *w = arg;
    fg_dataloader *dl = w->dl;
    pthread_mutex_lock(&dl->mu);
    for (;;) {
        while (!dl->shutdown && !fg_can_claim(dl))
            pthread_cond_wait(&dl->work_cv, &dl->mu);
        if (dl->shutdown)
            break;
        int64_t b = dl->next_claim++;
        int64_t epoch = dl->epoch;
        fg_slot *slot = fg_slot_of(dl, b);
        slot->state = FG_SLOT_FILLING;
        dl->busy++;
        pthread_mutex_unlock(&dl->mu);

        fg_error err = {FG_OK, ""};
        fg_status st = fg_fill_slot(dl, slot, epoch, b, w->indices, &err);

        pthread_mutex_lock(&dl->mu);
        if (st == FG_OK) {
            slot->state = FG_SLOT_READY;
        } else {
            slot->error = err;
            slot->state = FG_SLOT_FAILED;
            dl->stop_claiming = 1; /* batches after a failure would never be delivered */
        }
        if (--dl->busy == 0)
            pthread_cond_broadcast(&dl->idle_cv);
        pthread_cond_broadcast(&dl->ready_cv);
    }
    pthread_mutex_unlock(&dl->mu);
    return NULL;
}

/* ---- create / destroy ---------------------------------------------------------------- */

static fg_status fg_check_options(const fg_dataloader_options *o, const char *name,
                                  fg_error *err)
{
    const fg_dataset_info *info = &o->info;
    if (!o->data || !FG_HAS_FIELD(o->data, fg_data_vtable, read) || !o->data->read)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': the data plugin has no read()", name);
    if (o->num_workers < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': num_workers = %d, must be >= 0", name,
                            o->num_workers);
    if (o->prefetch < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': prefetch = %d, must be >= 1", name, o->prefetch);
    if (info->length < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': the dataset has %" PRId64 " samples", name,
                            info->length);
    if (o->sampler.length < 0 || o->sampler.length > info->length)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': sampler length = %" PRId64
                            " but the dataset has %" PRId64 " samples",
                            name, o->sampler.length, info->length);
    if (info->sample_dtype != FG_F32 && info->sample_dtype != FG_I32)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': sample dtype %s is not supported (f32 values or "
                            "i32 token ids)",
                            name, fg_dtype_name((fg_dtype)info->sample_dtype));
    if (info->rank < 1 || info->rank > FG_MAX_DIMS)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': sample rank %d, must be in [1, %d]", name,
                            info->rank, FG_MAX_DIMS);
    if (info->num_classes < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': num_classes = %d, must be >= 0", name,
                            info->num_classes);
    if (info->label_elems < 0 || info->label_elems > 1 << 20 ||
        (info->label_elems > 0 && info->label_dtype != FG_I32 && info->label_dtype != FG_F32))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': labels of %d x %s per sample are not supported "
                            "(i32 classes or f32 targets, at most 2^20 per sample)",
                            name, info->label_elems, fg_dtype_name((fg_dtype)info->label_dtype));
    return FG_OK;
}

/* Elements of one sample, checked so that a whole batch fits in size_t. */
static fg_status fg_sample_elems(const fg_dataloader_options *o, const char *name,
                                 size_t *out, fg_error *err)
{
    size_t elems = 1;
    size_t limit = SIZE_MAX / 2 / sizeof(float) / (size_t)(o->sampler.batch_size > 0
                                                               ? o->sampler.batch_size : 1);
    for (int d = 0; d < o->info.rank; d++) {
        int64_t dim = o->info.shape[d];
        if (dim < 1 || (uint64_t)dim > limit / elems)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "data loader '%s': sample shape[%d] = %" PRId64
                                " is not a usable size",
                                name, d, dim);
        elems *= (size_t)dim;
    }
    *out = elems;
    return FG_OK;
}

static fg_status fg_alloc_slots(fg_dataloader *dl, fg_error *err)
{
    size_t batch = (size_t)dl->opts.sampler.batch_size;
    size_t sample_bytes = fg_align_up(batch * dl->sample_elems * sizeof(float), FG_STAGING_ALIGN);
    /* i32 classes and f32 targets are both 4 bytes; the view's pointer is typed for the former */
    size_t label_bytes = batch * (size_t)dl->opts.info.label_elems * sizeof(int32_t);
    dl->slots = calloc((size_t)dl->slot_count, sizeof *dl->slots);
    if (!dl->slots)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "data loader '%s': out of memory", dl->name);
    for (int i = 0; i < dl->slot_count; i++) {
        fg_slot *slot = &dl->slots[i];
        fg_status st = fg_copy_fence_init(&slot->fence, dl->opts.fence_base + i, err);
        if (st == FG_OK)
            st = dl->opts.alloc(dl->opts.alloc_ctx, sample_bytes + label_bytes, &slot->block,
                                err);
        if (st != FG_OK) {
            slot->block = NULL;
            return st;
        }
        slot->view.fence = &slot->fence;
        slot->view.samples = slot->block;
        slot->view.labels = label_bytes ? (int32_t *)((char *)slot->block + sample_bytes) : NULL;
    }
    return FG_OK;
}

static fg_status fg_start_workers(fg_dataloader *dl, fg_error *err)
{
    int n = dl->opts.num_workers;
    if (n == 0)
        return FG_OK;
    dl->workers = calloc((size_t)n, sizeof *dl->workers);
    dl->threads = calloc((size_t)n, sizeof *dl->threads);
    if (!dl->workers || !dl->threads)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "data loader '%s': out of memory", dl->name);
    for (int i = 0; i < n; i++) {
        dl->workers[i].dl = dl;
        dl->workers[i].indices = dl->indices + (size_t)i * (size_t)dl->opts.sampler.batch_size;
        int rc = pthread_create(&dl->threads[i], NULL, fg_worker_main, &dl->workers[i]);
        if (rc != 0)
            return fg_error_set(err, FG_INTERNAL,
                                "data loader '%s': starting worker %d of %d failed: %s",
                                dl->name, i, n, strerror(rc));
        dl->worker_count = i + 1; /* destroy joins exactly the threads that exist */
    }
    return FG_OK;
}

static fg_status fg_init_sync(fg_dataloader *dl, fg_error *err)
{
    if (pthread_mutex_init(&dl->mu, NULL) != 0)
        return fg_error_set(err, FG_INTERNAL, "data loader '%s': pthread_mutex_init failed",
                            dl->name);
    if (pthread_cond_init(&dl->work_cv, NULL) != 0) {
        pthread_mutex_destroy(&dl->mu);
        goto fail;
    }
    if (pthread_cond_init(&dl->ready_cv, NULL) != 0) {
        pthread_cond_destroy(&dl->work_cv);
        pthread_mutex_destroy(&dl->mu);
        goto fail;
    }
    if (pthread_cond_init(&dl->idle_cv, NULL) != 0) {
        pthread_cond_destroy(&dl->ready_cv);
        pthread_cond_destroy(&dl->work_cv);
        pthread_mutex_destroy(&dl->mu);
        goto fail;
    }
    dl->sync_ready = 1;
    return FG_OK;
fail:
    return fg_error_set(err, FG_INTERNAL, "data loader '%s': pthread_cond_init failed",
                        dl->name);
}

fg_status fg_dataloader_create(const fg_dataloader_options *opts, fg_dataloader **out,
                               fg_error *err)
{
    *out = NULL;
    const char *name = opts->name && opts->name[0] ? opts->name : "data";
    fg_status st = fg_check_options(opts, name, err);
    if (st != FG_OK)
        return st;
    size_t elems = 0;
    if ((st = fg_sample_elems(opts, name, &elems, err)) != FG_OK)
        return st;

    fg_dataloader *dl = calloc(1, sizeof *dl);
    if (!dl)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "data loader '%s': out of memory", name);
    dl->opts = *opts;
    snprintf(dl->name, sizeof dl->name, "%s", name);
    dl->opts.name = dl->name;
    if (!dl->opts.alloc) {
        dl->opts.alloc = fg_default_alloc;
        dl->opts.free = fg_default_free;
    }
    if (dl->opts.sampler.length == 0)
        dl->opts.sampler.length = opts->info.length;
    dl->sample_elems = elems;
    dl->slot_count = fg_dataloader_slots_for(opts->num_workers, opts->prefetch);

    if ((st = fg_init_sync(dl, err)) != FG_OK) {
        free(dl);
        return st;
    }
    if ((st = fg_sampler_create(&dl->opts.sampler, &dl->sampler, err)) != FG_OK)
        goto fail;
    dl->indices = malloc(((size_t)opts->num_workers + 1) * (size_t)opts->sampler.batch_size *
                         sizeof(int64_t));
    if (!dl->indices) {
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "data loader '%s': out of memory", name);
        goto fail;
    }
    if ((st = fg_alloc_slots(dl, err)) != FG_OK)
        goto fail;
    if ((st = fg_start_workers(dl, err)) != FG_OK)
        goto fail;
    *out = dl;
    return FG_OK;
fail:
    fg_dataloader_destroy(dl);
    return st;
}

void fg_dataloader_destroy(fg_dataloader *dl)
{
    if (!dl)
        return;
    if (dl->sync_ready) {
        pthread_mutex_lock(&dl->mu);
        dl->shutdown = 1;
        pthread_cond_broadcast(&dl->work_cv);
        pthread_mutex_unlock(&dl->mu);
        for (int i = 0; i < dl->worker_count; i++)
            pthread_join(dl->threads[i], NULL);
        pthread_cond_destroy(&dl->idle_cv);
        pthread_cond_destroy(&dl->ready_cv);
        pthread_cond_destroy(&dl->work_cv);
        pthread_mutex_destroy(&dl->mu);
    }
    if (dl->slots) {
        for (int i = 0; i < dl->slot_count; i++) {
            fg_copy_fence_fini(&dl->slots[i].fence);
            if (dl->slots[i].block)
                dl->opts.free(dl->opts.alloc_ctx, dl->slots[i].block);
        }
        free(dl->slots);
    }
    free(dl->threads);
    free(dl->workers);
    free(dl->indices);
    fg_sampler_destroy(dl->sampler);
    free(dl);
}

/* ---- the consumer side --------------------------------------------------------------- */

fg_status fg_dataloader_start_epoch(fg_dataloader *dl, int64_t epoch, int64_t first_batch,
                                    fg_error *err)
{
    int64_t batches = fg_sampler_batches_per_epoch(dl->sampler);
    if (epoch < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': epoch %" PRId64 ", must be >= 0", dl->name, epoch);
    if (first_batch < 0 || first_batch > batches)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': first batch %" PRId64 " of epoch %" PRId64
                            " is outside [0, %" PRId64 "]",
                            dl->name, first_batch, epoch, batches);
    pthread_mutex_lock(&dl->mu);
    /* Quiesce: no new claims, and wait for the reads in progress (their slots and the
     * sampler's permutation are in use until then). */
    dl->stop_claiming = 1;
    while (dl->busy > 0)
        pthread_cond_wait(&dl->idle_cv, &dl->mu);
    for (int i = 0; i < dl->slot_count; i++)
        dl->slots[i].state = FG_SLOT_FREE;
    fg_sampler_set_epoch(dl->sampler, epoch);
    dl->epoch = epoch;
    dl->next_claim = first_batch;
    dl->next_deliver = first_batch;
    dl->end = batches;
    dl->active = 1;
    dl->stop_claiming = 0;
    pthread_cond_broadcast(&dl->work_cv);
    pthread_mutex_unlock(&dl->mu);
    return FG_OK;
}

static fg_status fg_slot_held_error(fg_dataloader *dl, fg_error *err)
{
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "data loader '%s': batch %" PRId64 " needs the slot that batch %" PRId64
                        " still holds; release batches (at most %d may be held at once)",
                        dl->name, dl->next_deliver, dl->next_deliver - dl->slot_count,
                        dl->opts.prefetch);
}

/* num_workers = 0: the read happens here, in the caller's thread. */
static fg_status fg_next_inline(fg_dataloader *dl, fg_slot *slot, const fg_batch_view **batch,
                                fg_error *err)
{
    if (slot->state == FG_SLOT_HELD)
        return fg_slot_held_error(dl, err);
    if (slot->state == FG_SLOT_FAILED) {
        *err = slot->error;
        return slot->error.status;
    }
    double t0 = fg_now_seconds();
    int64_t *indices = dl->indices; /* row 0: there are no workers */
    fg_status st = fg_fill_slot(dl, slot, dl->epoch, dl->next_deliver, indices, &slot->error);
    if (st != FG_OK) {
        slot->state = FG_SLOT_FAILED;
        *err = slot->error;
        return st;
    }
    slot->state = FG_SLOT_HELD;
    slot->view.wait_seconds = fg_now_seconds() - t0;
    dl->next_deliver++;
    *batch = &slot->view;
    return FG_OK;
}

fg_status fg_dataloader_next(fg_dataloader *dl, const fg_batch_view **batch, fg_error *err)
{
    *batch = NULL;
    /* active, epoch, next_deliver and end are written only by this (the consumer's)
     * thread, so reading them here without the mutex is safe. */
    if (!dl->active)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "data loader '%s': next() before start_epoch()", dl->name);
    if (dl->next_deliver >= dl->end)
        return FG_OK;
    fg_slot *slot = fg_slot_of(dl, dl->next_deliver);
    if (dl->worker_count == 0)
        return fg_next_inline(dl, slot, batch, err);

    double t0 = fg_now_seconds();
    fg_status st = FG_OK;
    pthread_mutex_lock(&dl->mu);
    if (slot->state == FG_SLOT_HELD) {
        st = fg_slot_held_error(dl, err);
        goto out;
    }
    while (slot->state == FG_SLOT_FREE || slot->state == FG_SLOT_FILLING)
        pthread_cond_wait(&dl->ready_cv, &dl->mu);
    if (slot->state == FG_SLOT_FAILED) {
        *err = slot->error;
        st = slot->error.status;
        goto out;
    }
    slot->state = FG_SLOT_HELD;
    slot->view.wait_seconds = fg_now_seconds() - t0;
    dl->next_deliver++;
    *batch = &slot->view;
out:
    pthread_mutex_unlock(&dl->mu);
    return st;
}

void fg_dataloader_release(fg_dataloader *dl, const fg_batch_view *batch)
{
    if (!batch)
        return;
    fg_slot *slot = (fg_slot *)(void *)batch; /* the view is the slot's first member */
    if (slot < dl->slots || slot >= dl->slots + dl->slot_count)
        return; /* not one of ours: ignore rather than corrupt the ring */
    pthread_mutex_lock(&dl->mu);
    if (slot->state == FG_SLOT_HELD) {
        slot->state = FG_SLOT_FREE;
        /* One slot came free: one worker can claim it, and only when it is the next
         * batch's. Waking every worker made the others' wake-ups take turns from the
         * compute threads for nothing. */
        if (fg_can_claim(dl))
            pthread_cond_signal(&dl->work_cv);
    }
    pthread_mutex_unlock(&dl->mu);
}

int64_t fg_dataloader_batches_per_epoch(const fg_dataloader *dl)
{
    return fg_sampler_batches_per_epoch(dl->sampler);
}

int64_t fg_dataloader_samples_per_rank(const fg_dataloader *dl)
{
    return fg_sampler_samples_per_rank(dl->sampler);
}

int fg_dataloader_slot_count(const fg_dataloader *dl)
{
    return dl->slot_count;
}

int fg_dataloader_slots_for(int num_workers, int prefetch)
{
    return prefetch + num_workers;
}

fg_batch fg_dataloader_batch(const fg_dataloader *dl, const fg_batch_view *v)
{
    const fg_dataset_info *info = &dl->opts.info;
    fg_batch b = {sizeof b, v->samples, v->labels, v->count,
                  (int64_t)fg_dataloader_sample_elems(dl), v->fence,
                  info->label_elems > 0 ? info->label_elems : 1, v->samples,
                  info->sample_dtype ? info->sample_dtype : FG_F32, v->labels,
                  info->label_dtype ? info->label_dtype : FG_I32};
    return b;
}

size_t fg_dataloader_sample_elems(const fg_dataloader *dl)
{
    return dl->sample_elems;
}
