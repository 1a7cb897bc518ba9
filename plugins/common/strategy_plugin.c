/* Metric sums across ranks and rank 0's model buffers, for the one-process-per-device
 * strategies. */
#include "strategy_plugin.h"

#include <stdlib.h>

fg_status fg_plugin_sum_metrics(const fg_comm_vtable *comm, void *comm_state,
                                fg_step_metrics *m, fg_error *err)
{
    double sums[3] = {m->loss_sum, m->correct, m->count};
    fg_status st = comm->all_reduce(comm_state, NULL, sums, 3, FG_F64, FG_REDUCE_SUM, err);
    m->loss_sum = sums[0];
    m->correct = sums[1];
    m->count = sums[2];
    return st;
}

void fg_plugin_rank0_buffers_bind(fg_plugin_rank0_buffers *b, const fg_train_services *svc,
                                  void *stage)
{
    uint32_t dt;
    int64_t at;
    b->data = svc->region(svc->ctx, stage, FG_REGION_BUFFERS, 0, &dt, &at, &b->count);
    b->queue = svc->queue(svc->ctx, stage);
    if (!b->count) b->data = NULL;
}

fg_status fg_plugin_rank0_buffers_sync(fg_plugin_rank0_buffers *b, fg_error *err)
{
    b->stale = 0;
    if (!b->data || b->world_size == 1) return FG_OK;
    fg_status st = b->be->queue_sync(b->be_state, b->queue, err);
    if (st == FG_OK)
        st = b->comm->broadcast(b->comm_state, NULL, b->data, (size_t)b->count, FG_F32, 0, err);
    if (st == FG_OK) b->syncs++;
    return st;
}

void fg_plugin_rank0_buffers_report(const fg_plugin_rank0_buffers *b, const fg_host *host)
{
    if (!b->data) return;
    size_t bytes = (size_t)b->count * sizeof(float);
    unsigned char *h = malloc(bytes);
    fg_error e = {0};
    fg_status st = h ? b->be->copy(b->be_state, b->queue, h, -1, b->data, b->device, bytes, &e)
                     : FG_OUT_OF_MEMORY;
    if (st == FG_OK) st = b->be->queue_sync(b->be_state, b->queue, &e);
    uint64_t digest = 1469598103934665603ull;
    for (size_t i = 0; st == FG_OK && i < bytes; i++) digest = (digest ^ h[i]) * 1099511628211ull;
    free(h);
    if (st != FG_OK) return;
    host->log(host, FG_LOG_DEBUG, "rank %d: model buffers (%lld floats) digest %016llx, "
              "%lld broadcast(s) from rank 0%s", b->rank, (long long)b->count,
              (unsigned long long)digest, (long long)b->syncs,
              b->stale ? "; changed since the last one" : "");
}
