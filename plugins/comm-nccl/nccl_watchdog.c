/* The watchdog: one thread per comm.nccl instance, polling the events of the operations in
 * flight every 50 ms. It never retires an operation (its caller does, so that a started
 * all-reduce's request stays valid until wait); it only ends the group when one runs past
 * timeout_s or NCCL reports an asynchronous error. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nccl_comm.h"

#define POLL_NS 50000000L

void nccl_abort(nccl_state *s, const char *fmt, ...)
{
    pthread_mutex_lock(&s->lock);
    int first = !s->aborted;
    if (first) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->abort_message, sizeof s->abort_message, fmt, ap);
        va_end(ap);
        s->aborted = 1;
    }
    pthread_mutex_unlock(&s->lock);
    if (!first) return;
    fprintf(stderr, "fulgur: %s\n", s->abort_message);
    pthread_mutex_lock(&s->call_lock);
    ncclComm_t comm = s->world_group.comm;
    s->world_group.comm = NULL; /* no later call reaches the aborted handle */
    if (comm) ncclCommAbort(comm);
    pthread_mutex_unlock(&s->call_lock);
}

ncclResult_t nccl_async_error(nccl_state *s, ncclResult_t *state)
{
    pthread_mutex_lock(&s->call_lock);
    ncclResult_t r = ncclInvalidUsage;
    *state = ncclInvalidUsage;
    if (s->world_group.comm) r = ncclCommGetAsyncError(s->world_group.comm, state);
    pthread_mutex_unlock(&s->call_lock);
    return r;
}

void nccl_last_error(nccl_state *s, char *out, size_t size)
{
    pthread_mutex_lock(&s->call_lock);
    const char *m = ncclGetLastError(s->world_group.comm);
    snprintf(out, size, "%s", m ? m : "");
    pthread_mutex_unlock(&s->call_lock);
}

static void describe(const nccl_state *s, const nccl_op *op, char *out, size_t size)
{
    if (op->peer >= 0)
        snprintf(out, size, "rank %d: %s of %zu %s values %s rank %d (p2p #%llu)", s->topo.rank,
                 op->name, op->count, fg_dtype_name((fg_dtype)op->dtype),
                 strcmp(op->name, "send") == 0 ? "to" : "from", op->peer,
                 (unsigned long long)op->seq);
    else
        snprintf(out, size, "rank %d: %s of %zu %s values (collective #%llu)", s->topo.rank,
                 op->name, op->count, fg_dtype_name((fg_dtype)op->dtype),
                 (unsigned long long)op->seq);
}

/* One pass: the oldest operation still running, and whether it is late. */
static void inspect(nccl_state *s)
{
    nccl_group *g = &s->world_group;
    const nccl_op *oldest = NULL;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < NCCL_RING; i++) {
        nccl_op *op = &g->ring[i];
        if (!op->active) continue;
        if (op->captured || cudaEventQuery(op->done) != cudaErrorNotReady) {
            if (!op->owned) op->active = 0; /* stream-ordered, nobody waits: done */
            continue;
        }
        if (!oldest || op->started < oldest->started) oldest = op;
    }
    nccl_op copy;
    if (oldest) copy = *oldest;
    pthread_mutex_unlock(&s->lock);
    char what[256], last[256];
    ncclResult_t state = ncclSuccess;
    if (!s->aborted) nccl_async_error(s, &state);
    if (state != ncclSuccess && state != ncclInProgress && !s->aborted) {
        if (oldest) describe(s, &copy, what, sizeof what);
        nccl_last_error(s, last, sizeof last);
        nccl_abort(s, "comm.nccl: %s: NCCL error: %s (%s); communicator aborted",
                   oldest ? what : "between operations", ncclGetErrorString(state), last);
    } else if (oldest && nccl_now() - copy.started > s->timeout_s) {
        describe(s, &copy, what, sizeof what);
        nccl_abort(s, "comm.nccl: %s timed out after %g s: a peer is stopped, dead or busy "
                   "outside collectives; communicator aborted (ncclCommAbort)", what,
                   s->timeout_s);
    }
}

