/* strategy.dp internals: data parallel in one process. Every device holds a replica of the
 * model; each batch is split into shards, one per replica, that run at the same time (a
 * persistent thread per device beyond the first; the trainer's thread drives device 0).
 * The gradients are summed into replica 0, which takes the one optimizer step, and its
 * parameters (and buffers) are copied back to every other replica.
 *
 * It moves the whole gradient and the whole model across devices every step, serialised
 * behind backward: the slow mode by design (PyTorch's DataParallel). ddp overlaps its
 * reduction with backward and sends no parameters. */
#ifndef FULGUR_STRATEGY_DP_H
#define FULGUR_STRATEGY_DP_H

#include <pthread.h>
#include <stdint.h>

#include "fulgur/backend.h"
#include "fulgur/strategy.h"
#include "worker_gang.h"

#define DP_MAX_DEVICES 64
/* A training shard never holds fewer samples than this unless the whole batch does:
 * batch norm over one sample has zero variance (PyTorch refuses it). */
#define DP_MIN_SHARD 2

typedef enum dp_job {
    DP_JOB_TRAIN = 1, /* forward and backward of the replica's shard */
    DP_JOB_EVAL = 2,  /* forward of the shard, metrics accumulated */
    DP_JOB_PULL = 3,  /* copy replica 0's parameters and buffers into this one */
    DP_JOB_STOP = 4
} dp_job;

typedef struct dp dp;

typedef struct dp_replica {
    dp *d;
    int index, device;
    void *replica, *queue;
    float *params, *grads, *buffers; /* device memory, svc layout */

    /* this job's part */
    fg_batch shard;  /* a slice of the batch; count 0: no part */
    int64_t first;   /* the shard's first sample in the batch */
    float scale;     /* grad_scale * shard / batch: the shards' gradients sum to the batch's */
    int has_grads;   /* wrote gradients since the last optimizer step: accumulate into them */
    double *sums_host;  /* (sums_cap) host slot of the replica all-reduce */
    int64_t sums_cap, sums_count;
    fg_status st;
    fg_error err;
} dp_replica;

struct dp {
    const fg_host *host;
    const fg_backend_vtable *be;
    void *be_state;
    const fg_train_services *svc;
    int devices;        /* replicas, on backend devices 0..devices-1 */
    dp_replica *r;      /* (devices) */

    /* the worker threads (replicas 1..devices-1) */
    fg_plugin_gang gang; /* its wake condition: the replica all-reduce's meeting */

    float *recv;        /* (param_count) on device 0: another replica's gradients */
    /* the replica all-reduce ([model] sync_batchnorm, dp_allreduce.c), under gang.lock */
    int participants;   /* replicas with a shard in this job */
    int ar_arrived, ar_failed;
    uint64_t ar_round;
    double *sums_total; /* (sums_cap) host */
    int64_t sums_cap;
    int synced;         /* this step's gradients are summed into replica 0 */
    int64_t steps;
    double reduce_s, broadcast_s;             /* this step */
    double total_reduce_s, total_broadcast_s; /* the fit */
};

/* dp_workers.c: starts the threads of replicas 1..devices-1. */
fg_status dp_workers_start(dp *d, fg_error *err);
/* Stops and joins them (idempotent). */
void dp_workers_stop(dp *d);
/* Runs `job` on every replica at once (replica 0 on this thread) and waits; the first
 * failure, naming its device. */
fg_status dp_run(dp *d, dp_job job, fg_error *err);

/* dp_allreduce.c: the replica all-reduce (an fg_replica_allreduce_fn, user: a dp_replica)
 * over the replicas with a shard of the job dp_allreduce_begin opened (after dp_split). */
fg_status dp_allreduce_sum(void *user, void *queue, double *buf, int64_t count, fg_error *err);
void dp_allreduce_begin(dp *d);
/* A participant failed: every rendezvous of this job fails at once. */
void dp_allreduce_abort(dp *d);
void dp_allreduce_free(dp *d);

/* dp_sync.c */
/* Splits batch into shards (at least DP_MIN_SHARD samples each) over the first replicas. */
void dp_split(dp *d, const fg_batch *batch, float grad_scale);
/* Sums every replica's gradients into replica 0 (once per step). */
fg_status dp_reduce(dp *d, fg_error *err);
/* After replica 0's update: its parameters and buffers to every other replica. */
fg_status dp_broadcast(dp *d, fg_error *err);
/* This step's reduce and broadcast times to the metrics sink. */
void dp_report_step(dp *d);

double dp_now(void);

#endif
