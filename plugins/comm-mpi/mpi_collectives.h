/* The fg_comm_vtable functions of comm.mpi (mpi_collectives.c). Host memory only: the
 * queue argument is ignored, the caller has synchronised its device work. */
#ifndef FULGUR_COMM_MPI_COLLECTIVES_H
#define FULGUR_COMM_MPI_COLLECTIVES_H

#include "mpi_comm.h"

fg_status fg_mpi_all_reduce(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                            uint32_t op, fg_error *err);
fg_status fg_mpi_reduce_scatter(void *state, void *queue, const void *send, void *recv,
                                size_t recv_count, uint32_t dtype, uint32_t op, fg_error *err);
fg_status fg_mpi_all_gather(void *state, void *queue, const void *send, void *recv,
                            size_t send_count, uint32_t dtype, fg_error *err);
fg_status fg_mpi_broadcast(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                           int root, fg_error *err);
fg_status fg_mpi_send(void *state, void *queue, const void *buf, size_t count, uint32_t dtype,
                      int peer, fg_error *err);
fg_status fg_mpi_recv(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                      int peer, fg_error *err);
fg_status fg_mpi_barrier(void *state, fg_error *err);
fg_status fg_mpi_all_reduce_start(void *state, void *queue, void *buf, size_t count,
                                  uint32_t dtype, uint32_t op, void **request, fg_error *err);
fg_status fg_mpi_test(void *state, void *request, int *done, fg_error *err);
fg_status fg_mpi_wait(void *state, void *request, fg_error *err);
/* mpi_collectives_v.c */
fg_status fg_mpi_reduce_scatter_v_start(void *state, void *queue, const void *send, void *recv,
                                        const size_t *counts, uint32_t dtype, uint32_t op,
                                        void **request, fg_error *err);
fg_status fg_mpi_all_gather_v_start(void *state, void *queue, const void *send, void *recv,
                                    const size_t *counts, uint32_t dtype, void **request,
                                    fg_error *err);

#endif
