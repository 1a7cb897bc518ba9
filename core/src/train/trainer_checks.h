/* What callbacks asked the trainer to measure: the per-step metric sink that host->metric
 * feeds during a fit, phase timing, and the finite check of loss, gradients and input. */
#ifndef FG_TRAINER_CHECKS_H
#define FG_TRAINER_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"
#include "step_sink.h"

struct fg_trainer;

typedef struct fg_checks {
    fg_step_sink sink;         /* per-step metrics of the logging window, during a fit */
    int sink_ready;
    int timing;                /* FG_REQUEST_STEP_TIMING: phases timed, queue synced */
    int64_t finite_every;      /* FG_REQUEST_FINITE_CHECK: every n steps; 0: never */
    int finite_grads;          /* gradients are checked (not under dynamic loss scaling) */
    double nonfinite_inputs;   /* non-finite input values of the checked step's batches */
    const char *event_layer;   /* nonfinite_layer of the next FG_EVENT_NONFINITE */
} fg_checks;

/* The callbacks' requests, into t->checks. */
fg_status fg_trainer_collect_requests(struct fg_trainer *t, fg_error *err);
void fg_trainer_sink_start(struct fg_trainer *t);
void fg_trainer_sink_stop(struct fg_trainer *t);
/* 1 when the step about to be taken (global_step + 1) is checked. */
int fg_trainer_step_checked(const struct fg_trainer *t);
/* Non-finite values among n host floats. */
double fg_count_nonfinite(const float *x, size_t n);
/* Before the optimizer update of a checked step: a non-finite loss, gradient or input
 * sends FG_EVENT_NONFINITE (a callback may stop the run: t->stop). */
fg_status fg_trainer_finite_check(struct fg_trainer *t, fg_error *err);

#endif
