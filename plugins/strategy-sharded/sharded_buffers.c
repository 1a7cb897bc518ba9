/* Model buffers (batch-norm running statistics) under sharded: rank 0's are the model's,
 * as under ddp. Every rank holds the whole (small) buffer region in its replica at every
 * stage; training forwards update each rank's from its own batches, so before the
 * statistics are read (evaluation, checkpoints) every rank takes rank 0's. The trainer
 * reads the metrics on every rank at once at log points, at the end of each epoch's
 * training and before each evaluation pass: the broadcast rides there, one per log
 * interval at most, and once at setup. */
#include <stdlib.h>

#include "sharded.h"

void sh_buffers_bind(sharded *s)
{
    const fg_train_services *svc = s->svc;
    uint32_t dt;
    int64_t at;
    s->buffers = svc->region(svc->ctx, s->replica, FG_REGION_BUFFERS, 0, &dt, &at, &s->buffer_count);
    if (!s->buffer_count) s->buffers = NULL;
}

fg_status sh_buffers_sync(sharded *s, fg_error *err)
{
    s->buffers_stale = 0;
    if (!s->buffers || s->topo.world_size == 1) return FG_OK;
    fg_status st = s->be->queue_sync(s->be_state, s->queue, err);
    if (st == FG_OK)
        st = s->comm->broadcast(s->comm_state, NULL, s->buffers, (size_t)s->buffer_count, FG_F32,
                                0, err);
    if (st == FG_OK) s->buffer_syncs++;
    return st;
}

/* FNV-1a of this rank's buffer region: the debug line at teardown that lets a test compare
 * the ranks. */
void sh_buffers_report(sharded *s)
{
    if (!s->buffers) return;
    size_t bytes = (size_t)s->buffer_count * sizeof(float);
    unsigned char *host = malloc(bytes);
    fg_error e = {0};
    fg_status st = host ? s->be->copy(s->be_state, s->queue, host, -1, s->buffers, s->device,
                                      bytes, &e) : FG_OUT_OF_MEMORY;
    if (st == FG_OK) st = s->be->queue_sync(s->be_state, s->queue, &e);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; st == FG_OK && i < bytes; i++) h = (h ^ host[i]) * 1099511628211ull;
    free(host);
    if (st != FG_OK) return;
    s->host->log(s->host, FG_LOG_DEBUG, "rank %d: model buffers (%lld floats) digest %016llx, "
                 "%lld broadcast(s) from rank 0%s", s->topo.rank, (long long)s->buffer_count,
                 (unsigned long long)h, (long long)s->buffer_syncs,
                 s->buffers_stale ? "; changed since the last one" : "");
}
