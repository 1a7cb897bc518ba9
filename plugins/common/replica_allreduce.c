/* The replica all-reduce of a strategy with one replica per process: a comm all_reduce. */
#include "replica_allreduce.h"

fg_status fg_plugin_comm_allreduce_sum(void *user, void *queue, double *buf, int64_t count,
                                       fg_error *err)
{
    fg_plugin_comm_allreduce *a = user;
    if (count < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: replica all-reduce of %lld values",
                            a->who, (long long)count);
    if (!a->native_queue) { /* a host-ordered comm reads buf once the queue's work is done */
        fg_status st = a->be->queue_sync(a->be_state, queue, err);
        if (st != FG_OK) return st;
    }
    a->calls++;
    return a->comm->all_reduce(a->comm_state, a->native_queue, buf, (size_t)count, FG_F64,
                               FG_REDUCE_SUM, err);
}
