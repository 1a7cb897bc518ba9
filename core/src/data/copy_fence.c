/* Copy fences (copy_fence.h): a mutex-guarded list of the events recorded after the copies
 * out of one staging slot. */
#include "copy_fence.h"

#include <string.h>

fg_status fg_copy_fence_init(fg_copy_fence *f, int id, fg_error *err)
{
    memset(f, 0, sizeof *f);
    f->id = id;
    if (pthread_mutex_init(&f->mu, NULL) != 0)
        return fg_error_set(err, FG_INTERNAL, "copy fence %d: pthread_mutex_init failed", id);
    f->ready = 1;
    return FG_OK;
}

void fg_copy_fence_fini(fg_copy_fence *f)
{
    if (!f->ready)
        return;
    pthread_mutex_lock(&f->mu);
    for (fg_copy_fence_link *l = f->head, *next; l; l = next) {
        next = l->next;
        l->next = NULL;
        atomic_store(&l->fence, NULL);
    }
    f->head = NULL;
    pthread_mutex_unlock(&f->mu);
    pthread_mutex_destroy(&f->mu);
    f->ready = 0;
}

void fg_copy_fence_add(fg_copy_fence *f, fg_copy_fence_link *l)
{
    fg_copy_fence *old = atomic_load(&l->fence);
    if (old && old != f) /* never two fences' locks at once */
        fg_copy_fence_unlink(l);
    pthread_mutex_lock(&f->mu);
    if (atomic_load(&l->fence) != f) {
        l->next = f->head;
        f->head = l;
        atomic_store(&l->fence, f);
    }
    pthread_mutex_unlock(&f->mu);
}

fg_status fg_copy_fence_wait(fg_copy_fence *f, fg_error *err)
{
    fg_status st = FG_OK;
    pthread_mutex_lock(&f->mu);
    while (f->head) {
        fg_copy_fence_link *l = f->head;
        int done = FG_HAS_FIELD(l->be, fg_backend_vtable, event_query) && l->be->event_query &&
                   l->be->event_query(l->bs, l->event) == 1;
        if (!done)
            st = l->be->event_sync(l->bs, l->event, err);
        if (st != FG_OK)
            break;
        f->head = l->next;
        l->next = NULL;
        atomic_store(&l->fence, NULL);
    }
    pthread_mutex_unlock(&f->mu);
    return st;
}

void fg_copy_fence_unlink(fg_copy_fence_link *l)
{
    fg_copy_fence *f = atomic_load(&l->fence);
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    /* A loader's wait may have emptied the fence since the load above. */
    if (atomic_load(&l->fence) == f) {
        fg_copy_fence_link **p = &f->head;
        while (*p && *p != l)
            p = &(*p)->next;
        if (*p)
            *p = l->next;
        l->next = NULL;
        atomic_store(&l->fence, NULL);
    }
    pthread_mutex_unlock(&f->mu);
}
