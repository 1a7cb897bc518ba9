/* The replica all-reduce (fg_train_services.set_replica_allreduce, ABI 1.8) of the
 * strategies that run one replica per process over a comm (ddp, sharded): the f64 sums go
 * through the comm's all_reduce, ordered by the backend queue where the comm takes its
 * native handle (comm.nccl), else after a sync of the stage's queue (comm.mpi). */
#ifndef FULGUR_PLUGIN_REPLICA_ALLREDUCE_H
#define FULGUR_PLUGIN_REPLICA_ALLREDUCE_H

#include "fulgur/backend.h"
#include "fulgur/comm.h"
#include "fulgur/strategy.h"

typedef struct fg_plugin_comm_allreduce {
    const fg_comm_vtable *comm;
    void *comm_state;
    const fg_backend_vtable *be;
    void *be_state;
    void *native_queue; /* the stage queue's native handle when the comm orders by it; NULL */
    const char *who;    /* the strategy's name, for messages */
    int64_t calls;      /* all-reduces so far: a training forward that made one updated the
                         * running statistics alike on every rank (no broadcast needed) */
} fg_plugin_comm_allreduce;

/* An fg_replica_allreduce_fn; user is an fg_plugin_comm_allreduce. */
fg_status fg_plugin_comm_allreduce_sum(void *user, void *queue, double *buf, int64_t count,
                                       fg_error *err);

#endif
