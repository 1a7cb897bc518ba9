/* comm.nccl internals: one NCCL communicator per process group (today the world: the
 * vtable has no sub-group call yet), bootstrapped over MPI, and a watchdog thread.
 *
 * Every operation is enqueued on a CUDA stream (the caller's queue, or the plugin's own
 * for host buffers and barriers) and an event is recorded after it into a ring the
 * watchdog polls. An operation still running timeout_s after it was enqueued, or an
 * asynchronous NCCL error (a peer died), makes the watchdog print one line naming the
 * operation, mark the group aborted and call ncclCommAbort: kernels stuck waiting for a
 * peer return, and every later call fails with FG_FATAL and that line. */
#ifndef FULGUR_COMM_NCCL_H
#define FULGUR_COMM_NCCL_H

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>

#include "fulgur/comm.h"

#define NCCL_RING 1024                     /* operations in flight at most */
#define NCCL_SCRATCH_BYTES (8u << 20)      /* device staging for host buffers */

typedef struct nccl_op {
    const char *name;  /* "all_reduce", ... */
    size_t count;
    uint32_t dtype;
    uint64_t seq;      /* collective number (K of "collective #K"), p2p number for send/recv */
    int peer;          /* send/recv: the other rank; -1 for collectives */
    double started;    /* monotonic seconds when enqueued */
    cudaEvent_t done;  /* recorded after the operation */
    int active;
    int owned;         /* a caller will wait for it; else the watchdog retires it when done */
    int captured;      /* enqueued while its stream captured a CUDA graph: `done` is a node of
                        * the graph (it completes at each launch), never queried or waited */
} nccl_op;

typedef struct nccl_group {
    ncclComm_t comm;
    int rank, size;
    uint64_t issued, p2p_issued;
    nccl_op ring[NCCL_RING];
    int next;                    /* where the search for a free slot starts */
} nccl_group;

typedef struct nccl_state {
    const fg_host *host;
    int owns_mpi;
    MPI_Comm world;
    fg_comm_topology topo;
    int device;
    double timeout_s;
    cudaStream_t stream;         /* host-buffer staging, barriers, started collectives */
    cudaEvent_t ordered;         /* recorded on a caller's queue for stream-ordered starts */
    void *scratch;               /* NCCL_SCRATCH_BYTES on the device */
    nccl_group world_group;

    /* Held around every NCCL call on world_group.comm: NCCL forbids concurrent calls on one
     * communicator, and an abort racing the watchdog's polling would free what the other
     * thread uses. An abort takes the handle (set to NULL) under it. */
    pthread_mutex_t call_lock;

    pthread_t watchdog;
    int watchdog_running;
    pthread_mutex_t lock;        /* ring, aborted, stop */
    pthread_cond_t wake;
    int stop;
    volatile int aborted;        /* set once by the watchdog (or a failed call) */
    char abort_message[FG_ERROR_MESSAGE_MAX];
} nccl_state;

double nccl_now(void);
fg_status nccl_cuda_fail(cudaError_t e, const char *call, fg_error *err);
fg_status nccl_fail(nccl_state *s, ncclResult_t r, const char *call, fg_error *err);
/* Waits for a non-blocking communicator's pending call (ncclInProgress) within timeout_s. */
ncclResult_t nccl_settle(nccl_state *s, ncclResult_t r);
/* ncclCommGetAsyncError under call_lock (ncclInvalidUsage once the handle is gone). */
ncclResult_t nccl_async_error(nccl_state *s, ncclResult_t *state);
/* ncclGetLastError of the communicator (or the library's) under call_lock, copied. */
void nccl_last_error(nccl_state *s, char *out, size_t size);

/* nccl_watchdog.c */
fg_status nccl_watchdog_start(nccl_state *s, fg_error *err);
void nccl_watchdog_stop(nccl_state *s);
/* Records the operation's event on stream into the ring (waiting for a free slot). */
fg_status nccl_track(nccl_state *s, nccl_group *g, const nccl_op *op, cudaStream_t stream,
                     nccl_op **slot, fg_error *err);
/* 1 when the tracked operation completed (and retires it); an error once aborted. */
fg_status nccl_poll(nccl_state *s, nccl_op *slot, int *done, fg_error *err);
/* Until the operation completes or the group is aborted. */
fg_status nccl_wait_op(nccl_state *s, nccl_op *slot, fg_error *err);
/* Hands the operation to the watchdog, which retires it once complete (and still times it
 * out): its caller no longer waits for it. */
void nccl_disown(nccl_state *s, nccl_op *slot);
/* Marks the group aborted with a message (first one wins) and aborts the communicator. */
void nccl_abort(nccl_state *s, const char *fmt, ...);

/* nccl_ops.c: the fg_comm_vtable functions */
fg_status nccl_all_reduce(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                          uint32_t op, fg_error *err);
fg_status nccl_reduce_scatter(void *state, void *queue, const void *send, void *recv,
                              size_t recv_count, uint32_t dtype, uint32_t op, fg_error *err);
fg_status nccl_all_gather(void *state, void *queue, const void *send, void *recv,
                          size_t send_count, uint32_t dtype, fg_error *err);
fg_status nccl_broadcast(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                         int root, fg_error *err);
fg_status nccl_send(void *state, void *queue, const void *buf, size_t count, uint32_t dtype,
                    int peer, fg_error *err);
fg_status nccl_recv(void *state, void *queue, void *buf, size_t count, uint32_t dtype, int peer,
                    fg_error *err);
fg_status nccl_barrier(void *state, fg_error *err);
fg_status nccl_all_reduce_start(void *state, void *queue, void *buf, size_t count,
                                uint32_t dtype, uint32_t op, void **request, fg_error *err);
fg_status nccl_test(void *state, void *request, int *done, fg_error *err);
fg_status nccl_wait(void *state, void *request, fg_error *err);
fg_status nccl_wait_on_queue(void *state, void *request, void *queue, fg_error *err);

#endif
