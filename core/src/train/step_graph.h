/* [backend] cuda_graphs (step_graph.c): the trainer's side of a captured training step.
 * After STEP_GRAPH_WARMUP eager steps (every lazy allocation and library plan exists), the
 * next step is captured into a graph (forward, backward, clipping, the fused update) and
 * every later step replays it: the batch copied into fixed device buffers, the per-step
 * optimizer values into device memory, one graph launch, no host synchronisation. Setup
 * refuses, naming the key, what cannot be captured. */
#ifndef FG_STEP_GRAPH_H
#define FG_STEP_GRAPH_H

#include <stdio.h>

#include "config.h"
#include "fulgur/plugin.h"
#include "fulgur/strategy.h"

struct fg_train_ctx;

#define STEP_GRAPH_WARMUP 2

typedef struct fg_step_graph {
    void *stage;   /* the captured stage (strategy single's replica); NULL: graphs off */
    int64_t steps; /* optimizer steps run since setup */
    int capturing; /* this step's work is being captured */
} fg_step_graph;

/* What setup checks, given by the trainer once the callbacks' requests are known. */
typedef struct fg_step_graph_fit {
    const fg_config *cfg;
    struct fg_train_ctx *tctx; /* the stage services: the backend, the stages */
    const char *backend, *strategy_name, *precision; /* the plugins' names, for messages */
    const char *comm_name;    /* the [comm] plugin's name, NULL without one */
    int has_buffers;          /* the model holds buffers (batch-norm running statistics) */
    const fg_strategy_vtable *strategy;
    void *strategy_state;
    int64_t accumulate;       /* [trainer] accumulate_grad_batches */
    double clip_val;          /* [trainer] gradient_clip_val */
    int clip_by_value;        /* [trainer] gradient_clip_algorithm = value */
    int loss_scaling;         /* the precision's dynamic loss scaling, run on the host */
    int timing;               /* a callback times the step's phases */
    int64_t finite_every;     /* a callback checks for inf/NaN every N steps (0: never) */
} fg_step_graph_fit;

/* Reads [backend] cuda_graphs; when true, checks that the fit can be captured and prepares
 * the stage (g->stage NULL: graphs off). */
fg_status fg_step_graph_setup(fg_step_graph *g, const fg_step_graph_fit *fit, fg_error *err);
/* Before a training step's work: the step's optimizer values (lr, the step number `step`)
 * on the device; on the capture step the batch and the start of the capture; on a later
 * step the whole step (*done = 1: the caller runs neither the strategy's step nor the
 * optimizer's, and moves its step counter and rate as that step did). */
fg_status fg_step_graph_before(fg_step_graph *g, struct fg_train_ctx *c, const fg_batch *b,
                               float lr, int64_t step, int *done, fg_error *err);
/* After the capture step's work (st: how it went): ends the capture and runs the step. */
fg_status fg_step_graph_after(fg_step_graph *g, struct fg_train_ctx *c, fg_status st,
                              fg_error *err);
/* At the fit's end: one line on out, which step was captured and how many replayed. */
void fg_step_graph_report(const fg_step_graph *g, FILE *out);

#endif
