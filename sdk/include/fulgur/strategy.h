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
    /* 1 when the strategy handles parameters and gradients stored in a half
     * dtype (fg_train_services.param_dtype, grad_dtype): its collectives, clipping and
     * checkpoints read them as such. 0 (older plugins): the trainer refuses half gradients
     * and "true" half modes with it. */
    int32_t half_storage;
    /* 1 when, under a mixed precision mode (half working parameters with
     * an f32 master), the strategy keeps the f32 master weights of the range it updates
     * itself (strategy.sharded: its shard). The replicas then hold parameters and gradients
     * in the half dtype only (param_dtype = grad_dtype = the half type), and
     * optimizer_step_at takes f32 params (the strategy's master) and half grads. Needs
     * half_storage. 0: the core keeps a whole f32 master beside the half working copy. */
    int32_t own_master;
} fg_strategy_info;

/* A batch as the loader delivered it, in host (staging) memory. */
typedef struct fg_batch {
    uint32_t struct_size;
    const float *samples;   /* (count, sample_elems) */
    const int32_t *labels;  /* (count) */
    int32_t count;
    int64_t sample_elems;
    /* the core's handle on the staging buffer samples and labels lie in
     * (opaque to strategies): the services fence their copies out of it with events, so
     * the loader rewrites it only once they completed. A strategy that hands the services a
     * part of the batch copies the whole struct and moves samples and labels, keeping this
     * field. NULL (a batch in memory the caller owns): the services finish copying it
     * before the call that takes it returns. */
    void *staging;
    /* labels per sample: 1, or T for a sequence model (one label per position); 0 in an
     * older struct means 1. A strategy that hands on a part of the batch moves labels by
     * count * label_elems. */
    int32_t label_elems;
} fg_batch;

/* Labels per sample of b, whatever the struct's age. */
static inline int32_t fg_batch_label_elems(const fg_batch *b)
{
    return FG_HAS_FIELD(b, fg_batch, label_elems) && b->label_elems > 0 ? b->label_elems : 1;
}

/* Running sums since the last reset: loss summed over samples, correct predictions, samples. */
typedef struct fg_step_metrics {
    uint32_t struct_size;
    double loss_sum;
    double correct;
    double count;
} fg_step_metrics;

/* Bytes one device holds for training, by role. */
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

/* What a sharded replica holds (fg_train_services.replica_create_spec, ABI 1.x append). */
typedef struct fg_replica_spec {
    uint32_t struct_size;
    int32_t full_params; /* 1: the whole flat parameter buffer; 0: none (the layer memory
                          * hook says where each layer's parameters are) */
    int32_t full_grads;  /* 1: the whole flat gradient buffer; 0: none (likewise) */
    int64_t opt_offset;  /* optimizer state for [opt_offset, opt_offset + opt_count) only */
    int64_t opt_count;
} fg_replica_spec;

enum { FG_LAYER_FORWARD = 0, FG_LAYER_BACKWARD = 1 };

/* Before a layer with parameters runs forward (phase FG_LAYER_FORWARD, also in eval) or
 * backward (FG_LAYER_BACKWARD): `index` counts the layers with parameters from 0 in model
 * order (param_ranges order), [offset, offset + count) is its range of the flat buffers.
 * The strategy sets *params and *grads to device memory holding element `offset` of the
 * range (count floats; *grads may be NULL in forward). Backward writes (accumulate = 0) or
 * adds the layer's gradients there. A failure fails the pass with the layer named. Under
 * strategy_master (fg_train_services) both hold half elements (param_dtype, grad_dtype):
 * the pointers are then untyped, element i at byte i * 2. */
