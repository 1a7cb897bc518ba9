/* Starting MPI and finding this rank's place in the job: the bootstrap comm.mpi and
 * comm.nccl share at init (the launcher check that follows is mpi_launcher.h). */
#ifndef FULGUR_PLUGIN_COMMON_MPI_BOOTSTRAP_H
#define FULGUR_PLUGIN_COMMON_MPI_BOOTSTRAP_H

#include <mpi.h>

#include "fulgur/comm.h"

/* MPI_Init_thread at MPI_THREAD_SERIALIZED unless the program already started MPI, which
 * then stays the program's to finalize: *owns_mpi is 1 only when this call started it.
 * FG_UNAVAILABLE when MPI cannot give MPI_THREAD_SERIALIZED; `who` prefixes messages. */
fg_status fg_mpi_start(const char *who, int *owns_mpi, fg_error *err);

/* Rank and size in `world`, local rank and size from its shared-memory split, and the
 * node: the rank of this node's local rank 0 among all local ranks 0. Blocking MPI calls,
 * every rank at once; the launcher bounds a start-up that never completes. */
fg_status fg_mpi_find_topology(MPI_Comm world, fg_comm_topology *topo, const char *who,
                               fg_error *err);

/* status with "who: CALL failed: MPI's error string" for the MPI return code rc. */
fg_status fg_mpi_error(fg_status status, const char *who, const char *call, int rc,
                       fg_error *err);

#endif
