/* strategy.sharded internals: ZeRO stages 1, 2 and 3, one process per device.
 *
 * The flat parameter buffer (P floats) is cut into N contiguous shards of S floats (S =
 * P / N rounded up to 16 floats); rank r owns [r*S, r*S + S) ∩ [0, P), `mine` floats.
 *   stage 1: full params and grads; optimizer state for the shard only. Gradients are
 *            all-reduced in buckets during backward (as ddp); each rank updates its shard
 *            and the shards are all-gathered into every rank's params.
 *   stage 2: full params; no full gradient buffer. Backward writes each layer's gradients
 *            into one of two bucket buffers (through the layer memory hook); a full bucket
 *            is reduce-scattered in place while backward goes on, and this rank's piece is
 *            copied (or, accumulating, added) into its gradient shard.
 *   stage 3: stage 2, and the parameters themselves are sharded: before each layer's
 *            forward and backward its range is all-gathered into one of two working
 *            buffers, the next layer's gather started at once (prefetch).
 * Buckets are contiguous ranges of the flat buffer, filled from the top down (backward
 * comes last layer first); a buffer position p holds flat element hi - (cap - p). */
#ifndef FULGUR_STRATEGY_SHARDED_H
#define FULGUR_STRATEGY_SHARDED_H

#include <stdint.h>

#include "fulgur/backend.h"
#include "fulgur/comm.h"
#include "fulgur/strategy.h"
#include "offload_optimizer.h"
#include "replica_allreduce.h"
#include "strategy_plugin.h"

#define SHARD_ALIGN 16

typedef struct sh_bucket {
    float *buf;             /* (cap) */
    void *request;          /* the reduce-scatter in flight; NULL when none */
    int64_t lo, hi;         /* flat range it reduces */
    int64_t piece_lo, piece_n; /* this rank's part of [lo, hi) */
    int accumulate;         /* add the piece into the grad shard (else copy) */
} sh_bucket;

/* A stage-3 working buffer: one layer's gathered parameters. */
typedef struct sh_slot {
    float *buf;     /* (work_cap) */
    int layer;      /* param-layer index it holds or is gathering; -1: none */
    void *request;  /* the all-gather in flight */
} sh_slot;

typedef struct sharded {
    const fg_host *host;
    const fg_comm_vtable *comm;
    void *comm_state;
    const fg_backend_vtable *be;
    void *be_state;
    fg_comm_topology topo;
    int stage;
    double bucket_mb;
    int device;

    const fg_train_services *svc;
    void *replica;
    void *queue;
    int64_t P, S, lo, mine;   /* flat size, shard size, this rank's shard [lo, lo + mine) */
    size_t *counts;           /* (N) scratch for v-collectives */
    float *scalar;            /* (1) device scalar for norms */

    /* layers with parameters, in model order */
    int32_t layers;           /* layers with parameters */
    int64_t *layer_off, *layer_n; /* (layers) their ranges of the flat parameters */
    int32_t *param_layer;     /* (model layers) index among the layers with parameters, or -1 */
    int32_t model_layers;

    /* stage 1: ddp-like all-reduce buckets over the full gradient buffer */
    float *params, *grads;    /* the replica's (full) buffers, stage 1/2 params, stage 1 grads */
    int64_t bucket_elems;
    void **ar_req;            /* (max_ar) */
    int ar_count, max_ar;
    int64_t pending_hi;
    int reducing;

    /* stage 2/3: gradient shard and the two bucket buffers */
    float *gshard;            /* (mine) reduced gradients of the shard */
    int64_t cap;              /* floats of a bucket buffer */
    sh_bucket bk[2];
    int cur;                  /* bucket being filled */
    int64_t cur_lo, cur_hi;
    int micro;                /* micro_index of the running backward */

    /* stage 3: parameter shard, working buffers, and the full copy evaluation uses */
    float *pshard;            /* (mine) */
    int64_t work_cap;
    sh_slot slot[2];
    float *eval_full;         /* (P) between an eval_step and the next train_step */

    fg_status hook_status;    /* the first failure inside a void hook */
    fg_error hook_err;
    int synced;
    int64_t steps;
    int per_rank_ckpt;        /* sharded_checkpoint: one checkpoint file per rank */

    /* Stages 1-2 under mixed precision (fg_train_services.strategy_master): the replica's
     * params and grads, the bucket buffers and the gradient shard are half (pdt, gdt; the
     * pointers untyped, element i at byte i * size), and this rank keeps the f32 master of
     * its shard only. */
    uint32_t pdt, gdt;
    size_t psz, gsz;          /* element sizes */
    float *master;            /* (mine) f32 master shard; NULL when the params are f32 */
    float *zeros;             /* stage 2 with half grads: cap zero half elements (padding) */

    /* offload_optimizer = host (stages 1-2): this rank's f32 master shard and its optimizer
     * state in host memory, updated there (sharded_offload.c); master stays NULL */
    int offload;
    fg_offload *off;

    /* batch-norm running statistics: the replica's whole region at every stage, rank 0's
     * broadcast at setup and when the metrics are read after training forwards (as ddp) */
    fg_plugin_rank0_buffers buffers;
    fg_plugin_comm_allreduce allreduce; /* [model] sync_batchnorm's sums across ranks */
} sharded;

