/* The fg_train_services a strategy drives: replicas of the model on backend devices, each
 * with its own input buffers, metric scalars and optimizer state. */
#ifndef FG_TRAIN_SERVICES_H
#define FG_TRAIN_SERVICES_H

#include "fulgur/strategy.h"
#include "model.h"

typedef struct fg_train_ctx {
    fg_train_services svc;
    const fg_model *model;
    const fg_config *cfg;
    const fg_backend_vtable *be;
    void *bs;
    const float *init_params;  /* host: the seeded initial parameters every replica starts from */
    const float *init_buffers; /* host */
    uint64_t seed;
    float lr;                  /* the learning rate of the next optimizer step */
    uint64_t micro_step;       /* counts forward passes: dropout draws depend on it */
    int64_t step_number;       /* 1-based number of the optimizer step being taken */
    /* Phase timing (a throughput callback asked): h2d, forward, backward and optimizer
     * times go to the sink, with a queue sync after each phase so that an asynchronous
     * backend's work is counted where it runs. timing = 0: no sync, nothing timed. */
    int timing;
    struct fg_step_sink *sink;
    /* Precision: set by the trainer around the strategy's optimizer_step of a step the
     * loss scaler skips. Every strategy's bookkeeping goes on (buckets, all-gathers) while
     * the services' optimizer updates change nothing: no parameter, no state, no counter. */
    int skip_update;
    /* The strategy keeps the f32 master weights (fg_strategy_info.own_master): replicas hold
     * half parameters only, and optimizer_step_at updates the strategy's f32 ones. */
    int own_master;
    /* Copy fence ids the loaders' staging slots use (0 .. fence_count - 1): each replica
     * and stage has an event per id for its batch copies (data/batch_copy.h). */
    int fence_count;
} fg_train_ctx;

/* The backend device a replica created by these services lives on. */
int fg_train_replica_device(const void *replica);

/* The model replica and optimizer inside a replica of these services. */
fg_replica *fg_train_replica_model(const void *replica);
struct fg_optimizer *fg_train_replica_optimizer(const void *replica);
void *fg_train_replica_queue(const void *replica);

/* The sharded-state services of ctx->svc (called by fg_train_services_init). */
void fg_train_services_init_shard(fg_train_ctx *c);
/* The pipeline-stage services of ctx->svc (train_stage.c; called by
 * fg_train_services_init). */
void fg_train_services_init_stage(fg_train_ctx *c);

/* Fills ctx->svc; the other fields must be set by the caller. */
void fg_train_services_init(fg_train_ctx *ctx, int max_batch);

#endif
