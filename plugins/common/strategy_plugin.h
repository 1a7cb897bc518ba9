/* What the one-process-per-device strategies share (ddp, sharded): the metric sums of
 * every rank, and rank 0's model buffers (batch-norm running statistics) made every rank's.
 * Training forwards update each rank's running statistics from its own batches; before
 * they are read (evaluation, checkpoints) every rank takes rank 0's, with the results of
 * PyTorch DDP's default broadcast_buffers = True. */
#ifndef FULGUR_PLUGIN_COMMON_STRATEGY_PLUGIN_H
#define FULGUR_PLUGIN_COMMON_STRATEGY_PLUGIN_H

#include "fulgur/backend.h"
#include "fulgur/comm.h"
#include "fulgur/strategy.h"

/* The stage's sums summed over the ranks of the comm, in place. */
fg_status fg_plugin_sum_metrics(const fg_comm_vtable *comm, void *comm_state,
                                fg_step_metrics *m, fg_error *err);

typedef struct fg_plugin_rank0_buffers {
    const fg_backend_vtable *be;
    void *be_state;
    const fg_comm_vtable *comm;
    void *comm_state;
    int device, rank, world_size;
    void *queue;       /* the stage's */
    float *data;       /* (count) on the device; NULL: the model has none */
    int64_t count;
    int stale;         /* a training forward ran since the last broadcast */
    int64_t syncs;     /* broadcasts so far */
} fg_plugin_rank0_buffers;

/* Binds b (its be, comm, device, rank and world size set by the caller) to the buffer
 * region of `stage`. */
void fg_plugin_rank0_buffers_bind(fg_plugin_rank0_buffers *b, const fg_train_services *svc,
                                  void *stage);
/* Rank 0's buffers to every rank (every rank calls); clears `stale`. */
fg_status fg_plugin_rank0_buffers_sync(fg_plugin_rank0_buffers *b, fg_error *err);
/* The debug line at teardown: this rank's buffer digest (FNV-1a), for tests comparing
 * ranks. */
void fg_plugin_rank0_buffers_report(const fg_plugin_rank0_buffers *b, const fg_host *host);

#endif
