/* Strategy plugins: where parameters, gradients and optimizer state live and how a step
 * runs across devices. The vtable grows by appending as strategies land.
 * Thread rule: called from the trainer's thread. */
#ifndef FULGUR_STRATEGY_H
#define FULGUR_STRATEGY_H

#include "fulgur/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fg_launch_mode {
    FG_LAUNCH_ONE_PROCESS = 1,      /* one process drives its devices (single, dp, model-parallel) */
    FG_LAUNCH_PROCESS_PER_DEVICE = 2 /* started by mpirun/srun, one process per device */
} fg_launch_mode;

typedef struct fg_strategy_info {
    uint32_t struct_size;
    uint32_t launch_mode; /* fg_launch_mode */
    int32_t needs_comm;   /* a [comm] plugin must be configured */
    int32_t devices;      /* devices this process drives */
    int32_t rank;         /* this process's data-parallel rank (0 without a comm) */
    int32_t world_size;   /* data-parallel processes (1 without a comm) */
} fg_strategy_info;

/* A batch as the loader delivered it, in host (staging) memory. */
typedef struct fg_batch {
    uint32_t struct_size;
    const float *samples;   /* (count, sample_elems) */
    const int32_t *labels;  /* (count) */
    int32_t count;
    int64_t sample_elems;
} fg_batch;

/* Running sums since the last reset: loss summed over samples, correct predictions, samples. */
typedef struct fg_step_metrics {
    uint32_t struct_size;
    double loss_sum;
    double correct;
    double count;
} fg_step_metrics;

/* Bytes one device holds for training, by role (ABI 1.x append). */
typedef struct fg_memory_report {
    uint32_t struct_size;
    int32_t device;            /* backend device index */
    uint64_t param_bytes;      /* the working parameters the layers read */
    uint64_t master_bytes;     /* fp32 master weights kept beside half ones (mixed precision) */
    uint64_t grad_bytes;
    uint64_t optimizer_bytes;  /* optimizer state (momentum, or m and v) */
    uint64_t activation_bytes; /* the activation arena, sized once for the largest batch */
    uint64_t other_bytes;      /* non-trained buffers, batch staging, scratch */
} fg_memory_report;

/* What the trainer gives a strategy: the model, instantiated on devices as replicas. A
 * replica holds flat parameters, gradients, optimizer state and an activation arena on one
 * device of the configured backend, all allocated at creation. Thread rule: calls on
 * different replicas may run concurrently from different threads; calls on one replica
 * come from one thread at a time. */
typedef struct fg_train_services {
    uint32_t struct_size;
    void *ctx;
    int64_t param_count;   /* floats in the flat parameter buffer */
    int32_t max_batch;     /* largest batch a replica must hold */
    fg_status (*replica_create)(void *ctx, int device, int max_batch, void **replica,
                                fg_error *err);
    void (*replica_destroy)(void *ctx, void *replica);
    /* Device pointers into the replica's flat buffers, and the queue its work runs on. */
    float *(*replica_params)(void *ctx, void *replica);
    float *(*replica_grads)(void *ctx, void *replica);
    void *(*replica_queue)(void *ctx, void *replica);
    /* Copies the batch to the device, runs forward and backward; gradients of the mean
     * loss times grad_scale are written (accumulate = 0) or added (accumulate = 1). Loss and
     * accuracy are accumulated on the device. */
    fg_status (*forward_backward)(void *ctx, void *replica, const fg_batch *batch,
                                  float grad_scale, int accumulate, fg_error *err);
    /* Forward only, in eval mode; loss and accuracy accumulated on the device. */
    fg_status (*evaluate)(void *ctx, void *replica, const fg_batch *batch, fg_error *err);
    /* Optimizer update of parameters [offset, offset + count) from the gradients. */
    fg_status (*optimizer_step)(void *ctx, void *replica, int64_t offset, int64_t count,
                                fg_error *err);
    /* Reads (a host sync) and optionally resets the replica's metric sums. */
    fg_status (*read_metrics)(void *ctx, void *replica, int reset, fg_step_metrics *out,
                              fg_error *err);
    /* Called during backward each time a layer's parameter gradients are final, with its
     * range of the flat gradient buffer (in floats), last layer first: a strategy starts
     * reducing a bucket as soon as its last range is in. NULL fn removes the hook. */
    void (*set_grad_ready_hook)(void *ctx, void *replica,
                                void (*fn)(void *user, int64_t offset, int64_t count),
                                void *user);
    /* Sum of squares of gradients [offset, offset + count) (a host sync). */
    fg_status (*grad_norm_sq)(void *ctx, void *replica, int64_t offset, int64_t count,
                              double *out, fg_error *err);
    /* Gradients [offset, offset + count) times s, then clamped to [-clamp, clamp] when
     * clamp > 0. */
    fg_status (*scale_grads)(void *ctx, void *replica, int64_t offset, int64_t count, float s,
                             float clamp, fg_error *err);
    /* Bytes this replica allocated, by role. */
    fg_status (*replica_memory)(void *ctx, void *replica, fg_memory_report *out, fg_error *err);
} fg_train_services;

