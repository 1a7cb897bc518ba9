/* The fg_train_services a strategy drives: stages of the model on backend devices (the
 * whole model being one), each with its own batch staging, metric scalars and optimizer
 * state. The trainer owns the context; the step's arguments (lr, step number, skip) reach
 * the services as arguments of optimizer_step, never through it. */
#ifndef FG_TRAIN_SERVICES_H
#define FG_TRAIN_SERVICES_H

#include "fulgur/strategy.h"
#include "model.h"
#include "optimizer.h"

struct fg_step_sink;
struct fg_optimizer;

typedef struct fg_train_ctx {
    fg_train_services svc;
    const fg_model *model;
    const fg_config *cfg;
    const struct fg_optimizer_config *optim; /* the trainer's [optimizer], read once */
    const fg_backend_vtable *be;
    void *bs;
    const float *init_params;  /* host: the seeded initial parameters every stage starts from */
    const float *init_buffers; /* host */
    uint64_t seed;
    /* Counts micro-batches (fg_train_services_next_micro_batch; the stages read it, nothing
     * else writes it): dropout draws depend on it, and every stage of a micro-batch draws
     * alike. */
    uint64_t micro_step;
    int micro_in_step; /* the micro-batch's index within its optimizer step (0: the first) */
    /* Moves with every optimizer update: a stage with half working parameters casts them
     * again at its first forward after it. Atomic: the stages of strategy.model-parallel
     * step their optimizers on threads of their own, at once (a data race ThreadSanitizer
     * found, tests/tsan_run.sh). */
    _Atomic uint64_t param_version;
    /* Phase timing (a throughput callback asked): h2d, forward, backward and optimizer
     * times go to the sink, with a queue sync after each phase so that an asynchronous
     * backend's work is counted where it runs. timing = 0: no sync, nothing timed. */
    int timing;
    struct fg_step_sink *sink;
    /* Copy fence ids the loaders' staging slots use (0 .. fence_count - 1): each stage
     * has an event per id for its batch copies (data/batch_copy.h). */
    int fence_count;
    /* [model] ignore_index is set: the last stage counts the labels the loss keeps */
    int ignore_labels;
    /* 1: the optimizer step runs as scale, update and cast (the backend's separate ops) even
     * where the backend has the fused ones (FULGUR_TEST_UNFUSED_STEP=1, for comparisons) */
    int unfused;
    /* [optimizer] weight decay per tensor: runs of the flat parameters (NULL: all decay) */
    const fg_decay_run *decay_runs;
    size_t decay_run_count;
    /* stages holding a [model] sync_batchnorm layer that the strategy gave no replica
     * all-reduce (set_replica_allreduce): the trainer refuses a multi-replica run with any */
    int unserved_stages;
    /* [model] batch_groups each stage's replicas run (the trainer's setup_batch_groups): the
     * key's G on one device, 1 where each of G devices takes one group (dp) */
    int batch_groups;
    /* stages whose parameters and gradients a strategy maps (set_layer_memory_hook: sharded
     * layers), which batch groups cannot add their gradients into */
    int mapped_stages;
    /* the live stages, in creation order (strategy.dp's replica 0 first; strategy.model-
     * parallel's pipeline 0, stage by stage, then the other pipelines) */
    struct fg_train_stage *live;
} fg_train_ctx;

/* What the core reads of a stage created by these services (checkpoints, checks, predict):
 * its device, queue, model replica (arena 0) and optimizer. */
int fg_train_stage_device(const void *stage);
void *fg_train_stage_queue(const void *stage);
fg_replica *fg_train_stage_model(const void *stage);
struct fg_optimizer *fg_train_stage_optimizer(const void *stage);

/* The live stages (at most max of them into stages, creation order); returns how many
 * there are. A stage's part of the model: fg_replica_buffer_range of its model. */
int fg_train_live_stages(const fg_train_ctx *ctx, void **stages, int max);

/* Fills ctx->svc; the other fields must be set by the caller. */
void fg_train_services_init(fg_train_ctx *ctx, int max_batch);
/* A training micro-batch starts (before the strategy's train_step), the micro-th of its
 * optimizer step. */
void fg_train_services_next_micro_batch(fg_train_ctx *ctx, int micro);
/* The micro-batches counted, for a checkpoint, and the count a resumed fit goes on from. */
uint64_t fg_train_services_micro_step(const fg_train_ctx *ctx);
void fg_train_services_resume_micro_step(fg_train_ctx *ctx, uint64_t micro_step);
/* The per-step metric sink of a fit and whether its phases are timed (NULL, 0: neither). */
void fg_train_services_set_sink(fg_train_ctx *ctx, struct fg_step_sink *sink, int timing);

#endif