static void *watchdog_main(void *arg)
{
    nccl_state *s = arg;
    cudaSetDevice(s->device);
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += POLL_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->wake, &s->lock, &until);
        if (s->stop || s->aborted) continue;
        pthread_mutex_unlock(&s->lock);
        inspect(s);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

fg_status nccl_watchdog_start(nccl_state *s, fg_error *err)
{
    int rc = pthread_create(&s->watchdog, NULL, watchdog_main, s);
    if (rc != 0)
        return fg_error_set(err, FG_INTERNAL, "comm.nccl: cannot start the watchdog thread: %s",
                            strerror(rc));
    s->watchdog_running = 1;
    return FG_OK;
}

void nccl_watchdog_stop(nccl_state *s)
{
    if (!s->watchdog_running) return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->watchdog, NULL);
    s->watchdog_running = 0;
}

fg_status nccl_track(nccl_state *s, nccl_group *g, const nccl_op *op, cudaStream_t stream,
                     nccl_op **slot, fg_error *err)
{
    pthread_mutex_lock(&s->lock);
    nccl_op *free_slot = NULL;
    for (int i = 0; i < NCCL_RING && !free_slot; i++) {
        int k = (g->next + i) % NCCL_RING;
        nccl_op *o = &g->ring[k];
        if (o->active && !o->owned && (o->captured || cudaEventQuery(o->done) == cudaSuccess))
            o->active = 0; /* disowned and complete (or a graph's): the watchdog would retire it */
        if (!o->active) {
            free_slot = &g->ring[k];
            g->next = (k + 1) % NCCL_RING;
        }
    }
    enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(stream, &capturing);
    if (free_slot && e == cudaSuccess) {
        cudaEvent_t ev = free_slot->done;
        *free_slot = *op;
        free_slot->done = ev;
        free_slot->started = nccl_now();
        free_slot->captured = capturing != cudaStreamCaptureStatusNone;
        e = cudaEventRecord(ev, stream);
        free_slot->active = e == cudaSuccess;
    }
    pthread_mutex_unlock(&s->lock);
    if (!free_slot)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: more than %d operations in "
                            "flight (started and not waited)", NCCL_RING);
    if (e != cudaSuccess) return nccl_cuda_fail(e, "cudaEventRecord", err);
    *slot = free_slot;
    return FG_OK;
}

fg_status nccl_poll(nccl_state *s, nccl_op *slot, int *done, fg_error *err)
{
    *done = 0;
    if (s->aborted) return fg_error_set(err, FG_FATAL, "%s", s->abort_message);
    if (slot->captured)
        return fg_error_set(err, FG_UNAVAILABLE, "comm.nccl: %s waited for on the host while "
                            "its stream captures a CUDA graph (a graph holds stream-ordered "
                            "operations only: wait_on_queue)", slot->name);
    cudaError_t e = cudaEventQuery(slot->done);
    if (e == cudaErrorNotReady) return FG_OK;
    if (e != cudaSuccess) return nccl_cuda_fail(e, "cudaEventQuery", err);
    pthread_mutex_lock(&s->lock);
    slot->active = 0;
    pthread_mutex_unlock(&s->lock);
    *done = 1;
    return FG_OK;
}

void nccl_disown(nccl_state *s, nccl_op *slot)
{
    pthread_mutex_lock(&s->lock);
    slot->owned = 0;
    pthread_mutex_unlock(&s->lock);
}

fg_status nccl_wait_op(nccl_state *s, nccl_op *slot, fg_error *err)
{
    long nap = 5000; /* ns, doubling to 100 us: short collectives finish without a long sleep */
    for (;;) {
        int done = 0;
        fg_status st = nccl_poll(s, slot, &done, err);
        if (st != FG_OK) {
            pthread_mutex_lock(&s->lock);
            slot->active = 0;
            pthread_mutex_unlock(&s->lock);
            return st;
        }
        if (done) return FG_OK;
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        if (nap < 100000) nap *= 2;
    }
}
