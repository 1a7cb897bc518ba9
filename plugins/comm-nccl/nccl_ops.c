/* The collectives of comm.nccl.
 *
 * Device buffers with a queue (the backend's cudaStream_t) are stream-ordered: the call
 * enqueues the operation and returns, later work on that stream sees the result (NCCL's
 * own model); the watchdog bounds it by timeout_s. Without a queue the call completes
 * before returning, on the plugin's stream. Host buffers (pageable or pinned, what
 * strategy.ddp passes for its metric sums and model buffers) are staged through a device
 * scratch buffer of NCCL_SCRATCH_BYTES and completed before returning. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "nccl_comm.h"

static fg_status map_dtype(uint32_t dtype, const char *what, ncclDataType_t *out, fg_error *err)
{
    switch (dtype) {
    case FG_F32: *out = ncclFloat32; return FG_OK;
    case FG_F16: *out = ncclFloat16; return FG_OK;
    case FG_BF16: *out = ncclBfloat16; return FG_OK;
    case FG_F64: *out = ncclFloat64; return FG_OK;
    case FG_I32: *out = ncclInt32; return FG_OK;
    case FG_I64: *out = ncclInt64; return FG_OK;
    case FG_U8: *out = ncclUint8; return FG_OK;
    }
    return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: %s: unknown dtype %u", what, dtype);
}

static fg_status map_op(uint32_t op, const char *what, ncclRedOp_t *out, fg_error *err)
{
    switch (op) {
    case FG_REDUCE_SUM: *out = ncclSum; return FG_OK;
    case FG_REDUCE_AVG: *out = ncclAvg; return FG_OK;
    case FG_REDUCE_MAX: *out = ncclMax; return FG_OK;
    }
    return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: %s: unknown reduction %u", what, op);
}

static int is_host(const void *p)
{
    struct cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error of an unknown pointer */
        return 1;
    }
    return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost;
}

/* One operation: where its buffers are, what to stage, how to enqueue it. */
typedef struct call {
    const char *name;
    size_t count;        /* for messages */
    uint32_t dtype;
    int peer;
    const void *in;      /* host data to stage in (NULL: none) */
    size_t in_bytes;
    void *out;           /* host data to stage out */
    size_t out_bytes;
    size_t out_offset;   /* where in scratch the output lies */
} call;

typedef enum op_kind { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, SEND, RECV } op_kind;

typedef struct args {
    op_kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dt;
    ncclRedOp_t op;
    int root;      /* broadcast root, or the send/recv peer */
    size_t split;  /* scratch offset of the output when staged */
} args;

/* Enqueues the operation on the caller's buffers, or on their staged copies in scratch
 * (the input at 0, the output at split; in place when split is 0). */
static ncclResult_t enqueue_locked(ncclComm_t comm, const args *a, void *scratch,
                                   cudaStream_t st)
{
    const void *in = scratch ? scratch : a->send;
    void *out = scratch ? (char *)scratch + a->split : a->recv;
    switch (a->kind) {
    case ALL_REDUCE: return ncclAllReduce(in, out, a->count, a->dt, a->op, comm, st);
    case REDUCE_SCATTER: return ncclReduceScatter(in, out, a->count, a->dt, a->op, comm, st);
    case ALL_GATHER: return ncclAllGather(in, out, a->count, a->dt, comm, st);
    case BROADCAST: return ncclBroadcast(in, out, a->count, a->dt, a->root, comm, st);
    case SEND: return ncclSend(in, a->count, a->dt, a->root, comm, st);
    case RECV: return ncclRecv(out, a->count, a->dt, a->root, comm, st);
    }
    return ncclInvalidArgument;
}

/* The call under call_lock; ncclInvalidUsage once an abort took the handle. */
static ncclResult_t enqueue(nccl_state *s, const args *a, void *scratch, cudaStream_t st)
{
    pthread_mutex_lock(&s->call_lock);
    ncclComm_t comm = s->world_group.comm;
    ncclResult_t r = comm ? enqueue_locked(comm, a, scratch, st) : ncclInvalidUsage;
    pthread_mutex_unlock(&s->call_lock);
    return r;
}

