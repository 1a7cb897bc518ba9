/* What the model's files share and nothing else sees: the model's fields. */
#ifndef FG_MODEL_INTERNAL_H
#define FG_MODEL_INTERNAL_H

#include "graph.h"
#include "layout.h"
#include "loss.h"
#include "model.h"

#include "core_util.h"

static inline size_t align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

struct fg_model {
    fg_shape input;
    int num_classes;                  /* outputs of the last layer */
    fg_loss_kind loss;
    size_t layer_count;
    fg_layer *layers;
    size_t tensor_count, tensor_cap;
    fg_tensor_info *tensors;
    size_t params_size, buffers_size; /* floats, padding included */
    size_t param_count;               /* trainable values */
    uint64_t seed;                    /* of the last fg_model_init_params */
    fg_role_dtypes dt;                /* of activations, working params, grads */
    int typed;                        /* some dtype of dt is not f32 */
    fg_master_owner master;           /* who keeps the f32 master of half params (model.h) */
    int keep_probs;                   /* replicas keep the loss's softmax (predict, generate) */
    int64_t pad_vocab_to;             /* [model] pad_vocab_to: the logits' row stride */
    int positions;                    /* labels per sample: 1, or T of (T, classes) logits */
    int recompute;                    /* [model] recompute: every block's default */
    int sync_batchnorm;               /* [model] sync_batchnorm: statistics across replicas */
    int64_t batch_groups;             /* [model] batch_groups: sums per group (batch_groups.c) */
    float label_smoothing;            /* [model] label_smoothing: eps of the xent, 0: none */
    int memory_format;                /* [model] memory_format: fg_memory_format (layout.h) */
    fg_fp8_recipe fp8;                /* linear layers' fp8 gemms (precision.fp8-mixed) */
    char fp8_note[16384];             /* the model's note, one line each: what fp8 did with
                                       * each layer's linear maps, the memory format (layout.c) */
    int synced_layers;                /* layers that reduce across replicas (batch norm) */
    /* the graph (graph.c): named inputs somewhere; gradient slots of a whole replica, the
     * loss's and the model input's */
    int is_graph;
    size_t relu_after_pool;  /* relu / max pooling pairs run pooling first (layer_order.c) */
    int grad_slots, output_slot, input_slot;
};

#endif
