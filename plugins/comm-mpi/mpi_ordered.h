/* [comm] ordered_sums = true: an all_reduce sum (or avg) of f32, f64, i32 or i64 as an
 * all_gather of every rank's buffer and a sum on each rank in rank order,
 * ((r0 + r1) + r2) + ..., the same bits on every rank and in every run whatever MPI's
 * algorithm: what one device in [model] batch_groups adds (its groups in order), so ddp on
 * G ranks and one device in G groups agree bit for bit. Costs world_size times the buffer in
 * host memory and traffic per call: a checking mode. */
#ifndef FULGUR_COMM_MPI_ORDERED_H
#define FULGUR_COMM_MPI_ORDERED_H

#include "mpi_comm.h"

/* Whether the ordered path takes this all_reduce (sums and averages; max is any order's). */
int fg_mpi_ordered_applies(const fg_mpi_comm *c, uint32_t op);
/* Starts the all_gather into the request's own buffer (world_size * count values). */
fg_status fg_mpi_ordered_start(fg_mpi_comm *c, fg_mpi_request *r, void *buf, size_t count,
                               uint32_t dtype, fg_error *err);
/* After the all_gather completed: the rank-ordered sum into r->buf; frees the buffer (also
 * after a failure, with done = 0). */
void fg_mpi_ordered_finish(const fg_mpi_comm *c, fg_mpi_request *r, int done);

#endif
