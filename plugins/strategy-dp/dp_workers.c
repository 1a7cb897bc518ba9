/* strategy.dp: the persistent threads that drive replicas 1..N-1. The trainer's thread
 * publishes a job (a new generation), runs replica 0's part itself, then waits for the
 * workers. Nothing is created per step. */
#include <stdio.h>
#include <string.h>

#include "dp.h"

/* One replica's part of a job, on the calling thread. The queue is drained before the
 * part counts as done: another thread reads this replica's memory next. */
static fg_status run_part(dp_replica *w, dp_job job, fg_error *err)
{
    dp *d = w->d;
    const fg_train_services *svc = d->svc;
    fg_status st = FG_OK;
    switch (job) {
    case DP_JOB_TRAIN:
        if (!w->shard.count) return FG_OK;
        st = svc->forward(svc->ctx, w->replica, 0, &w->shard, w->first, NULL, 1, err);
        if (st == FG_OK)
            st = svc->backward(svc->ctx, w->replica, 0, NULL, w->scale, w->has_grads, err);
        w->has_grads = 1;
        if (st != FG_OK) dp_allreduce_abort(d); /* the others may wait for this replica */
        break;
    case DP_JOB_EVAL:
        if (!w->shard.count) return FG_OK;
        st = svc->forward(svc->ctx, w->replica, 0, &w->shard, w->first, NULL, 0, err);
        break;
    case DP_JOB_PULL: {
        const dp_replica *src = &d->r[0];
        st = d->be->copy(d->be_state, w->queue, w->params, w->device, src->params, src->device,
                         (size_t)svc->param_count * sizeof(float), err);
        int64_t nb = svc->buffer_count;
        if (st == FG_OK && nb > 0 && w->buffers && src->buffers)
            st = d->be->copy(d->be_state, w->queue, w->buffers, w->device, src->buffers,
                             src->device, (size_t)nb * sizeof(float), err);
        break;
    }
    case DP_JOB_STOP: return FG_OK;
    }
    if (st == FG_OK) st = d->be->queue_sync(d->be_state, w->queue, err);
    return st;
}

/* A worker thread's part (worker_gang.h). */
static void worker_part(void *ctx, int worker, int job)
{
    dp_replica *w = &((dp *)ctx)->r[worker];
    memset(&w->err, 0, sizeof w->err);
    w->st = run_part(w, (dp_job)job, &w->err);
}

fg_status dp_workers_start(dp *d, fg_error *err)
{
    int init = fg_plugin_gang_init(&d->gang);
    if (init == 1)
        return fg_error_set(err, FG_INTERNAL, "strategy.dp: pthread_mutex_init failed");
    if (init != 0)
        return fg_error_set(err, FG_INTERNAL, "strategy.dp: pthread_cond_init failed");
    return fg_plugin_gang_start(&d->gang, d->devices, worker_part, d, DP_JOB_STOP,
                                "strategy.dp", err);
}

void dp_workers_stop(dp *d)
{
    fg_plugin_gang_stop(&d->gang);
}

fg_status dp_run(dp *d, dp_job job, fg_error *err)
{
    pthread_mutex_lock(&d->gang.lock);
    fg_plugin_gang_publish_locked(&d->gang, job);
    pthread_mutex_unlock(&d->gang.lock);

    dp_replica *w0 = &d->r[0];
    memset(&w0->err, 0, sizeof w0->err);
    w0->st = job == DP_JOB_PULL ? FG_OK : run_part(w0, job, &w0->err);

    fg_plugin_gang_wait(&d->gang);
    for (int i = 0; i < d->devices; i++)
        if (d->r[i].st != FG_OK)
            return fg_error_set(err, d->r[i].st, "strategy.dp: device %d: %s", d->r[i].device,
                                d->r[i].err.message);
    return FG_OK;
}