/* Stages host buffers when there are any, enqueues, tracks, and waits unless the caller's
 * stream orders device buffers. */
static fg_status run(nccl_state *s, cudaStream_t queue, int host, const call *c, const args *a,
                     fg_error *err)
{
    if (s->aborted) return fg_error_set(err, FG_FATAL, "%s", s->abort_message);
    nccl_group *g = &s->world_group;
    cudaStream_t stream = host || !queue ? s->stream : queue;
    cudaError_t e = cudaSuccess;
    if (host) {
        if (c->in_bytes > NCCL_SCRATCH_BYTES || c->out_offset + c->out_bytes > NCCL_SCRATCH_BYTES)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: %s of %zu values in host "
                                "memory: more than the %u MiB staging buffer; pass device memory",
                                c->name, c->count, NCCL_SCRATCH_BYTES >> 20);
        if (queue) e = cudaStreamSynchronize(queue); /* what the caller ordered before us */
        if (e == cudaSuccess && c->in)
            e = cudaMemcpyAsync(s->scratch, c->in, c->in_bytes, cudaMemcpyHostToDevice, stream);
        if (e != cudaSuccess) return nccl_cuda_fail(e, "staging a host buffer", err);
    }
    int ordered = !host && queue; /* returns once enqueued */
    nccl_op op = {c->name, c->count, c->dtype, c->peer >= 0 ? ++g->p2p_issued : ++g->issued,
                  c->peer, 0, 0, 0, !ordered, 0};
    ncclResult_t r = nccl_settle(s, enqueue(s, a, host ? s->scratch : NULL, stream));
    if (r != ncclSuccess) return nccl_fail(s, r, c->name, err);
    /* Tracked right after the collective and waited for before the copy back: a copy into
     * pageable host memory returns only once it completed, so a stalled peer would block it
     * where the watchdog cannot see it. */
    nccl_op *slot;
    fg_status st = nccl_track(s, g, &op, stream, &slot, err);
    if (st != FG_OK || ordered) return st;
    st = nccl_wait_op(s, slot, err);
    if (st != FG_OK || !host || !c->out) return st;
    e = cudaMemcpyAsync(c->out, (char *)s->scratch + c->out_offset, c->out_bytes,
                        cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    return e == cudaSuccess ? FG_OK : nccl_cuda_fail(e, "copying a staged result back", err);
}

/* ---- the operations ------------------------------------------------------------------ */

static fg_status check_peer(const nccl_state *s, int peer, const char *what, fg_error *err)
{
    if (peer >= 0 && peer < s->topo.world_size && peer != s->topo.rank) return FG_OK;
    return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: %s: peer %d is not another rank "
                        "of 0..%d", what, peer, s->topo.world_size - 1);
}

fg_status nccl_all_reduce(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                          uint32_t op, fg_error *err)
{
    nccl_state *s = state;
    args a = {ALL_REDUCE, buf, buf, count, ncclFloat32, ncclSum, 0, 0};
    fg_status st = map_dtype(dtype, "all_reduce", &a.dt, err);
    if (st == FG_OK) st = map_op(op, "all_reduce", &a.op, err);
    if (st != FG_OK) return st;
    size_t bytes = count * fg_dtype_size((fg_dtype)dtype);
    call c = {"all_reduce", count, dtype, -1, buf, bytes, buf, bytes, 0};
    return run(s, queue, is_host(buf), &c, &a, err);
}

