/* [backend] cuda_graphs (step_graph.c): the trainer's side of a captured training step.
 * After STEP_GRAPH_WARMUP eager steps (every lazy allocation and library plan exists), the
 * next step is captured into a graph (forward, backward, clipping, the fused update) and
 * every later step replays it: the batch copied into fixed device buffers, the per-step
 * optimizer values into device memory, one graph launch, no host synchronisation. Setup
 * refuses, naming the key, what cannot be captured. */
#ifndef FG_STEP_GRAPH_H
#define FG_STEP_GRAPH_H

#include "fulgur/plugin.h"
#include "fulgur/strategy.h"

struct fg_trainer;

#define STEP_GRAPH_WARMUP 2

typedef struct fg_step_graph {
    void *stage;   /* the captured stage (strategy single's replica); NULL: graphs off */
    int64_t steps; /* optimizer steps run since setup */
    int capturing; /* this step's work is being captured */
} fg_step_graph;

/* Reads [backend] cuda_graphs; when true, checks that the fit can be captured (after the
 * callbacks' requests are known) and prepares the stage. */
fg_status fg_step_graph_setup(struct fg_trainer *t, fg_error *err);
/* Before a training step's work: the step's optimizer values on the device; on the capture
 * step the batch and the start of the capture; on a later step the whole step (*done = 1:
 * the caller runs neither the strategy's step nor the optimizer's). */
fg_status fg_step_graph_before(struct fg_trainer *t, const fg_batch *b, int *done,
                               fg_error *err);
/* After the capture step's work (st: how it went): ends the capture and runs the step. */
fg_status fg_step_graph_after(struct fg_trainer *t, fg_status st, fg_error *err);
/* At the fit's end: one line on t->out, which step was captured and how many replayed. */
void fg_step_graph_report(const struct fg_trainer *t);

#endif
