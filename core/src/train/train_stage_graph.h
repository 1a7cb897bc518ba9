/* A stage's training step captured into a CUDA graph and replayed (`[backend] cuda_graphs`,
 * backend ABI 1.7; train_stage_graph.c). The trainer (step_graph.c) decides which step is
 * captured; the stage owns the graph and the fixed device buffers it reads: the batch
 * (copied there from the batch copier's buffers before each launch) and the optimizer's
 * per-step values (learning rate, AdamW's bias corrections), which the fused updates read
 * from the device from setup on, in eager steps too. */
#ifndef FG_TRAIN_STAGE_GRAPH_H
#define FG_TRAIN_STAGE_GRAPH_H

#include "train_services.h"

/* FG_UNAVAILABLE naming the key when the stage's step cannot be captured: an update that
 * is not fused (its rate would be captured as a constant) or a loss that counts the kept
 * labels on the host ([model] ignore_index). */
fg_status fg_train_stage_graph_check(const fg_train_ctx *c, void *stage, fg_error *err);
/* Allocates the fixed buffers and points the stage's optimizer at its per-step values.
 * Before the first step. */
fg_status fg_train_stage_graph_prepare(fg_train_ctx *c, void *stage, fg_error *err);
/* Enqueues the copy of the values of optimizer step `step` (1-based) at rate lr. Before
 * every step, eager or not. */
fg_status fg_train_stage_graph_values(fg_train_ctx *c, void *stage, float lr, int64_t step,
                                      fg_error *err);
/* Copies batch b into the fixed buffers (through the batch copier), on the compute queue.
 * A batch of another size than the captured one is refused. */
fg_status fg_train_stage_graph_inputs(fg_train_ctx *c, void *stage, const fg_batch *b,
                                      fg_error *err);
/* Starts capturing the stage's queue; the forward then reads the fixed buffers. */
fg_status fg_train_stage_graph_begin(fg_train_ctx *c, void *stage, fg_error *err);
/* Ends the capture (st: how the captured step's calls went) and launches the graph once:
 * the captured step runs. */
fg_status fg_train_stage_graph_end(fg_train_ctx *c, void *stage, fg_status st, fg_error *err);
/* One later step: launches the graph, and moves what the captured calls moved on the host
 * (the metric count, the optimizer's step counter to `step`, the parameter version). */
fg_status fg_train_stage_graph_replay(fg_train_ctx *c, void *stage, int64_t step,
                                      fg_error *err);

#endif
