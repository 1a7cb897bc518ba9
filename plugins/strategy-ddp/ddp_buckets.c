/* Gradient buckets: cut during backward, all-reduced as soon as they are final, waited in
 * optimizer_step. See ddp.h for the scheme. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>
#include <time.h>

#include "ddp.h"

double ddp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ddp_buckets_begin(ddp *d, int reduce)
{
    d->bucket_count = 0;
    d->pending_hi = d->svc->param_count;
    d->reducing = reduce;
    d->out_of_order = 0;
    d->hook_status = FG_OK;
    memset(&d->timing, 0, sizeof d->timing);
}

static void hook_failed(ddp *d, fg_status st, const fg_error *e)
{
    if (d->hook_status != FG_OK) return;
    d->hook_status = st;
    d->hook_err = *e;
}

/* Tests every bucket in flight: MPI only progresses non-blocking collectives when it is
 * called, so each hook gives it a turn. */
static void progress(ddp *d)
{
    if (!d->overlap) return;
    for (int i = 0; i < d->bucket_count; i++) {
        ddp_bucket *b = &d->buckets[i];
        if (!b->request || b->done) continue;
        fg_error e = {0};
        fg_status st = d->comm->test(d->comm_state, b->request, &b->done, &e);
        if (st != FG_OK) hook_failed(d, st, &e);
        if (b->done) b->finished = ddp_now();
    }
}

/* What a bucket's collective reduces: the gradients themselves, or their bf16 copy. */
static void *wire_at(const ddp *d, int64_t offset)
{
    return d->wire ? (void *)((uint16_t *)d->wire + offset) : (void *)(d->grads + offset);
}

/* Orders the bucket's reduction after the gradients' producers. A comm ordered by queues
 * (comm.nccl) takes the compute queue and waits on the device; any other reads memory the
 * host hands it, so the queue is synchronised first (free on the CPU backend, whose queue
 * runs synchronously). With grad_comm_dtype = bf16 the bucket is cast to its wire copy first,
 * on the same queue. */
static fg_status prepare_bucket(ddp *d, const ddp_bucket *b, fg_error *err)
{
    fg_status st = FG_OK;
    if (d->wire)
        st = d->be->cast(d->be_state, d->queue, FG_BF16, FG_F32, wire_at(d, b->offset),
                         d->grads + b->offset, (size_t)b->count, err);
    if (st == FG_OK && !d->device_ordered) st = d->be->queue_sync(d->be_state, d->queue, err);
    return st;
}

/* Starts the all-reduce of grads [lo, hi). */
static fg_status start_bucket(ddp *d, int64_t lo, int64_t hi, fg_error *err)
{
    if (d->bucket_count >= d->max_buckets)
        return fg_error_set(err, FG_INTERNAL, "strategy.ddp: more than %d buckets in a step",
                            d->max_buckets);
    ddp_bucket *b = &d->buckets[d->bucket_count++];
    memset(b, 0, sizeof *b);
    b->offset = lo;
    b->count = hi - lo;
    d->pending_hi = lo;
    fg_status st = prepare_bucket(d, b, err);
    b->started = ddp_now();
    if (st == FG_OK && d->overlap)
        st = d->comm->all_reduce_start(d->comm_state, d->device_ordered ? d->native_queue : NULL,
                                       wire_at(d, lo), (size_t)b->count, d->comm_dtype,
                                       FG_REDUCE_SUM, &b->request, err);
    if (d->host->log)
        d->host->log(d->host, FG_LOG_DEBUG, "rank %d step %lld: bucket %d [%lld, %lld) "
                     "started t=%.6f", d->topo.rank, (long long)d->steps + 1,
                     d->bucket_count - 1, (long long)lo, (long long)hi, b->started);
    return st;
}

void ddp_on_grad_ready(void *user, int64_t offset, int64_t count)
{
    ddp *d = user;
    if (!d->reducing || d->hook_status != FG_OK) return;
    if (offset + count > d->pending_hi) {
        d->out_of_order = 1; /* those gradients were already in a started bucket */
        return;
    }
    progress(d);
    if (d->pending_hi - offset < d->bucket_elems) return;
    fg_error e = {0};
    fg_status st = start_bucket(d, offset, d->pending_hi, &e);
    if (st != FG_OK) hook_failed(d, st, &e);
}

fg_status ddp_buckets_flush(ddp *d, fg_error *err)
{
    if (d->hook_status != FG_OK) {
        *err = d->hook_err;
        return d->hook_status;
    }
    if (d->out_of_order)
        return fg_error_set(err, FG_INTERNAL, "strategy.ddp: the core reported a gradient range "
                            "above one already being reduced (the grad-ready hook must come "
                            "last layer first); the step's gradients would be wrong");
    fg_status st = d->pending_hi > 0 ? start_bucket(d, 0, d->pending_hi, err) : FG_OK;
    d->reducing = 0;
    return st;
}