typedef struct fg_strategy_vtable {
    uint32_t struct_size;
    fg_status (*info)(void *state, fg_strategy_info *out, fg_error *err);
    /* Creates the replicas this process drives. */
    fg_status (*setup)(void *state, const fg_train_services *svc, fg_error *err);
    void (*teardown)(void *state);
    /* One micro-batch: forward and backward. final = 0 on the non-final micro-batches of
     * gradient accumulation (no gradient sync needed), micro_index counts them from 0. */
    fg_status (*train_step)(void *state, const fg_batch *batch, int micro_index, int final,
                            float grad_scale, fg_error *err);
    fg_status (*optimizer_step)(void *state, fg_error *err);
    fg_status (*eval_step)(void *state, const fg_batch *batch, fg_error *err);
    /* Metric sums over every replica (and rank), then optionally reset. */
    fg_status (*read_metrics)(void *state, int reset, fg_step_metrics *out, fg_error *err);
    /* The replica whose parameters are the model's (for checkpoints and evaluation). */
    void *(*primary_replica)(void *state);
    /* Gradient clipping and unscaling, between train_step(final = 1) and optimizer_step:
     * sync_grads finishes the gradient reduction (NULL: nothing to wait for), grad_norm_sq
     * is the squared global L2 norm over the whole model (across shards and ranks),
     * scale_grads multiplies every gradient by s and clamps to [-clamp, clamp] when
     * clamp > 0. A strategy without them cannot clip: the trainer says so. */
    fg_status (*sync_grads)(void *state, fg_error *err);
    fg_status (*grad_norm_sq)(void *state, double *out, fg_error *err);
    fg_status (*scale_grads)(void *state, float s, float clamp, fg_error *err);
    /* Bytes held on the i-th device this process drives (0 <= i < info.devices), by role:
     * what `fulgur fit` prints at setup. NULL: the trainer reports nothing. */
    fg_status (*memory_report)(void *state, int i, fg_memory_report *out, fg_error *err);
    /* Checkpoints of strategies whose primary replica does not hold the whole model
     * (pipeline stages, sharded state); NULL: the trainer copies the primary replica's.
     * Layouts are those of one plain replica: params (svc.param_count floats), buffers,
     * and opt_state = the optimizer's state slots one after another (momentum, or m then
     * v), param_count floats each. Under a comm every rank calls; only rank 0's host
     * buffers are written (gather) or read (scatter). Parameters and buffers reach new
     * replicas through the initial values, so scatter restores the optimizer state only. */
    fg_status (*gather_state)(void *state, float *params, float *buffers, float *opt_state,
                              fg_error *err);
    fg_status (*scatter_state)(void *state, const float *opt_state, fg_error *err);
} fg_strategy_vtable;

#ifdef __cplusplus
}
#endif
#endif
