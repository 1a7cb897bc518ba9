/* fp8-mixed's amax histories reduced across the replicas once per optimizer step
 * (Transformer Engine's reduce_amax): every replica then computes the same scales from the
 * same histories. Built at setup from the model's fp8_amax_* buffers (linear_fp8.c), run
 * after the step's last micro-batch, before the optimizer step: across processes (ddp,
 * sharded) a max all-reduce of each run of adjacent histories in the primary replica's
 * buffers over the ranks' comm; across the whole-model replicas of one process (strategy.dp)
 * the runs of every replica copied to the host after a sync of its queue, max-reduced there
 * in replica order and copied back to each. */
#ifndef FG_FP8_AMAX_H
#define FG_FP8_AMAX_H

#include <stddef.h>

#include "fulgur/backend.h"
#include "model.h"
#include "ranks.h"

typedef struct fg_fp8_amax_sync {
    size_t *offset, *count; /* runs of adjacent histories, floats into the buffer region;
                             * one block, offset's */
    int runs;               /* 0: nothing to reduce (no fp8, or one rank) */
    size_t floats;          /* in all runs */
    fg_ranks ranks;
    const fg_backend_vtable *be;
    void *bs, *queue;   /* the primary replica's queue */
    void *native_queue; /* its native handle where the comm orders by queues; else NULL */
    float *buffers;     /* the primary replica's buffer region */
    int replicas;       /* whole-model replicas in this process (> 1: reduced on the host) */
    void **stages;      /* (replicas) their train stages, the primary first */
    float *host;        /* ((replicas + 1) * floats) each replica's runs, packed, then their max;
                         * in stages' block */
} fg_fp8_amax_sync;

/* The runs of model m's amax histories when its fit spans ranks > 1 or replicas > 1 whole-
 * model stages in this process (else runs 0), in the buffers of primary (a replica on
 * queue; NULL: this rank holds none). stages: the train stages holding the whole model
 * (fg_train_whole_stages), each of which gets the max. A rank whose primary replica does not hold
 * every buffer (a pipeline stage), or none, is refused: its histories are not the other
 * ranks'; so are several replicas in each of several processes. */
fg_status fg_fp8_amax_sync_init(fg_fp8_amax_sync *s, const fg_model *m, const fg_ranks *ranks,
                                const fg_backend_vtable *be, void *bs, void *queue,
                                fg_replica *primary, void *const *stages, int replicas,
                                fg_error *err);
void fg_fp8_amax_sync_free(fg_fp8_amax_sync *s);
/* Max all-reduces the histories: across processes ordered on the replica's queue where the
 * comm orders by queues (comm.nccl), else after a sync of it (comm.mpi); across the
 * replicas of one process through the host, after a sync of each replica's queue. */
fg_status fg_fp8_amax_sync_step(fg_fp8_amax_sync *s, fg_error *err);

#endif
