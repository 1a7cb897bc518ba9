/* The batch copier (batch_copy.h): device buffers, the copy queue and the events that fence
 * a batch's copy on both sides. */
#include "batch_copy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "copy_fence.h"
#include "core_util.h"

typedef struct fg_copy_buffer {
    float *x;         /* device: (sample_bytes) samples, or NULL */
    int32_t *y;       /* device: (label_bytes) labels, or NULL */
    void *consumed;   /* copy queue only: recorded on the compute queue after the last
                       * work reading this buffer */
    int in_use;       /* copied into, and done() not called since */
    int consumed_set; /* `consumed` was recorded at least once */
} fg_copy_buffer;

struct fg_batch_copier {
    fg_batch_copier_options o;
    int direct;                /* host_synchronous backend: batches are handed over, not copied */
    int events;                /* the backend has events */
    void *copy_queue;          /* own queue (separate) or the compute queue */
    int separate;              /* copy_queue is a copy queue of its own */
    int buffers;               /* per area: 2 with a copy queue of its own, else 1 */
    fg_copy_buffer *buf;       /* (areas, buffers) */
    int *current;              /* (areas): the buffer of the area's last upload */
    fg_copy_fence_link *links; /* (fence_count) */
    void *own_event;           /* batches without a fence */
};

static fg_status new_event(fg_batch_copier *c, void **ev, fg_error *err)
{
    return c->o.be->event_create(c->o.bs, c->o.device, ev, err);
}

static fg_status create_events(fg_batch_copier *c, fg_error *err)
{
    fg_status st = new_event(c, &c->own_event, err);
    for (int i = 0; st == FG_OK && i < c->o.fence_count; i++) {
        fg_copy_fence_link *l = &c->links[i];
        l->be = c->o.be;
        l->bs = c->o.bs;
        atomic_init(&l->fence, NULL);
        st = new_event(c, &l->event, err);
    }
    for (int i = 0; st == FG_OK && c->separate && i < c->o.areas * c->buffers; i++)
        st = new_event(c, &c->buf[i].consumed, err);
    return st;
}

static fg_status create_buffers(fg_batch_copier *c, fg_error *err)
{
    const fg_batch_copier_options *o = &c->o;
    fg_status st = FG_OK;
    for (int i = 0; st == FG_OK && i < o->areas * c->buffers; i++) {
        if (o->sample_bytes)
            st = o->be->alloc(o->bs, o->device, o->sample_bytes, (void **)&c->buf[i].x, err);
        if (st == FG_OK && o->label_bytes)
            st = o->be->alloc(o->bs, o->device, o->label_bytes, (void **)&c->buf[i].y, err);
    }
    return st;
}

static fg_status open_queue(fg_batch_copier *c, fg_error *err)
{
    const fg_backend_vtable *be = c->o.be;
    c->events = FG_BACKEND_HAS_EVENTS(be);
    c->copy_queue = c->o.compute_queue;
    c->buffers = 1;
    if (!c->events || !be->copy_queue_create)
        return FG_OK;
    fg_status st = be->copy_queue_create(c->o.bs, c->o.device, &c->copy_queue, err);
    if (st != FG_OK) {
        c->copy_queue = c->o.compute_queue;
        return st;
    }
    c->separate = 1;
    c->buffers = 2;
    return FG_OK;
}

fg_status fg_batch_copier_create(const fg_batch_copier_options *o, fg_batch_copier **out,
                                 fg_error *err)
{
    *out = NULL;
    if (o->areas < 1 || o->fence_count < 0)
        return fg_error_set(err, FG_INTERNAL, "batch copier: %d areas, %d fences", o->areas,
                            o->fence_count);
    fg_batch_copier *c = calloc(1, sizeof *c);
    if (!c)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for a batch copier");
    c->o = *o;
    c->direct = FG_HAS_FIELD(o->be, fg_backend_vtable, host_synchronous) &&
                o->be->host_synchronous && o->be->host_synchronous(o->bs, o->device);
    fg_status st = c->direct ? FG_OK : open_queue(c, err);
    size_t nbuf = (size_t)o->areas * (size_t)c->buffers;
    if (st == FG_OK && (!(c->buf = calloc(nbuf, sizeof *c->buf)) ||
                        !(c->current = calloc((size_t)o->areas, sizeof *c->current)) ||
                        !(c->links = calloc((size_t)o->fence_count + 1, sizeof *c->links))))
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for a batch copier");
    if (st == FG_OK && c->events)
        st = create_events(c, err);
    if (st == FG_OK && !c->direct)
        st = create_buffers(c, err);
    return FG_CREATED(st, c, out, fg_batch_copier_destroy);
}

void fg_batch_copier_destroy(fg_batch_copier *c)
{
    if (!c)
        return;
    const fg_backend_vtable *be = c->o.be;
    if (c->separate)
        be->queue_sync(c->o.bs, c->copy_queue, NULL);
    for (int i = 0; c->links && i < c->o.fence_count; i++) {
        fg_copy_fence_unlink(&c->links[i]);
        if (c->links[i].event)
            be->event_destroy(c->o.bs, c->links[i].event);
    }
    if (c->own_event)
        be->event_destroy(c->o.bs, c->own_event);
    for (int i = 0; c->buf && i < c->o.areas * c->buffers; i++) {
        if (c->buf[i].consumed)
            be->event_destroy(c->o.bs, c->buf[i].consumed);
        if (c->buf[i].x)
            be->free(c->o.bs, c->o.device, c->buf[i].x);
        if (c->buf[i].y)
            be->free(c->o.bs, c->o.device, c->buf[i].y);
    }
    if (c->separate)
        be->queue_destroy(c->o.bs, c->copy_queue);
    free(c->links);
    free(c->current);
    free(c->buf);
    free(c);
}

