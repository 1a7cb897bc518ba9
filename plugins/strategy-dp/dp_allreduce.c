/* strategy.dp's replica all-reduce ([model] sync_batchnorm): the replicas training a shard
 * meet at a rendezvous in the middle of forward (and backward). Each copies its f64 sums
 * to its host slot; the last to arrive adds the slots in replica order (the same bits
 * whichever thread is last) into the total, which every replica copies back to its device.
 * A replica whose part fails opens the rendezvous for good (dp_allreduce_abort), so the
 * others fail too instead of waiting for it. */
#include <stdlib.h>
#include <string.h>

#include "dp.h"

/* The host slot of w holds count values (grown on the first steps only). */
static fg_status reserve(dp_replica *w, int64_t count, fg_error *err)
{
    if (count <= w->sums_cap) return FG_OK;
    double *p = realloc(w->sums_host, (size_t)count * sizeof *p);
    if (!p) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.dp: out of memory");
    w->sums_host = p;
    w->sums_cap = count;
    return FG_OK;
}

/* The last replica to arrive: the total of every participant's slot, in replica order. */
static fg_status add_up(dp *d, int64_t count, fg_error *err)
{
    if (count > d->sums_cap) {
        double *p = realloc(d->sums_total, (size_t)count * sizeof *p);
        if (!p) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.dp: out of memory");
        d->sums_total = p;
        d->sums_cap = count;
    }
    memset(d->sums_total, 0, (size_t)count * sizeof *d->sums_total);
    for (int i = 0; i < d->devices; i++) {
        const dp_replica *w = &d->r[i];
        if (!w->shard.count) continue;
        if (w->sums_count != count)
            return fg_error_set(err, FG_INTERNAL, "strategy.dp: replica all-reduce of %lld "
                                "values on device %d, %lld on device %d",
                                (long long)count, d->r[0].device, (long long)w->sums_count,
                                w->device);
        for (int64_t k = 0; k < count; k++) d->sums_total[k] += w->sums_host[k];
    }
    return FG_OK;
}

/* Waits until every participant's slot is in and the total is made; 0 when aborted. */
static int meet(dp *d, int64_t count, fg_error *err, fg_status *st)
{
    pthread_mutex_lock(&d->gang.lock);
    uint64_t round = d->ar_round;
    if (++d->ar_arrived == d->participants) {
        *st = add_up(d, count, err);
        if (*st != FG_OK) d->ar_failed = 1;
        d->ar_arrived = 0;
        d->ar_round++;
        pthread_cond_broadcast(&d->gang.wake);
    } else {
        while (d->ar_round == round && !d->ar_failed) pthread_cond_wait(&d->gang.wake, &d->gang.lock);
    }
    int ok = !d->ar_failed;
    pthread_mutex_unlock(&d->gang.lock);
    return ok;
}

fg_status dp_allreduce_sum(void *user, void *queue, double *buf, int64_t count, fg_error *err)
{
    dp_replica *w = user;
    dp *d = w->d;
    size_t bytes = (size_t)count * sizeof(double);
    fg_status st = reserve(w, count, err);
    if (st == FG_OK)
        st = d->be->copy(d->be_state, queue, w->sums_host, -1, buf, w->device, bytes, err);
    if (st == FG_OK) st = d->be->queue_sync(d->be_state, queue, err);
    if (st != FG_OK) {
        dp_allreduce_abort(d);
        return st;
    }
    w->sums_count = count;
    fg_status total_st = FG_OK;
    if (!meet(d, count, err, &total_st))
        return total_st != FG_OK ? total_st
                                 : fg_error_set(err, FG_FATAL, "strategy.dp: another replica "
                                                "failed during the replica all-reduce");
    st = d->be->copy(d->be_state, queue, buf, w->device, d->sums_total, -1, bytes, err);
    /* the next rendezvous rewrites the total: the copy must have read it */
    return st == FG_OK ? d->be->queue_sync(d->be_state, queue, err) : st;
}

void dp_allreduce_begin(dp *d)
{
    int n = 0;
    for (int i = 0; i < d->devices; i++) n += d->r[i].shard.count > 0;
    pthread_mutex_lock(&d->gang.lock);
    d->participants = n;
    d->ar_arrived = 0;
    d->ar_failed = 0;
    pthread_mutex_unlock(&d->gang.lock);
}

void dp_allreduce_abort(dp *d)
{
    pthread_mutex_lock(&d->gang.lock);
    d->ar_failed = 1;
    pthread_cond_broadcast(&d->gang.wake);
    pthread_mutex_unlock(&d->gang.lock);
}

void dp_allreduce_free(dp *d)
{
    for (int i = 0; d->r && i < d->devices; i++) {
        free(d->r[i].sums_host);
        d->r[i].sums_host = NULL;
        d->r[i].sums_cap = 0;
    }
    free(d->sums_total);
    d->sums_total = NULL;
    d->sums_cap = 0;
}
