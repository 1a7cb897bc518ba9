/* Comm plugins: collectives over a process group. Buffers live where the plugin says
 * (host memory for mpi, device memory for nccl). Every call returns within the configured
 * timeout or fails with FG_FATAL naming the collective and the lagging ranks.
 * Thread rule: one thread issues collectives, in the same order on every rank. */
#ifndef FULGUR_COMM_H
#define FULGUR_COMM_H

#include "fulgur/plugin.h"
#include "fulgur/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fg_reduce_op { FG_REDUCE_SUM = 1, FG_REDUCE_AVG = 2, FG_REDUCE_MAX = 3 } fg_reduce_op;

typedef struct fg_comm_topology {
    uint32_t struct_size;
    int32_t rank, world_size;
    int32_t local_rank, local_size; /* within this node */
    int32_t node, node_count;
} fg_comm_topology;

typedef struct fg_comm_vtable {
    uint32_t struct_size;
    fg_status (*topology)(void *state, fg_comm_topology *out, fg_error *err);
    /* queue: the native handle (fg_backend_vtable.queue_native: a cudaStream_t) of the
     * backend queue the buffers are ordered on; NULL for host memory */
    fg_status (*all_reduce)(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                            uint32_t op, fg_error *err);
    /* send holds world_size * recv_count elements; rank r receives block r reduced */
    fg_status (*reduce_scatter)(void *state, void *queue, const void *send, void *recv,
                                size_t recv_count, uint32_t dtype, uint32_t op, fg_error *err);
    /* recv holds world_size * send_count elements, block r from rank r */
    fg_status (*all_gather)(void *state, void *queue, const void *send, void *recv,
                            size_t send_count, uint32_t dtype, fg_error *err);
    fg_status (*broadcast)(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                           int root, fg_error *err);
    fg_status (*send)(void *state, void *queue, const void *buf, size_t count, uint32_t dtype,
                      int peer, fg_error *err);
    fg_status (*recv)(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                      int peer, fg_error *err);
    fg_status (*barrier)(void *state, fg_error *err);
    /* Non-blocking all_reduce, for overlapping communication with compute: starts the
     * reduction of buf and returns a request at once. buf must not be read or written until
     * wait() returned for the request. Started collectives count in the one issue order of
     * the thread rule; waits may come in any order. Every request is waited exactly once. */
    fg_status (*all_reduce_start)(void *state, void *queue, void *buf, size_t count,
                                  uint32_t dtype, uint32_t op, void **request, fg_error *err);
    /* Advances started collectives without blocking; *done = 1 when this request has
     * completed (it must still be waited). Lets a caller drive progress from its own loop. */
    fg_status (*test)(void *state, void *request, int *done, fg_error *err);
    /* Completes a started collective within the timeout and frees the request (also when
     * it fails). */
    fg_status (*wait)(void *state, void *request, fg_error *err);
    /* Non-blocking collectives with a count per rank (for sharded state,
     * where a range of a flat buffer meets the ranks' contiguous shards unevenly). counts
     * has world_size entries and is copied before return; requests as all_reduce_start's.
     * reduce_scatter_v: send holds sum(counts) elements, rank r's block (counts[r]
     * elements, in rank order) reduced across ranks lands in recv on rank r; send == recv
     * reduces in place (the result at the start of the buffer).
     * all_gather_v: rank r sends counts[r] elements from send; recv gets every block in
     * rank order (sum(counts) elements); send must not overlap recv. */
    fg_status (*reduce_scatter_v_start)(void *state, void *queue, const void *send, void *recv,
                                        const size_t *counts, uint32_t dtype, uint32_t op,
                                        void **request, fg_error *err);
    fg_status (*all_gather_v_start)(void *state, void *queue, const void *send, void *recv,
                                    const size_t *counts, uint32_t dtype, void **request,
                                    fg_error *err);
    /* Ends the whole job after an unrecoverable error on this rank, so that ranks blocked
     * in a collective with it do not wait out the timeout: prints reason naming this rank
     * and stops every rank with exit_code. Does not return where the library can abort. */
    void (*abort)(void *state, int exit_code, const char *reason);
    /* ABI 1.5. Completes a started collective on the device, not on the host: work the
     * caller enqueues on queue after this call sees its result, and the call returns at
     * once (no host synchronisation). Frees the request as wait() does; the plugin still
     * bounds the operation by its timeout. A plugin offers it only where buffers are device
     * memory ordered by queues (comm.nccl); all_reduce_start given a queue then orders the
     * collective after the work enqueued on that queue before the call, also without a
     * host synchronisation, and runs it on its own stream so it overlaps later work. */
    fg_status (*wait_on_queue)(void *state, void *request, void *queue, fg_error *err);
} fg_comm_vtable;

#ifdef __cplusplus
}
#endif
#endif
