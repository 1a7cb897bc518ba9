/* Strategy plugins: where parameters, gradients and optimizer state live and how a step
 * runs across devices. The vtable grows by appending as strategies land.
 * Thread rule: called from the trainer's thread. */
#ifndef FULGUR_STRATEGY_H
#define FULGUR_STRATEGY_H

#include "fulgur/plugin.h"
#include "fulgur/types.h"

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
     * optimizer_step takes f32 params (the strategy's master) and half grads. Needs
     * half_storage. 0: the core keeps a whole f32 master beside the half working copy. */
    int32_t own_master;

    /* ---- ABI 1.5 ----------------------------------------------------------------------- */
    /* 1 when, after sync_grads, the primary replica's stage holds the final gradients of
     * the whole model and optimizer_step updates every parameter from them (through
     * fg_train_services.optimizer_step with params NULL, the whole range): single, ddp.
     * The trainer may then clip by norm on the device (the factor computed from that
     * stage's gradients and read by its update, no host round trip) instead of calling
     * grad_norm_sq and scale_grads. 0 (older plugins): the host path. */
    int32_t primary_grads;
} fg_strategy_info;

/* A batch as the loader delivered it, in host (staging) memory. Since ABI 1.4 the typed
 * fields `inputs` / `targets` say what the two tensors carry; read them through
 * fg_batch_inputs / fg_batch_targets (and their _dtype), and cut a batch with
 * fg_batch_slice. `samples` and `labels` keep pointing at the same memory for plugins built
 * before 1.4; their types lie (int32 token ids travel as `const float *`, f32 regression
 * targets as `const int32_t *`) and they go at ABI 2.0. */
typedef struct fg_batch {
    uint32_t struct_size;
    const float *samples;   /* (count, sample_elems): = inputs; removed at 2.0 */
    const int32_t *labels;  /* (count, label_elems): = targets; removed at 2.0 */
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

    /* ---- ABI 1.4 ----------------------------------------------------------------------- */
    const void *inputs;     /* (count, sample_elems) of inputs_dtype */
    uint32_t inputs_dtype;  /* FG_F32 values, or FG_I32 token ids (an embedding reads them) */
    const void *targets;    /* (count, label_elems) of targets_dtype; NULL: unlabelled */
    uint32_t targets_dtype; /* FG_I32 classes (FG_IGNORED_LABEL: skipped) or FG_F32 targets */
} fg_batch;

/* Labels per sample of b, whatever the struct's age. */
static inline int32_t fg_batch_label_elems(const fg_batch *b)
{
    return FG_HAS_FIELD(b, fg_batch, label_elems) && b->label_elems > 0 ? b->label_elems : 1;
}

/* b carries the typed fields (a 1.4 struct that sets them). */
static inline int fg_batch_typed(const fg_batch *b)
{
    return FG_HAS_FIELD(b, fg_batch, targets_dtype) && b->inputs_dtype != 0;
}

/* The inputs and their dtype; an older struct: `samples`, FG_F32 as it declares. */
static inline const void *fg_batch_inputs(const fg_batch *b)
{
    return fg_batch_typed(b) ? b->inputs : (const void *)b->samples;
}
static inline uint32_t fg_batch_inputs_dtype(const fg_batch *b)
{
    return fg_batch_typed(b) ? b->inputs_dtype : (uint32_t)FG_F32;
}

/* The targets and their dtype; an older struct: `labels`, FG_I32 as it declares. */
static inline const void *fg_batch_targets(const fg_batch *b)
{
    return fg_batch_typed(b) ? b->targets : (const void *)b->labels;
}
static inline uint32_t fg_batch_targets_dtype(const fg_batch *b)
{
    return fg_batch_typed(b) ? b->targets_dtype : (uint32_t)FG_I32;
}

/* Samples [first, first + count) of b as a batch of their own: every pointer (typed and
 * old) moved by whole samples; the staging handle kept. */
