/* The fg_comm_vtable functions comm.mpi exports (mpi_staged.c): each one runs the host
 * collective of mpi_collectives.c directly, or, when staging is on (mpi_staging.h), on a
 * pinned host copy of the buffers, copying results back (started ones in wait()). */
#ifndef FULGUR_COMM_MPI_STAGED_H
#define FULGUR_COMM_MPI_STAGED_H

#include "mpi_comm.h"

fg_status fg_mpi_staged_all_reduce(void *state, void *queue, void *buf, size_t count,
                                   uint32_t dtype, uint32_t op, fg_error *err);
fg_status fg_mpi_staged_reduce_scatter(void *state, void *queue, const void *send, void *recv,
                                       size_t recv_count, uint32_t dtype, uint32_t op,
                                       fg_error *err);
fg_status fg_mpi_staged_all_gather(void *state, void *queue, const void *send, void *recv,
                                   size_t send_count, uint32_t dtype, fg_error *err);
fg_status fg_mpi_staged_broadcast(void *state, void *queue, void *buf, size_t count,
                                  uint32_t dtype, int root, fg_error *err);
fg_status fg_mpi_staged_send(void *state, void *queue, const void *buf, size_t count,
                             uint32_t dtype, int peer, fg_error *err);
fg_status fg_mpi_staged_recv(void *state, void *queue, void *buf, size_t count,
                             uint32_t dtype, int peer, fg_error *err);
fg_status fg_mpi_staged_all_reduce_start(void *state, void *queue, void *buf, size_t count,
                                         uint32_t dtype, uint32_t op, void **request,
                                         fg_error *err);
fg_status fg_mpi_staged_reduce_scatter_v_start(void *state, void *queue, const void *send,
                                               void *recv, const size_t *counts,
                                               uint32_t dtype, uint32_t op, void **request,
                                               fg_error *err);
fg_status fg_mpi_staged_all_gather_v_start(void *state, void *queue, const void *send,
                                           void *recv, const size_t *counts, uint32_t dtype,
                                           void **request, fg_error *err);

/* For fg_mpi_wait: a staged request's result goes back to device memory (when st is
 * FG_OK) and its host region is released; returns st or the copy's failure. */
fg_status fg_mpi_unstage_request(fg_mpi_comm *c, fg_mpi_request *r, fg_status st,
                                 fg_error *err);

#endif
