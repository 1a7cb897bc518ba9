/* The launcher's view of this process (srun, mpirun, PMIx, Hydra), cross-checked against
 * MPI's own topology at start-up. Shared by comm.mpi and comm.nccl (their bootstrap). */
#ifndef FULGUR_PLUGIN_COMMON_MPI_LAUNCHER_H
#define FULGUR_PLUGIN_COMMON_MPI_LAUNCHER_H

#include <mpi.h>
#include <stddef.h>

#include "fulgur/comm.h"

/* Collective over `world` (every rank calls it once, after MPI's topology is known).
 * Reads each launcher's per-rank variables that are set, compares them with `mpi`, and
 * agrees on one verdict: when any rank disagrees, every rank returns FG_INVALID_ARGUMENT
 * with the same message, naming the rank, the variable and both values. `who` prefixes
 * messages ("comm.mpi"); `summary` gets one line saying what was checked (debug log). */
fg_status fg_mpi_check_launcher(MPI_Comm world, const fg_comm_topology *mpi, const char *who,
                                char *summary, size_t summary_size, fg_error *err);

#endif