fg_status nccl_reduce_scatter(void *state, void *queue, const void *send, void *recv,
                              size_t recv_count, uint32_t dtype, uint32_t op, fg_error *err)
{
    nccl_state *s = state;
    size_t es = fg_dtype_size((fg_dtype)dtype), in = recv_count * es * (size_t)s->topo.world_size;
    args a = {REDUCE_SCATTER, send, recv, recv_count, ncclFloat32, ncclSum, 0, in};
    fg_status st = map_dtype(dtype, "reduce_scatter", &a.dt, err);
    if (st == FG_OK) st = map_op(op, "reduce_scatter", &a.op, err);
    if (st != FG_OK) return st;
    call c = {"reduce_scatter", recv_count, dtype, -1, send, in, recv, recv_count * es, in};
    return run(s, queue, is_host(send) || is_host(recv), &c, &a, err);
}

fg_status nccl_all_gather(void *state, void *queue, const void *send, void *recv,
                          size_t send_count, uint32_t dtype, fg_error *err)
{
    nccl_state *s = state;
    size_t es = fg_dtype_size((fg_dtype)dtype), in = send_count * es;
    args a = {ALL_GATHER, send, recv, send_count, ncclFloat32, ncclSum, 0, in};
    fg_status st = map_dtype(dtype, "all_gather", &a.dt, err);
    if (st != FG_OK) return st;
    call c = {"all_gather", send_count, dtype, -1, send, in, recv, in * (size_t)s->topo.world_size, in};
    return run(s, queue, is_host(send) || is_host(recv), &c, &a, err);
}

fg_status nccl_broadcast(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                         int root, fg_error *err)
{
    nccl_state *s = state;
    args a = {BROADCAST, buf, buf, count, ncclFloat32, ncclSum, root, 0};
    fg_status st = map_dtype(dtype, "broadcast", &a.dt, err);
    if (st == FG_OK && (root < 0 || root >= s->topo.world_size))
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: broadcast: root %d is not a rank "
                          "of 0..%d", root, s->topo.world_size - 1);
    if (st != FG_OK) return st;
    size_t bytes = count * fg_dtype_size((fg_dtype)dtype);
    call c = {"broadcast", count, dtype, -1, buf, bytes, buf, bytes, 0};
    return run(s, queue, is_host(buf), &c, &a, err);
}

fg_status nccl_send(void *state, void *queue, const void *buf, size_t count, uint32_t dtype,
                    int peer, fg_error *err)
{
    nccl_state *s = state;
    args a = {SEND, buf, NULL, count, ncclFloat32, ncclSum, peer, 0};
    fg_status st = map_dtype(dtype, "send", &a.dt, err);
    if (st == FG_OK) st = check_peer(s, peer, "send", err);
    if (st != FG_OK) return st;
    call c = {"send", count, dtype, peer, buf, count * fg_dtype_size((fg_dtype)dtype), NULL, 0, 0};
    return run(s, queue, is_host(buf), &c, &a, err);
}

fg_status nccl_recv(void *state, void *queue, void *buf, size_t count, uint32_t dtype, int peer,
                    fg_error *err)
{
    nccl_state *s = state;
    args a = {RECV, NULL, buf, count, ncclFloat32, ncclSum, peer, 0};
    fg_status st = map_dtype(dtype, "recv", &a.dt, err);
    if (st == FG_OK) st = check_peer(s, peer, "recv", err);
    if (st != FG_OK) return st;
    call c = {"recv", count, dtype, peer, NULL, 0, buf, count * fg_dtype_size((fg_dtype)dtype), 0};
    return run(s, queue, is_host(buf), &c, &a, err);
}

/* An all-reduce of one int on the scratch buffer, completed before returning. */
fg_status nccl_barrier(void *state, fg_error *err)
{
    nccl_state *s = state;
    args a = {ALL_REDUCE, s->scratch, s->scratch, 1, ncclInt32, ncclSum, 0, 0};
    call c = {"barrier", 1, FG_I32, -1, NULL, 0, NULL, 0, 0};
    return run(s, NULL, 0, &c, &a, err);
}

