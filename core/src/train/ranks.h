/* Where this process stands among a fit's processes: its rank, how many there are, and the
 * comm they agree over (NULL when alone). Built by the trainer (trainer_parts.c) for the
 * parts that agree across ranks (rank_agreement.h, requeue.h). */
#ifndef FG_RANKS_H
#define FG_RANKS_H

#include "runtime.h"

typedef struct fg_ranks {
    const fg_instance *comm;
    int rank, world_size;
} fg_ranks;

#endif
