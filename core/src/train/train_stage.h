/* A stage of the train services: layers [first, first + count) of the model on one
 * device, the whole model being the stage of every layer. Private to train_services.c
 * (creation, memory, layout), train_stage_step.c (the work of a step) and
 * train_stage_graph.c (its capture into a CUDA graph). */
#ifndef FG_TRAIN_STAGE_H
#define FG_TRAIN_STAGE_H

#include "batch_copy.h"
#include "optimizer.h"
#include "pinned_ring.h"
#include "train_services.h"

typedef struct fg_train_stage {
    int device;
    int max_batch;           /* samples of one micro-batch */
    int chunks;              /* activation arenas */
    int is_first, is_last;   /* the model's input / loss are here */
    fg_replica **arena;      /* (chunks): [0] owns the slices, the others share them */
    int *rows;               /* (chunks): samples of each chunk's last forward */
    fg_optimizer *opt;
    void *queue;
    fg_stage_spec spec;      /* as created, opt range resolved */
    size_t param_lo, param_n, buffer_lo, buffer_n; /* elements of the model's flat regions */
    size_t opt_lo, opt_n;    /* the optimizer's range of the flat parameters */
    size_t in_elems;         /* floats per sample at the stage's input */
    fg_batch_copier *copier; /* an area per chunk: (max_batch, in...) samples on the first
                              * stage, (max_batch) labels on the last; NULL on the others */
    float *metrics_dev;      /* (2): loss sum, correct predictions */
    float *scratch_dev;      /* (2): a reduction result; the clip factor on the device */
    int64_t clip_step;       /* the step whose update reads scratch_dev[1] (0: none) */
    fg_loss_scale_dev *scaler_dev; /* the loss scaler on the device (NULL: none) */
    void *x_act;             /* (max_batch, in...) in a half activation dtype; else NULL */
    double count;            /* samples since the last metrics reset (last stage) */
    uint64_t cast_version;   /* ctx param_version the working parameters were cast at */
    void (*grad_ready)(void *user, int64_t offset, int64_t count);
    void *grad_ready_user;
    fg_layer_memory_hook mem_hook;
    void *mem_user;
    /* [backend] cuda_graphs (train_stage_graph.c): the captured step and the fixed device
     * buffers it reads, written before each launch */
    void *graph;             /* NULL before the capture */
    void *graph_x;           /* (max_batch, in...) 4-byte samples the captured forward reads */
    int32_t *graph_y;        /* (max_batch, positions) labels */
    float *graph_values_dev; /* (3) the optimizer's per-step values (lr_dev, step_dev) */
    fg_pinned_ring graph_ring; /* their page-locked host sources, a slot a step */
    int graph_inputs;        /* 1 while capturing: forward reads graph_x/graph_y, no copier */
    int graph_rows;          /* samples of the captured batch */
    int syncs;               /* holds a layer that calls the replica all-reduce */
    fg_replica_allreduce_fn allreduce; /* the strategy's (set_replica_allreduce); NULL: none */
    struct fg_train_stage *next_live; /* the next live stage (ctx->live) */
} fg_train_stage;

/* Element `at` of the model's flat region held from element `lo` in elements of `size`
 * bytes: untyped device memory. */
static inline void *fg_train_stage_at(void *base, size_t lo, size_t at, size_t size)
{
    return (char *)base + (at - lo) * size;
}

#endif