/* Measure of the union of the buckets' [started, finished] intervals, and of its part
 * before `cut`. Buckets start in order, so one sweep over start times suffices. */
static void union_of_intervals(const ddp *d, double cut, double *total, double *before)
{
    *total = *before = 0;
    double s = 0, e = 0;
    int open = 0;
    for (int i = 0; i <= d->bucket_count; i++) {
        const ddp_bucket *b = i < d->bucket_count ? &d->buckets[i] : NULL;
        if (open && (!b || b->started > e)) {
            *total += e - s;
            if (cut > s) *before += (cut < e ? cut : e) - s;
            open = 0;
        }
        if (!b) break;
        if (!open) {
            s = b->started;
            e = b->finished;
            open = 1;
        } else if (b->finished > e) {
            e = b->finished;
        }
    }
}

/* Completes one bucket: on the device (the compute queue waits for it) where the comm is
 * ordered by queues, else on the host; a comm without all_reduce_start reduces it here. The
 * bf16 wire copy is then cast back into the gradients, on the compute queue. */
static fg_status finish_bucket(ddp *d, ddp_bucket *b, fg_error *err)
{
    fg_status st = FG_OK;
    if (d->overlap) {
        if (!b->request) return FG_OK;
        st = d->device_ordered
                 ? d->comm->wait_on_queue(d->comm_state, b->request, d->native_queue, err)
                 : d->comm->wait(d->comm_state, b->request, err);
        b->request = NULL;
        if (!b->done) b->finished = ddp_now();
    } else {
        b->started = ddp_now();
        st = d->comm->all_reduce(d->comm_state, NULL, wire_at(d, b->offset), (size_t)b->count,
                                 d->comm_dtype, FG_REDUCE_SUM, err);
        b->finished = ddp_now();
    }
    if (st == FG_OK && d->wire)
        st = d->be->cast(d->be_state, d->queue, FG_F32, FG_BF16, d->grads + b->offset,
                         wire_at(d, b->offset), (size_t)b->count, err);
    return st;
}

fg_status ddp_buckets_wait(ddp *d, fg_error *err)
{
    fg_status st = FG_OK;
    double t0 = ddp_now();
    for (int i = 0; i < d->bucket_count; i++) {
        ddp_bucket *b = &d->buckets[i];
        if (st == FG_OK) {
            st = finish_bucket(d, b, err);
        } else if (d->overlap && b->request) { /* every request is waited exactly once */
            fg_error ignored = {0};
            d->comm->wait(d->comm_state, b->request, &ignored);
            b->request = NULL;
        }
    }
    ddp_step_timing *t = &d->timing;
    t->wait = ddp_now() - t0;
    union_of_intervals(d, t->backward_end, &t->comm, &t->hidden);
    t->started_early = 0;
    for (int i = 0; i < d->bucket_count; i++)
        t->started_early += d->buckets[i].started < t->backward_end;
    return st;
}

void ddp_buckets_drain(ddp *d)
{
    for (int i = 0; d->overlap && i < d->bucket_count; i++) {
        if (!d->buckets[i].request) continue;
        fg_error e = {0};
        d->comm->wait(d->comm_state, d->buckets[i].request, &e);
        d->buckets[i].request = NULL;
    }
    d->bucket_count = 0;
}

void ddp_report_step(ddp *d)
{
    const ddp_step_timing *t = &d->timing;
    d->total_wait += t->wait;
    d->total_comm += t->comm;
    d->total_hidden += t->hidden;
    int64_t step = d->steps + 1; /* the step being finished; steps counts completed ones */
    double hidden_frac = t->comm > 0 ? t->hidden / t->comm : 0;
    if (d->host->log)
        d->host->log(d->host, FG_LOG_DEBUG, "rank %d step %lld: backward ended t=%.6f; %d "
                     "buckets, %d started before it; all-reduce in flight %.3f ms (%.0f%% of "
                     "it before backward ended), waited %.3f ms after backward", d->topo.rank,
                     (long long)step, t->backward_end, d->bucket_count, t->started_early,
                     1e3 * t->comm, 100 * hidden_frac, 1e3 * t->wait);
    if (d->host->metric && d->topo.rank == 0) {
        d->host->metric(d->host, "ddp/comm_wait_s", t->wait, step);
        d->host->metric(d->host, "ddp/comm_s", t->comm, step);
        d->host->metric(d->host, "ddp/comm_hidden_frac", hidden_frac, step);
    }
    /* The step split the throughput callback shows (every rank: each one's trainer
     * carries its own): the wait after backward is the exposed part, the rest of the
     * all-reduce time ran hidden behind backward. */
    if (d->host->metric) {
        double hidden = t->comm > t->wait ? t->comm - t->wait : 0;
        d->host->metric(d->host, "time/grad_sync_s", t->wait, step);
        d->host->metric(d->host, "time/comm_s", t->comm, step);
        d->host->metric(d->host, "time/comm_hidden_s", hidden, step);
    }
}
