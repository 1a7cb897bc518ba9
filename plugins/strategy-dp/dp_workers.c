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

static void *worker_main(void *p)
{
    dp_replica *w = p;
    dp *d = w->d;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&d->lock);
        while (d->generation == seen) pthread_cond_wait(&d->go, &d->lock);
        seen = d->generation;
        dp_job job = d->job;
        pthread_mutex_unlock(&d->lock);
        if (job == DP_JOB_STOP) return NULL;
        memset(&w->err, 0, sizeof w->err);
        w->st = run_part(w, job, &w->err);
        pthread_mutex_lock(&d->lock);
        if (--d->running == 0) pthread_cond_signal(&d->done);
        pthread_mutex_unlock(&d->lock);
    }
}

fg_status dp_workers_start(dp *d, fg_error *err)
{
    if (pthread_mutex_init(&d->lock, NULL) != 0)
        return fg_error_set(err, FG_INTERNAL, "strategy.dp: pthread_mutex_init failed");
    if (pthread_cond_init(&d->go, NULL) != 0) {
        pthread_mutex_destroy(&d->lock);
        return fg_error_set(err, FG_INTERNAL, "strategy.dp: pthread_cond_init failed");
    }
    if (pthread_cond_init(&d->done, NULL) != 0) {
        pthread_cond_destroy(&d->go);
        pthread_mutex_destroy(&d->lock);
        return fg_error_set(err, FG_INTERNAL, "strategy.dp: pthread_cond_init failed");
    }
    if (pthread_cond_init(&d->ar_met, NULL) != 0) {
        pthread_cond_destroy(&d->done);
        pthread_cond_destroy(&d->go);
        pthread_mutex_destroy(&d->lock);
        return fg_error_set(err, FG_INTERNAL, "strategy.dp: pthread_cond_init failed");
    }
    d->sync_ready = 1;
    for (int i = 1; i < d->devices; i++) {
        int rc = pthread_create(&d->r[i].thread, NULL, worker_main, &d->r[i]);
        if (rc != 0)
            return fg_error_set(err, FG_INTERNAL, "strategy.dp: cannot start the thread of "
                                "device %d (pthread_create: error %d)", d->r[i].device, rc);
        d->r[i].started = 1;
    }
    return FG_OK;
}

void dp_workers_stop(dp *d)
{
    if (!d->sync_ready) return;
    pthread_mutex_lock(&d->lock);
    d->job = DP_JOB_STOP;
    d->generation++;
    pthread_cond_broadcast(&d->go);
    pthread_mutex_unlock(&d->lock);
    for (int i = 1; i < d->devices; i++)
        if (d->r[i].started) {
            pthread_join(d->r[i].thread, NULL);
            d->r[i].started = 0;
        }
    pthread_cond_destroy(&d->ar_met);
    pthread_cond_destroy(&d->done);
    pthread_cond_destroy(&d->go);
    pthread_mutex_destroy(&d->lock);
    d->sync_ready = 0;
}

fg_status dp_run(dp *d, dp_job job, fg_error *err)
{
    pthread_mutex_lock(&d->lock);
    d->job = job;
    d->running = d->devices - 1;
    d->generation++;
    pthread_cond_broadcast(&d->go);
    pthread_mutex_unlock(&d->lock);

    dp_replica *w0 = &d->r[0];
    memset(&w0->err, 0, sizeof w0->err);
    w0->st = job == DP_JOB_PULL ? FG_OK : run_part(w0, job, &w0->err);

    pthread_mutex_lock(&d->lock);
    while (d->running > 0) pthread_cond_wait(&d->done, &d->lock);
    pthread_mutex_unlock(&d->lock);
    for (int i = 0; i < d->devices; i++)
        if (d->r[i].st != FG_OK)
            return fg_error_set(err, d->r[i].st, "strategy.dp: device %d: %s", d->r[i].device,
                                d->r[i].err.message);
    return FG_OK;
}
