/* Model buffers (batch-norm running statistics) under ddp: rank 0's are the model's.
 *
 * Training forwards normalise with batch statistics and only update the running ones, so
 * each rank's running statistics drift apart without changing training. They are read by
 * evaluation and written to checkpoints: before either, every rank takes rank 0's. The
 * trainer reads the metrics (read_metrics, on every rank at once) at log points, at the
 * end of each epoch's training and before each evaluation pass, so the broadcast rides
 * there: one broadcast of the (small) buffer region per log interval instead of one per
 * forward, with the results of PyTorch DDP's default broadcast_buffers = True. */
#include <stdlib.h>

#include "ddp.h"

void ddp_buffers_bind(ddp *d)
{
    const fg_train_services *svc = d->svc;
    d->buffers = NULL;
    d->buffer_count = 0;
    uint32_t dt;
    int64_t at;
    d->buffers = svc->region(svc->ctx, d->replica, FG_REGION_BUFFERS, 0, &dt, &at, &d->buffer_count);
    if (!d->buffer_count) d->buffers = NULL;
}

fg_status ddp_buffers_sync(ddp *d, fg_error *err)
{
    d->buffers_stale = 0;
    if (!d->buffers || d->topo.world_size == 1) return FG_OK;
    fg_status st = d->be->queue_sync(d->be_state, d->queue, err);
    if (st == FG_OK)
        st = d->comm->broadcast(d->comm_state, NULL, d->buffers, (size_t)d->buffer_count, FG_F32,
                                0, err);
    if (st == FG_OK) d->buffer_syncs++;
    return st;
}

/* FNV-1a of the buffer region as this rank holds it: the debug line at teardown that lets
 * a test compare ranks. */
static fg_status buffers_digest(ddp *d, uint64_t *out, fg_error *err)
{
    size_t bytes = (size_t)d->buffer_count * sizeof(float);
    unsigned char *host = malloc(bytes + 1);
    if (!host) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.ddp: out of memory");
    fg_status st = d->be->copy(d->be_state, d->queue, host, -1, d->buffers, d->device, bytes, err);
    if (st == FG_OK) st = d->be->queue_sync(d->be_state, d->queue, err);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; st == FG_OK && i < bytes; i++) h = (h ^ host[i]) * 1099511628211ull;
    free(host);
    *out = h;
    return st;
}

void ddp_buffers_report(ddp *d)
{
    if (!d->buffers) return;
    uint64_t digest = 0;
    fg_error e = {0};
    if (buffers_digest(d, &digest, &e) != FG_OK) return;
    d->host->log(d->host, FG_LOG_DEBUG, "rank %d: model buffers (%lld floats) digest %016llx, "
                 "%lld broadcast(s) from rank 0%s", d->topo.rank, (long long)d->buffer_count,
                 (unsigned long long)digest, (long long)d->buffer_syncs,
                 d->buffers_stale ? "; changed since the last one" : "");
}