/* The compute queue is past every reader of buf (done() said so, or now). */
static fg_status mark_consumed(fg_batch_copier *c, fg_copy_buffer *buf, fg_error *err)
{
    if (!c->separate || !buf->in_use)
        return FG_OK;
    fg_status st = c->o.be->event_record(c->o.bs, c->o.compute_queue, buf->consumed, err);
    if (st != FG_OK)
        return st;
    buf->in_use = 0;
    buf->consumed_set = 1;
    return FG_OK;
}

static fg_status check_fits(const fg_batch_copier *c, const fg_batch *b, size_t *xb,
                            size_t *yb, fg_error *err)
{
    *xb = (size_t)b->count * (size_t)b->sample_elems * sizeof(float);
    *yb = (size_t)b->count * (size_t)fg_batch_label_elems(b) * sizeof(int32_t);
    if ((c->o.sample_bytes && *xb > c->o.sample_bytes) ||
        (c->o.label_bytes && *yb > c->o.label_bytes))
        return fg_error_set(err, FG_INTERNAL, "batch copier: a batch of %d samples of %lld "
                            "values does not fit the device buffer of %zu + %zu bytes",
                            (int)b->count, (long long)b->sample_elems, c->o.sample_bytes,
                            c->o.label_bytes);
    return FG_OK;
}

static fg_status copy_parts(fg_batch_copier *c, fg_copy_buffer *buf, const fg_batch *b,
                            float **x, int32_t **y, fg_error *err)
{
    const fg_backend_vtable *be = c->o.be;
    size_t xb, yb;
    fg_status checked = check_fits(c, b, &xb, &yb, err);
    if (checked != FG_OK)
        return checked;
    *x = buf->x;
    *y = buf->y;
    fg_status st = FG_OK;
    if (*x)
        st = be->copy(c->o.bs, c->copy_queue, *x, c->o.device, fg_batch_inputs(b), -1, xb, err);
    if (st == FG_OK && *y)
        st = be->copy(c->o.bs, c->copy_queue, *y, c->o.device, fg_batch_targets(b), -1, yb,
                      err);
    return st;
}

/* After the copy: the event the staging fence (or, without one, the host right here)
 * waits for, and the compute queue's wait. */
static fg_status fence_copy(fg_batch_copier *c, const fg_batch *b, fg_error *err)
{
    const fg_backend_vtable *be = c->o.be;
    struct fg_copy_fence *f = FG_HAS_FIELD(b, fg_batch, staging) ? b->staging : NULL;
    if (f && (f->id < 0 || f->id >= c->o.fence_count))
        f = NULL; /* a loader this copier has no event for: wait here instead */
    fg_copy_fence_link *l = f ? &c->links[f->id] : NULL;
    void *ev = l ? l->event : c->own_event;
    fg_status st = be->event_record(c->o.bs, c->copy_queue, ev, err);
    if (st == FG_OK && c->separate)
        st = be->queue_wait_event(c->o.bs, c->o.compute_queue, ev, err);
    if (st != FG_OK)
        return st;
    if (!l)
        return be->event_sync(c->o.bs, ev, err);
    fg_copy_fence_add(f, l);
    return FG_OK;
}

/* A host_synchronous backend reads the staging memory itself: every op reading it has
 * completed before the strategy's step returns, and the trainer releases the slot only
 * then, so no fence is needed. (The batch is read-only to the model: it is const here.) */
static fg_status hand_over(const fg_batch_copier *c, const fg_batch *b, float **x, int32_t **y,
                           fg_error *err)
{
    size_t xb, yb;
    fg_status st = check_fits(c, b, &xb, &yb, err);
    if (st != FG_OK)
        return st;
    *x = c->o.sample_bytes ? (float *)(uintptr_t)fg_batch_inputs(b) : NULL;
    *y = c->o.label_bytes ? (int32_t *)(uintptr_t)fg_batch_targets(b) : NULL;
    return FG_OK;
}

fg_status fg_batch_copier_upload(fg_batch_copier *c, int area, const fg_batch *b, float **x,
                                 int32_t **y, fg_error *err)
{
    *x = NULL;
    *y = NULL;
    if (area < 0 || area >= c->o.areas)
        return fg_error_set(err, FG_INTERNAL, "batch copier: area %d of %d", area, c->o.areas);
    if (c->direct)
        return hand_over(c, b, x, y, err);
    int k = (c->current[area] + 1) % c->buffers;
    fg_copy_buffer *buf = &c->buf[area * c->buffers + k];
    c->current[area] = k;
    /* Write after read: the copy must not overwrite what the compute queue still reads. */
    fg_status st = mark_consumed(c, buf, err);
    if (st == FG_OK && c->separate && buf->consumed_set)
        st = c->o.be->queue_wait_event(c->o.bs, c->copy_queue, buf->consumed, err);
    if (st == FG_OK)
        st = copy_parts(c, buf, b, x, y, err);
    if (st != FG_OK)
        return st;
    buf->in_use = 1;
    return c->events ? fence_copy(c, b, err) : FG_OK;
}

fg_status fg_batch_copier_done(fg_batch_copier *c, int area, fg_error *err)
{
    if (area < 0 || area >= c->o.areas)
        return fg_error_set(err, FG_INTERNAL, "batch copier: area %d of %d", area, c->o.areas);
    return mark_consumed(c, &c->buf[area * c->buffers + c->current[area]], err);
}

size_t fg_batch_copier_device_bytes(const fg_batch_copier *c)
{
    if (c->direct)
        return 0;
    return (size_t)c->o.areas * (size_t)c->buffers * (c->o.sample_bytes + c->o.label_bytes);
}