static inline fg_batch fg_batch_slice(const fg_batch *b, int32_t first, int32_t count)
{
    fg_batch s = *b;
    size_t in_elems = (size_t)first * (size_t)b->sample_elems;
    size_t target_elems = (size_t)first * (size_t)fg_batch_label_elems(b);
    s.count = count;
    if (b->samples)
        s.samples = b->samples + in_elems;
    if (b->labels)
        s.labels = b->labels + target_elems;
    if (fg_batch_typed(b)) {
        if (b->inputs)
            s.inputs = (const char *)b->inputs + in_elems * fg_dtype_size((fg_dtype)b->inputs_dtype);
        if (b->targets)
            s.targets = (const char *)b->targets +
                        target_elems * fg_dtype_size((fg_dtype)b->targets_dtype);
    }
    return s;
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

/* What a stage holds (fg_train_services.create). A stage is layers [first_layer,
 * first_layer + layer_count) of the model on one device; the whole model is the stage
 * {first_layer = 0, layer_count = 0}. Zero fields mean the plain case: a stage of one
 * micro-batch holding its whole slice of every flat region. */
typedef struct fg_stage_spec {
    uint32_t struct_size;
    int32_t device;      /* backend device index */
    int32_t max_batch;   /* samples of one micro-batch (fg_train_services.max_batch) */
    int32_t first_layer;
    int32_t layer_count; /* 0: up to the model's last layer */
    /* Activation arenas of max_batch samples each (0 counts as 1): chunk c of forward and
     * backward uses arena c, so up to `chunks` micro-batches can be between their forward
     * and backward (pipelines). */
    int32_t chunks;
    /* 1: no flat parameter (gradient) buffer; the layer memory hook says where each layer's
     * parameters (gradients) are (sharded strategies). The whole model only. Without
     * parameters the initial values are not uploaded: read_init_params. */
    int32_t no_params;
    int32_t no_grads;
    /* 1: optimizer state for [opt_offset, opt_offset + opt_count) of the flat parameters
     * only (count may be 0: no state); 0: for the stage's whole parameter slice. */
    int32_t opt_range;
    int64_t opt_offset;
    int64_t opt_count;
    /* The stage's random draws in training (dropout masks) come from stream `rng_stream`
     * of the run's seed: 0 is the single-process stream; data-parallel processes pass
     * their rank so that each draws its own masks. */
    uint64_t rng_stream;
} fg_stage_spec;

/* The flat regions of a stage (fg_train_services.region). Parameters and gradients are in
 * param_dtype / grad_dtype, buffers (running statistics) and optimizer state in f32. */
typedef enum fg_region {
    FG_REGION_PARAMS = 0,
    FG_REGION_GRADS = 1,
    FG_REGION_BUFFERS = 2,
    FG_REGION_OPT_STATE = 3 /* slot i: momentum, or m then v */
} fg_region;

/* One optimizer step as the trainer decided it: the arguments of every update. */
typedef struct fg_step_args {
    uint32_t struct_size;
    float lr;      /* the learning rate of this step (the scheduler's) */
    int32_t skip;  /* 1: the loss scaler skips this step (inf/NaN gradients): the strategy's
                    * bookkeeping goes on (buckets, all-gathers) while the updates change
                    * nothing (no parameter, optimizer state or step counter moves) */
    int64_t step;  /* 1-based number of this step (AdamW's bias correction, SGD's first
                    * momentum step); several updates of one step pass the same number */
} fg_step_args;

/* A layer as balancing and sharding need it (fg_train_services.layer_info). */
typedef struct fg_layer_desc {
    uint32_t struct_size;
    const char *name;
    int64_t param_offset;     /* its range of the flat parameters, in elements */
    int64_t param_count;      /* 0: a layer without parameters */
    int64_t param_bytes;      /* param_count f32 values */
    int64_t activation_bytes; /* per sample: its output and what backward keeps */
    int64_t out_elems;        /* output values per sample */
    int64_t flops;            /* ABI 1.1: forward FLOPs per sample (a multiply-add is 2);
                               * backward costs about twice as much */
} fg_layer_desc;

enum { FG_LAYER_FORWARD = 0, FG_LAYER_BACKWARD = 1 };

/* Before a layer with parameters runs forward (phase FG_LAYER_FORWARD, also in eval) or
 * backward (FG_LAYER_BACKWARD) in a stage created with no_params / no_grads: `layer` is the
 * model's layer index, [offset, offset + count) its range of the flat parameters
 * (layer_info). The strategy sets *params and *grads to device memory holding element
 * `offset` of the range (count elements of param_dtype / grad_dtype; *grads may be NULL in
 * forward). Backward writes (accumulate = 0) or adds the layer's gradients there. A failure
 * fails the pass with the layer named. */
typedef fg_status (*fg_layer_memory_hook)(void *user, int32_t layer, int32_t phase,
                                          int64_t offset, int64_t count, void **params,
                                          void **grads, fg_error *err);

/* The replica all-reduce (ABI 1.8, fg_train_services.set_replica_allreduce): sums
 * buf[0 .. count) (f64, device memory of the stage's device, written by work already on
 * `queue`, the stage's queue) in place over every replica holding the same layers, each
 * replica calling it for the same layers in the same order; on return the sums are in buf,
 * ordered before the queue's later work, and equal bitwise on every replica. Called on
 * the thread that runs the stage's forward or backward, in the middle of it. */
typedef fg_status (*fg_replica_allreduce_fn)(void *user, void *queue, double *buf,
                                             int64_t count, fg_error *err);

/* What the trainer gives a strategy: the model, as stages on devices. A stage is layers
 * [first, first + count) of the model on one device of the configured backend, holding
 * their slice of the flat parameters, gradients, buffers and optimizer state and an
 * activation arena per micro-batch in flight, all allocated at creation; a step only
 * enqueues work. The whole model is one such stage: single, dp, ddp, sharded and
 * pipeline strategies all use the same entries. Offsets and counts are elements of the
 * model's flat regions, never bytes. Device memory crosses as `void *` plus its dtype.
 * Thread rule: calls on different stages may run concurrently from different threads;
 * calls on one stage come from one thread at a time. */
typedef struct fg_train_services {
    uint32_t struct_size;
    void *ctx;
    int64_t param_count;  /* elements of the model's flat parameters */
    int64_t buffer_count; /* f32 values of its flat buffers (running statistics) */
    int32_t max_batch;    /* largest batch the trainer hands the strategy */
    int32_t layer_count;  /* layers of the model */
    /* fg_dtype of every stage's parameters and gradients: FG_F32 unless a precision plugin
     * asked for half gradients or a "true" half mode; the strategy must declare
     * fg_strategy_info.half_storage to be given anything else. */
    uint32_t param_dtype;
    uint32_t grad_dtype;
    /* 1: the strategy declared fg_strategy_info.own_master under a mixed precision mode:
     * stages hold half parameters (param_dtype) with no f32 copy, and optimizer_step takes
     * the strategy's f32 master as params (grads in grad_dtype). 0 with a half param_dtype:
     * a "true" half mode (params updated in place). */
    int32_t strategy_master;

    /* Layer i's name, parameter range and sizes. */
    fg_status (*layer_info)(void *ctx, int32_t layer, fg_layer_desc *out, fg_error *err);
    fg_status (*create)(void *ctx, const fg_stage_spec *spec, void **stage, fg_error *err);
    void (*destroy)(void *ctx, void *stage);
    /* The backend queue the stage's work runs on. */
    void *(*queue)(void *ctx, void *stage);
    /* Forward of micro-batch `chunk` (batch->count samples, starting at sample first_sample
     * of the step's batch: dropout draws what the whole batch would). The first stage
     * copies batch->samples to the device (x_dev NULL); a later one reads x_dev, the
     * previous stage's output (count, in...) on its device. The last stage reads
     * batch->labels, computes the loss and accumulates loss and accuracy on the device.
     * training = 0: evaluation. */
    fg_status (*forward)(void *ctx, void *stage, int32_t chunk, const fg_batch *batch,
                         int64_t first_sample, const void *x_dev, int training,
                         fg_error *err);
    /* Backward of micro-batch `chunk` after its training forward: the last stage from
     * d(mean loss of the chunk)/d(logits) times grad_scale (dy_dev NULL), another from
     * dy_dev (count, out...) on its device. accumulate = 0 writes the gradients, 1 adds. */
    fg_status (*backward)(void *ctx, void *stage, int32_t chunk, const void *dy_dev,
                          float grad_scale, int accumulate, fg_error *err);
    /* Device memory of the chunk: its output of the last forward (count, out...) and the
     * gradient at its input of the last backward (count, in...; NULL on the first stage).
     * f32 between stages. */
    const void *(*output)(void *ctx, void *stage, int32_t chunk);
    const void *(*input_grad)(void *ctx, void *stage, int32_t chunk);
    /* The stage's part of a flat region (fg_region; `slot` picks an optimizer state slot,
     * 0 otherwise): device memory holding element *offset of the region, *count elements
     * of *dtype. NULL (and *count 0) when the stage holds none of it: no_params, or past
     * the last optimizer slot. */
    void *(*region)(void *ctx, void *stage, int32_t region, int32_t slot, uint32_t *dtype,
                    int64_t *offset, int64_t *count);
    /* Bytes the stage allocated, by role. */
    fg_status (*memory)(void *ctx, void *stage, fg_memory_report *out, fg_error *err);
    /* Reads (a host sync) and optionally resets the stage's metric sums (zeros on a stage
     * without the loss). */
    fg_status (*read_metrics)(void *ctx, void *stage, int reset, fg_step_metrics *out,
                              fg_error *err);
    /* Sum of squares of gradients [offset, offset + count) (a host sync); the range lies
     * in the stage's gradients. */
    fg_status (*grad_norm_sq)(void *ctx, void *stage, int64_t offset, int64_t count,
                              double *out, fg_error *err);
    /* Gradients [offset, offset + count) times s, then clamped to [-clamp, clamp] when
     * clamp > 0. */
    fg_status (*scale_grads)(void *ctx, void *stage, int64_t offset, int64_t count, float s,
                             float clamp, fg_error *err);
    /* Optimizer update of parameters [offset, offset + count) (inside the stage's
     * optimizer range) with the arguments of step `args`. params and grads NULL: the
     * stage's own; otherwise memory the strategy holds, pointing at element `offset`
     * (sharded state). */
    fg_status (*optimizer_step)(void *ctx, void *stage, const fg_step_args *args,
                                int64_t offset, int64_t count, void *params,
                                const void *grads, fg_error *err);
    /* Called during backward each time a layer's parameter gradients are final, with its
     * range of the flat gradients, last layer first: a strategy starts reducing a bucket
     * as soon as its last range is in. NULL fn removes the hook. */
    void (*set_grad_ready_hook)(void *ctx, void *stage,
                                void (*fn)(void *user, int64_t offset, int64_t count),
                                void *user);
    /* NULL fn removes the hook. */
    void (*set_layer_memory_hook)(void *ctx, void *stage, fg_layer_memory_hook fn,
                                  void *user);
    /* Copies the initial parameters [offset, offset + count) (the seeded ones, or those of
     * the checkpoint being resumed; f32) to dst, device memory of the stage (queue-ordered). */
    fg_status (*read_init_params)(void *ctx, void *stage, int64_t offset, int64_t count,
                                  void *dst, fg_error *err);
    /* ABI 1.8: the replica all-reduce. Gives the stage fn, which the stage's layers call in
     * forward and backward to sum a few f64 values across every replica of their layers
     * ([model] sync_batchnorm: each batch-norm layer's statistics, then its backward sums).
     * NULL fn removes it. A stage without one sums over itself alone; a strategy that runs
     * more than one replica (devices > 1 or world_size > 1) and leaves a stage without it
     * is refused at setup when the model asks for it. See fg_replica_allreduce_fn. */
    void (*set_replica_allreduce)(void *ctx, void *stage, fg_replica_allreduce_fn fn,
                                  void *user);
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
     * gradient accumulation (no gradient sync needed), micro_index counts them from 0. The
     * batch is the caller's again when it returns: on a host_synchronous backend the
     * services read it where the loader staged it, and the loader rewrites it after. */
    fg_status (*train_step)(void *state, const fg_batch *batch, int micro_index, int final,
                            float grad_scale, fg_error *err);
    /* The optimizer update of every parameter, with the trainer's lr, step number and
     * skip flag (a step the loss scaler skips still runs, with args->skip = 1). */
    fg_status (*optimizer_step)(void *state, const fg_step_args *args, fg_error *err);
    fg_status (*eval_step)(void *state, const fg_batch *batch, fg_error *err);
    /* Metric sums over every replica (and rank), then optionally reset. */
    fg_status (*read_metrics)(void *state, int reset, fg_step_metrics *out, fg_error *err);
    /* The stage (of services.create) whose parameters are the model's (for checkpoints and
     * evaluation). */
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
