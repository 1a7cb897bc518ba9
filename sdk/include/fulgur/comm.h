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
    /* queue: the backend queue the buffers are ordered on (NULL for host memory) */
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
} fg_comm_vtable;

#ifdef __cplusplus
}
#endif
#endif