/* Element i of an untyped buffer of elements of esz bytes. */
static inline void *sh_at(void *base, int64_t i, size_t esz)
{
    return (char *)base + (size_t)i * esz;
}

/* Overlap of [a, b) with rank k's shard, in floats. */
int64_t sh_piece(const sharded *s, int k, int64_t a, int64_t b);
/* counts[k] = sh_piece(k, a, b) for every rank. */
void sh_counts(sharded *s, int64_t a, int64_t b);

/* sharded_grads.c */
void sh_ar_begin(sharded *s, int reduce);
void sh_on_grad_ready(void *user, int64_t offset, int64_t count);
fg_status sh_ar_flush(sharded *s, fg_error *err);
fg_status sh_ar_wait(sharded *s, fg_error *err);
void sh_rs_begin(sharded *s, int micro);
fg_status sh_rs_map(sharded *s, int64_t offset, float **grads, fg_error *err);
fg_status sh_rs_flush(sharded *s, fg_error *err);
fg_status sh_rs_wait_all(sharded *s, fg_error *err);
void sh_drain(sharded *s);

/* sharded_params.c */
fg_status sh_memory_hook(void *user, int32_t layer, int32_t phase, int64_t offset,
                         int64_t count, void **params, void **grads, fg_error *err);
fg_status sh_gather_params(sharded *s, float *staging, fg_error *err);
void sh_slots_invalidate(sharded *s);
fg_status sh_eval_gather(sharded *s, fg_error *err);
void sh_eval_release(sharded *s);


/* sharded_offload.c */
fg_status sh_offload_setup(sharded *s, fg_error *err);
fg_status sh_offload_step(sharded *s, const fg_step_args *args, fg_error *err);
/* The f32 master of this rank's shard where one is kept apart from the replica's params
 * (mixed precision): the device's, or the host's under offload (*dev -1); NULL otherwise. */
const float *sh_master(const sharded *s, int *dev);
/* Optimizer state slot i of the shard (mine floats), NULL past the last; *dev as above. */
float *sh_state_slot(sharded *s, int i, int *dev);

/* sharded_state.c */
fg_status sh_gather_state(void *state, float *params, float *buffers, float *opt_state,
                          fg_error *err);
fg_status sh_scatter_state(void *state, const float *opt_state, fg_error *err);
fg_status sh_memory_report(void *state, int i, fg_memory_report *out, fg_error *err);
fg_status sh_shard_describe(void *state, fg_shard_desc *out, fg_error *err);
fg_status sh_shard_read(void *state, float *params, float *buffers, float *opt_state,
                        fg_error *err);

#endif