/* Orders the plugin's stream after the work enqueued on the caller's queue so far, with no
 * host synchronisation (nothing to do without a queue). */
static fg_status after_queue(nccl_state *s, void *queue, fg_error *err)
{
    if (!queue) return FG_OK;
    cudaError_t e = cudaEventRecord(s->ordered, (cudaStream_t)queue);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(s->stream, s->ordered, 0);
    return e == cudaSuccess ? FG_OK : nccl_cuda_fail(e, "ordering after the caller's queue", err);
}

/* The request is the operation's ring slot: valid until wait() or wait_on_queue() retires
 * it. Started collectives run on the plugin's stream, so they overlap the caller's. */
fg_status nccl_all_reduce_start(void *state, void *queue, void *buf, size_t count,
                                uint32_t dtype, uint32_t op, void **request, fg_error *err)
{
    nccl_state *s = state;
    nccl_group *g = &s->world_group;
    args a = {ALL_REDUCE, buf, buf, count, ncclFloat32, ncclSum, 0, 0};
    fg_status st = map_dtype(dtype, "all_reduce_start", &a.dt, err);
    if (st == FG_OK) st = map_op(op, "all_reduce_start", &a.op, err);
    if (st == FG_OK && is_host(buf))
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: all_reduce_start needs device "
                          "memory (a host buffer is reduced with all_reduce)");
    if (st == FG_OK && s->aborted) st = fg_error_set(err, FG_FATAL, "%s", s->abort_message);
    if (st != FG_OK) return st;
    st = after_queue(s, queue, err);
    if (st != FG_OK) return st;
    nccl_op rec = {"all_reduce", count, dtype, ++g->issued, -1, 0, 0, 0, 1, 0};
    ncclResult_t r = nccl_settle(s, enqueue(s, &a, NULL, s->stream));
    if (r != ncclSuccess) return nccl_fail(s, r, "all_reduce_start", err);
    nccl_op *slot;
    st = nccl_track(s, g, &rec, s->stream, &slot, err);
    if (st == FG_OK) *request = slot;
    return st;
}

fg_status nccl_test(void *state, void *request, int *done, fg_error *err)
{
    nccl_state *s = state;
    nccl_op *op = request;
    if (!op || !op->active)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: test: not a started operation");
    if (s->aborted) return fg_error_set(err, FG_FATAL, "%s", s->abort_message);
    /* captured into a CUDA graph: it completes at each launch, not now (the caller's queue
     * waits for it on the device, wait_on_queue); a query would fail with
     * cudaErrorCapturedEvent and leave it as the thread's last error */
    cudaError_t e = op->captured ? cudaErrorNotReady : cudaEventQuery(op->done);
    if (e != cudaSuccess && e != cudaErrorNotReady) return nccl_cuda_fail(e, "cudaEventQuery", err);
    *done = e == cudaSuccess;
    return FG_OK;
}

fg_status nccl_wait(void *state, void *request, fg_error *err)
{
    nccl_state *s = state;
    nccl_op *op = request;
    if (!op || !op->active)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: wait: not a started operation");
    return nccl_wait_op(s, op, err);
}

/* The caller's queue waits for the operation's event; the watchdog retires the slot once it
 * completes and still aborts the group if it runs past the timeout. */
fg_status nccl_wait_on_queue(void *state, void *request, void *queue, fg_error *err)
{
    nccl_state *s = state;
    nccl_op *op = request;
    if (!op || !op->active || !op->owned)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: wait_on_queue: not a started "
                            "operation");
    if (!queue)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.nccl: wait_on_queue: queue is NULL "
                            "(use wait)");
    if (s->aborted) {
        nccl_disown(s, op);
        return fg_error_set(err, FG_FATAL, "%s", s->abort_message);
    }
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)queue, op->done, 0);
    nccl_disown(s, op);
    return e == cudaSuccess ? FG_OK : nccl_cuda_fail(e, "cudaStreamWaitEvent", err);
}
