/* The trainer's events to its callbacks, and the metrics of the latest events by name
 * (checkpoint metadata and `best` read them). */
#ifndef FG_TRAINER_EVENTS_H
#define FG_TRAINER_EVENTS_H

#include "fulgur/callback.h"

#define FG_MAX_METRICS 64

struct fg_trainer;

/* Metrics of the latest events, by name. */
typedef struct fg_metric_table {
    char names[FG_MAX_METRICS][64];
    double values[FG_MAX_METRICS];
    int count;
} fg_metric_table;

typedef struct fg_trainer_events {
    fg_metric_table metrics;
    int progress_bar; /* a progress callback draws on the terminal: no per-step, epoch or
                       * validation lines of a fit, its line erased before each event */
} fg_trainer_events;

/* Event `type` with its metrics to every callback, then what each asked (a checkpoint, a
 * stop: t->stop). */
fg_status fg_trainer_emit(struct fg_trainer *t, int type, const fg_metric *metrics, uint32_t n,
                          fg_error *err);

#endif
