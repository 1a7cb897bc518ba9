/* strategy.ddp internals: one process per device, the full model on each, gradients
 * all-reduced in buckets while backward is still running.
 *
 * Buckets are contiguous ranges of the flat gradient buffer. They are cut during backward
 * from the ranges the grad-ready hook reports (last layer first, so from the top of the
 * buffer down): once the not-yet-bucketed top of the buffer that is final holds at least
 * bucket_mb, it becomes a bucket and its all-reduce starts at once (comm all_reduce_start),
 * overlapping the rest of backward. What is left when backward returns (the first layers,
 * and anything no hook reported) is the last bucket. Each hook also tests the buckets in
 * flight, which is what drives MPI's progress engine during backward. */
#ifndef FULGUR_STRATEGY_DDP_H
#define FULGUR_STRATEGY_DDP_H

#include <stdint.h>

#include "fulgur/backend.h"
#include "fulgur/comm.h"
#include "fulgur/strategy.h"
#include "offload_optimizer.h"
#include "replica_allreduce.h"
#include "replica_state.h"
#include "strategy_plugin.h"

typedef struct ddp_bucket {
    int64_t offset, count; /* floats of the flat gradient buffer */
    void *request;         /* the started all-reduce; NULL once waited */
    int done;              /* a test saw it complete */
    double started, finished; /* monotonic seconds; finished = when completion was seen */
} ddp_bucket;

/* Where one step's time went, for the throughput callback and the debug log. */
typedef struct ddp_step_timing {
    double compute_start;  /* forward_backward of the final micro-batch began */
    double backward_end;   /* it returned */
    double wait;           /* seconds optimizer_step blocked on buckets after backward */
    double comm;           /* union of the buckets' [started, finished] intervals */
    double hidden;         /* the part of `comm` before backward_end */
    int started_early;     /* buckets started before backward_end */
} ddp_step_timing;

typedef struct ddp {
    const fg_host *host;
    const fg_comm_vtable *comm;
    void *comm_state;
    const fg_backend_vtable *be;
    void *be_state;
    fg_comm_topology topo;
    double bucket_mb;
    int device;
    int overlap;           /* the comm has all_reduce_start/test/wait */
    int device_ordered;    /* and wait_on_queue: buckets start and end on the device, no
                            * host synchronisation (comm.nccl) */
    uint32_t comm_dtype;   /* grad_comm_dtype: FG_F32, or FG_BF16 through `wire` */

    const fg_train_services *svc;
    void *replica;
    float *grads;          /* (param_count) host-visible on the CPU backend */
    void *wire;            /* (param_count) bf16 copy of grads that is all-reduced; NULL
                            * for f32 */
    void *queue;
    void *native_queue;    /* its queue_native handle, which a device-ordered comm takes */

    /* buckets of the step being reduced */
    int64_t bucket_elems;
    ddp_bucket *buckets;   /* (max_buckets) */
    int bucket_count, max_buckets;
    int64_t pending_hi;    /* grads [pending_hi, param_count) are in buckets already */
    int reducing;          /* the final micro-batch's backward is running */
    int out_of_order;      /* a hook range lay above pending_hi: the contract was broken */
    fg_status hook_status; /* the first failure inside the hook (it cannot return one) */
    fg_error hook_err;

    /* batch-norm running statistics: rank 0's are the model's. The trainer reads the
     * metrics on every rank at once (log points, the end of each epoch's training, before
     * each evaluation pass): the broadcast rides there, once per log interval at most. */
    fg_plugin_rank0_buffers buffers;
    fg_plugin_comm_allreduce allreduce; /* [model] sync_batchnorm's sums across ranks */

    /* offload_optimizer = host: the f32 master and the optimizer state on the host, every
     * rank updating the whole model there from the averaged gradients (ddp_offload.c) */
    int offload;
    fg_offload *off;
    void *params;          /* (param_count) the replica's parameters, written back by it */
    fg_plugin_replica_state ckpt; /* checkpoints: the stage's state or the host's */

    int64_t steps;
    int synced;            /* this step's gradients are reduced and averaged */
    ddp_step_timing timing;
    double total_wait, total_comm, total_hidden;
} ddp;

/* ddp_offload.c: offload_optimizer = host set up after the replica (fp32 only). */
fg_status ddp_offload_setup(ddp *d, fg_error *err);

/* Resets the bucket state for a final micro-batch (reduce = 1) or a no_sync one. */
void ddp_buckets_begin(ddp *d, int reduce);
/* The grad-ready hook: (offset, count) of the gradient buffer is final. */
void ddp_on_grad_ready(void *user, int64_t offset, int64_t count);
/* After backward: starts the last bucket (whatever is left below pending_hi). */
fg_status ddp_buckets_flush(ddp *d, fg_error *err);
/* Completes every bucket in flight, records the timing; sums are not yet averaged. */
fg_status ddp_buckets_wait(ddp *d, fg_error *err);
/* Waits what is in flight and ignores failures: teardown after an error. */
void ddp_buckets_drain(ddp *d);
/* Timing of the step just waited: logged at debug level and sent to the metrics sink. */
void ddp_report_step(ddp *d);


double ddp_now(void);

#endif
