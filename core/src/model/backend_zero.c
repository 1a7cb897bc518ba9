/* Device buffers zeroed at setup (an optimizer's state, a replica's gradients), on a queue
 * of their own that is synchronised before the call returns. */
#include "layer.h"

fg_status fg_backend_zero(const fg_backend_vtable *be, void *bs, int device, fg_dtype dtype,
                          void *const *bufs, size_t buf_count, size_t count, fg_error *err)
{
    FG_BACKEND_NEED(be, queue_create, err);
    FG_BACKEND_NEED(be, fill, err);
    void *q = NULL;
    fg_status st = be->queue_create(bs, device, &q, err);
    if (st != FG_OK)
        return st;
    for (size_t i = 0; i < buf_count && st == FG_OK; i++)
        st = be->fill(bs, q, dtype, bufs[i], 0.0f, count, err);
    if (st == FG_OK)
        st = be->queue_sync(bs, q, err);
    be->queue_destroy(bs, q);
    return st;
}
