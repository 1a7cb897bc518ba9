/* [model] batch_groups = G: a training batch taken as G groups of batch / G samples, every
 * sum over the batch per group and the groups' sums added in order, as ddp on G ranks takes
 * them: each rank sums its own samples, then the all-reduce adds the ranks' sums (for G = 2
 * one addition, whatever its order: the same bits). The loader draws the groups as the ranks
 * draw their shards (data/sampler.h); this file runs the layers.
 *
 * A layer with parameters runs forward and backward once per group on the group's rows,
 * with a rank's shapes (so the same kernels and blockings) and its own part of the layer's
 * per-sample arena bytes; group g > 0's gradients go to scratch and are added to group 0's.
 * batchnorm runs its groups itself: its statistics and its dx need the whole batch's sums
 * (layer_batchnorm.c). A layer without parameters works sample by sample and runs once over
 * the batch. */
#ifndef FG_BATCH_GROUPS_H
#define FG_BATCH_GROUPS_H

#include "model.h"

/* At build: refuses, naming the layer, what groups cannot reproduce (dropout's one noise
 * stream, tied weights, fp8, channels-last, padded logits, per-sample state after fixed
 * state). */
fg_status fg_batch_groups_check(const fg_model *m, const fg_config *cfg, fg_error *err);

/* Scratch a replica of layers [first, end) needs: device bytes for one layer's gradients
 * (grad_size bytes per value), host doubles for a batchnorm's groups of sums. */
size_t fg_batch_groups_grad_bytes(const fg_model *m, size_t first, size_t end,
                                  size_t grad_size);
size_t fg_batch_groups_host_doubles(const fg_model *m, size_t first, size_t end);

/* The layer's training forward / backward over c->groups groups (c->groups 1: the layer's
 * own pass). */
fg_status fg_layer_forward_grouped(const fg_layer *l, const fg_layer_ctx *c, fg_error *err);
fg_status fg_layer_backward_grouped(const fg_model *m, const fg_layer *l,
                                    const fg_layer_ctx *c, fg_error *err);

/* For layers that run their groups themselves: whether c->batch splits into c->groups (an
 * error naming the layer if not), group g > 0's gradient of tensor j (in c->group_grads),
 * and adding it into tensor j's gradient (count values). */
fg_status fg_group_batch_check(const fg_layer *l, const fg_layer_ctx *c, fg_error *err);
void *fg_group_grad(const fg_layer_ctx *c, int j);
fg_status fg_group_grad_add(const fg_layer_ctx *c, int j, size_t count, fg_error *err);
/* Adds `groups` runs of `count` f64 values of device memory (run g at sums + g * count)
 * into the first run, in group order, through c->group_host: a synchronised round trip. */
fg_status fg_group_sums_add(const fg_layer_ctx *c, double *sums, size_t count, int groups,
                            fg_error *err);

#endif
