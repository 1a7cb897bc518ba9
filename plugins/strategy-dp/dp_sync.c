/* strategy.dp: splitting a batch into shards, summing the gradients into replica 0 and
 * copying its parameters back, with the time each took. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "dp.h"

double dp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* As many replicas as the batch gives DP_MIN_SHARD samples each (at least one), sizes
 * differing by at most one: 63 samples on 2 devices are 32 + 31, 3 samples are 3 on one
 * device rather than 2 + 1. */
void dp_split(dp *d, const fg_batch *b, float grad_scale)
{
    int used = b->count / DP_MIN_SHARD;
    if (used > d->devices) used = d->devices;
    if (used < 1) used = 1;
    int base = b->count / used, extra = b->count % used, at = 0;
    for (int i = 0; i < d->devices; i++) {
        dp_replica *w = &d->r[i];
        int n = i < used ? base + (i < extra) : 0;
        w->shard = fg_batch_slice(b, at, n);
        w->first = at;
        w->scale = b->count ? grad_scale * (float)n / (float)b->count : 0.0f;
        at += n;
    }
}

fg_status dp_reduce(dp *d, fg_error *err)
{
    if (d->synced) return FG_OK;
    double t0 = dp_now();
    dp_replica *w0 = &d->r[0];
    size_t n = (size_t)d->svc->param_count;
    fg_status st = FG_OK;
    for (int i = 1; i < d->devices && st == FG_OK; i++) {
        const dp_replica *w = &d->r[i];
        if (!w->has_grads) continue; /* no shard since the last step: nothing of this step */
        st = d->be->copy(d->be_state, w0->queue, d->recv, w0->device, w->grads, w->device,
                         n * sizeof(float), err);
        if (st == FG_OK)
            st = d->be->axpy(d->be_state, w0->queue, FG_F32, FG_F32, 1.0f, d->recv, w0->grads, n,
                             err);
    }
    if (st == FG_OK) st = d->be->queue_sync(d->be_state, w0->queue, err);
    d->reduce_s = dp_now() - t0;
    d->synced = st == FG_OK;
    return st;
}

fg_status dp_broadcast(dp *d, fg_error *err)
{
    double t0 = dp_now();
    fg_status st = d->be->queue_sync(d->be_state, d->r[0].queue, err);
    if (st == FG_OK && d->devices > 1) st = dp_run(d, DP_JOB_PULL, err);
    d->broadcast_s = dp_now() - t0;
    return st;
}

/* Both copies are on the step's critical path: nothing hides them. */
void dp_report_step(dp *d)
{
    const fg_host *h = d->host;
    double sync = d->reduce_s + d->broadcast_s;
    d->total_reduce_s += d->reduce_s;
    d->total_broadcast_s += d->broadcast_s;
    if (!h->metric) return;
    h->metric(h, "time/grad_sync_s", sync, d->steps);
    h->metric(h, "time/comm_s", sync, d->steps);
    h->metric(h, "time/comm_hidden_s", 0.0, d->steps);
    h->metric(h, "dp/reduce_s", d->reduce_s, d->steps);
    h->metric(h, "dp/broadcast_s", d->broadcast_s, d->steps);
}
