/* fp8-mixed's amax histories reduced across the replicas once per optimizer step
 * (Transformer Engine's reduce_amax): every replica then computes the same scales from the
 * same histories. Built at setup from the model's fp8_amax_* buffers (linear_fp8.c), run
 * after the step's last micro-batch, before the optimizer step: across processes (ddp,
 * sharded) a max all-reduce of each run of adjacent histories in the primary replica's
 * buffers over the ranks' comm; across the stages of one process that hold the same part of
 * the model (fp8_amax_plan.h: strategy.dp's whole-model replicas, strategy.model-parallel's
 * dp_replicas copies of a pipeline stage) the runs of each such stage copied to the host
 * after a sync of its queue, max-reduced there in creation order and copied back to each. */
#ifndef FG_FP8_AMAX_H
#define FG_FP8_AMAX_H

#include <stddef.h>

#include "fp8_amax_plan.h"
#include "fulgur/backend.h"
#include "model.h"
#include "ranks.h"

typedef struct fg_fp8_amax_sync {
    fg_fp8_amax_plan plan; /* runs 0: nothing to reduce; groups 0: across the ranks */
    fg_ranks ranks;
    const fg_backend_vtable *be;
    void *bs, *queue;   /* the primary replica's queue */
    void *native_queue; /* its native handle where the comm orders by queues; else NULL */
    float *buffers;     /* the primary replica's buffer region */
    void **stages;      /* the live stages the plan's groups index */
} fg_fp8_amax_sync;

/* The reduction of model m's amax histories when its fit spans ranks > 1 (in the buffers
 * of primary, a replica on queue; NULL: this rank holds none), or several of this process's
 * stages (every live stage, fg_train_live_stages) hold the same part of the model (each
 * such group gets its max); else plan.runs 0. Refused with a message: a rank whose primary
 * replica does not hold every buffer (a pipeline stage), or none (its histories are not the
 * other ranks'); several stages in each of several processes; the plan's refusals. */
fg_status fg_fp8_amax_sync_init(fg_fp8_amax_sync *s, const fg_model *m, const fg_ranks *ranks,
                                const fg_backend_vtable *be, void *bs, void *queue,
                                fg_replica *primary, void *const *stages, int stage_count,
                                fg_error *err);
void fg_fp8_amax_sync_free(fg_fp8_amax_sync *s);
/* Max all-reduces the histories: across processes ordered on the replica's queue where the
 * comm orders by queues (comm.nccl), else after a sync of it (comm.mpi); across each
 * group's stages through the host, after a sync of each stage's queue (the copies back are
 * enqueued, not waited for). Allocates nothing. */
fg_status fg_fp8_amax_sync_step(fg_fp8_amax_sync *s, fg_error *err);

#endif