typedef fg_status (*fg_layer_memory_hook)(void *user, int32_t index, int32_t phase,
                                          int64_t offset, int64_t count, float **params,
                                          float **grads, fg_error *err);

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
    /* ---- sharded state (strategy.sharded) ---- */
    int64_t buffer_count; /* floats in the flat buffer region (running statistics) */
    /* A replica holding what spec asks for (activations, batch staging and buffers always).
     * Without full params the initial values are not uploaded: read_init_params. */
    fg_status (*replica_create_spec)(void *ctx, int device, int max_batch,
                                     const fg_replica_spec *spec, void **replica, fg_error *err);
    /* Optimizer update of [offset, offset + count) with params and grads pointing at
     * element `offset` (memory the strategy holds); the range must lie in the replica's
     * optimizer range. */
    fg_status (*optimizer_step_at)(void *ctx, void *replica, float *params, const float *grads,
                                   int64_t offset, int64_t count, fg_error *err);
    /* The ranges of the layers with parameters, in model order: returns how many there are
     * and fills the first `capacity` of them. */
    int32_t (*param_ranges)(void *ctx, int64_t *offsets, int64_t *counts, int32_t capacity);
    /* NULL fn removes the hook. */
    void (*set_layer_memory_hook)(void *ctx, void *replica, fg_layer_memory_hook fn, void *user);
    /* Copies the initial parameters [offset, offset + count) (the seeded ones, or those of
     * the checkpoint being resumed) to dst, device memory of the replica (queue-ordered). */
    fg_status (*read_init_params)(void *ctx, void *replica, int64_t offset, int64_t count,
                                  float *dst, fg_error *err);
    /* The replica's flat buffers (buffer_count floats) and optimizer state slot i (the
     * spec's opt_count floats; NULL past the last slot: momentum, or m then v). */
    float *(*replica_buffers)(void *ctx, void *replica);
    float *(*replica_opt_state)(void *ctx, void *replica, int32_t i);
    /* ---- data parallel in one process (strategy.dp) ---- */
    /* The replica's next batches start at sample first_sample of a larger batch (a shard
     * of it): dropout then draws for every sample what the whole batch would. */
    void (*set_sample_offset)(void *ctx, void *replica, int64_t first_sample);
    /* ---- pipeline stages (strategy.model-parallel) ----
     * A stage is layers [first_layer, first_layer + layer_count) on one device. It holds
     * only those layers' parameters, gradients, optimizer state and buffers (a slice of
     * each flat region, stage_range), uploads their initial values at creation, and has
     * `chunks` activation arenas of max_batch samples each: micro-batch c uses arena c, so
     * up to `chunks` micro-batches can be between their forward and backward. The first
     * stage takes the batch's samples, the last one its labels, computes the loss and
     * accumulates the metrics; activations and their gradients cross stages as device
     * buffers the strategy moves. Thread rule as replicas (one thread per stage). */
    int32_t layer_count;
    /* Layer i's name, parameter bytes, activation bytes per sample (output and what
     * backward keeps) and output floats per sample: what balancing stages needs. */
    fg_status (*layer_info)(void *ctx, int32_t layer, const char **name, int64_t *param_bytes,
                            int64_t *activation_bytes, int64_t *out_elems, fg_error *err);
    fg_status (*stage_create)(void *ctx, int device, int max_batch, int32_t first_layer,
                              int32_t layer_count, int32_t chunks, void **stage,
                              fg_error *err);
    void (*stage_destroy)(void *ctx, void *stage);
    void *(*stage_queue)(void *ctx, void *stage);
    /* Where the stage's slices lie in the model's flat regions, in floats. */
    void (*stage_range)(void *ctx, void *stage, int64_t *param_offset, int64_t *param_count,
                        int64_t *buffer_offset, int64_t *buffer_count);
    /* Forward of micro-batch `chunk` (batch->count samples, starting at sample
     * first_sample of the step's batch: dropout draws). x_dev: the stage's input
     * (count, in...) on its device; NULL on the first stage, which copies batch->samples.
     * The last stage reads batch->labels. training = 0: evaluation. */
    fg_status (*stage_forward)(void *ctx, void *stage, int32_t chunk, const fg_batch *batch,
                               int64_t first_sample, const float *x_dev, int training,
                               fg_error *err);
    /* Backward of micro-batch `chunk` after its training forward: the last stage from
     * d(mean loss of the chunk)/d(logits) times grad_scale (dy_dev NULL), another from
     * dy_dev (count, out...) on its device. accumulate = 0 writes the gradients, 1 adds. */
    fg_status (*stage_backward)(void *ctx, void *stage, int32_t chunk, const float *dy_dev,
                                float grad_scale, int accumulate, fg_error *err);
    /* Device pointers: the chunk's output of its last forward (count, out...), and the
     * gradient at its input of its last backward (count, in...; not on the first stage). */
    const float *(*stage_output)(void *ctx, void *stage, int32_t chunk);
    const float *(*stage_input_grad)(void *ctx, void *stage, int32_t chunk);
    /* One optimizer update of the stage's parameters. */
    fg_status (*stage_optimizer_step)(void *ctx, void *stage, fg_error *err);
    /* Metric sums of the last stage (zeros on the others), as read_metrics. */
    fg_status (*stage_read_metrics)(void *ctx, void *stage, int reset, fg_step_metrics *out,
                                    fg_error *err);
    fg_status (*stage_grad_norm_sq)(void *ctx, void *stage, double *out, fg_error *err);
    fg_status (*stage_scale_grads)(void *ctx, void *stage, float s, float clamp, fg_error *err);
    fg_status (*stage_memory)(void *ctx, void *stage, fg_memory_report *out, fg_error *err);
    /* Device memory in the stage's slice layout: parameters, buffers, optimizer state slot
     * i (NULL past the last slot), for checkpoints. */
    float *(*stage_params)(void *ctx, void *stage);
    float *(*stage_buffers)(void *ctx, void *stage);
    float *(*stage_opt_state)(void *ctx, void *stage, int32_t i);
    /* ---- one process per device (strategy.ddp) ---- */
    /* The replica's random draws in training (dropout masks) come from stream `stream` of
     * the run's seed: 0, the default, is the single-process stream; data-parallel
     * processes pass their rank so that each draws its own masks. */
    void (*replica_set_rng_stream)(void *ctx, void *replica, uint64_t stream);
    /* ---- half storage (precision) ---- */
    /* fg_dtype of the memory replica_params and replica_grads point at (the pointers are
     * then untyped: element i is at byte i * fg_dtype_size). FG_F32 unless a precision
     * plugin asked for half gradients or a "true" half mode; the strategy must declare
     * fg_strategy_info.half_storage to be given anything else. grad_norm_sq and scale_grads
     * handle both. */
    uint32_t param_dtype;
    uint32_t grad_dtype;
    /* ---- data parallel across pipelines (strategy.model-parallel) ---- */
    /* The stage's gradients (stage_range's param_count floats) on its device. */
    float *(*stage_grads)(void *ctx, void *stage);
    /* ---- strategy-kept master weights (strategy.sharded) ---- */
    /* 1: the strategy declared fg_strategy_info.own_master under a mixed precision mode,
     * so the replicas hold half parameters (param_dtype) with no f32 copy, and
     * optimizer_step_at takes the strategy's f32 master as params (grads in grad_dtype).
     * 0 with a half param_dtype: a "true" half mode (params updated in place). */
    int32_t strategy_master;
} fg_train_services;

/* This rank's part of a checkpoint written one file per rank (fg_strategy_vtable.
 * shard_describe; strategy.sharded). */
typedef struct fg_shard_desc {
    uint32_t struct_size;
    int32_t per_rank_files; /* 1: the user asked for one checkpoint file per rank */
    int32_t layout;         /* strategy-defined tag recorded in the index (sharded: the stage) */
    int64_t offset;         /* this rank's range of the flat parameters and of every optimizer */
    int64_t count;          /* state slot: [offset, offset + count), count may be 0 */
} fg_shard_desc;

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
    /* ---- one checkpoint file per rank (strategy.sharded) ----
     * shard_describe says whether checkpoints are written one file per rank and which part
     * is this rank's; shard_read copies that part to host memory: params (count floats),
     * opt_state (the optimizer's slots one after another, count floats each) and, when
     * buffers is not NULL, the whole buffer region (svc.buffer_count floats). Local to the
     * rank: no collective. NULL: checkpoints are gathered. */
    fg_status (*shard_describe)(void *state, fg_shard_desc *out, fg_error *err);
    fg_status (*shard_read)(void *state, float *params, float *buffers, float *opt_state,
                            fg_error *err);
} fg_strategy_vtable;

#ifdef __cplusplus
}
#endif
#endif
