/* Where this process stands among a fit's processes: its rank, how many there are, and the
 * comm they agree over (NULL when alone: the runtime's watched comm, fg_runtime_comm, so
 * a fatal failure sets the process's exit code). Built by the trainer (trainer_parts.c) for the
 * parts that agree across ranks (rank_agreement.h, requeue.h). */
#ifndef FG_RANKS_H
#define FG_RANKS_H

#include "fulgur/comm.h"

typedef struct fg_ranks {
    const fg_comm_vtable *comm;
    void *comm_state;
    int rank, world_size;
} fg_ranks;

#endif
