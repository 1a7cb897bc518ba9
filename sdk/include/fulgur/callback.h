/* Callback plugins: react to trainer events; may stop training or ask for a checkpoint.
 * Thread rule: called from the trainer's thread, on every rank, in event order. Metrics
 * are already reduced across ranks, so every rank can take the same decision. */
#ifndef FULGUR_CALLBACK_H
#define FULGUR_CALLBACK_H

#include "fulgur/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fg_event_type {
    FG_EVENT_FIT_START = 1,
    FG_EVENT_EPOCH_START = 2,
    FG_EVENT_TRAIN_STEP_END = 3, /* every log_every_n_steps, when metrics were read */
    FG_EVENT_VALIDATION_END = 4,
    FG_EVENT_EPOCH_END = 5,
    FG_EVENT_FIT_END = 6,
    FG_EVENT_TEST_END = 7,
    FG_EVENT_EXCEPTION = 8
} fg_event_type;

typedef struct fg_metric {
    const char *name; /* "train/loss", "val/acc", ... */
    double value;
} fg_metric;

typedef struct fg_event {
    uint32_t struct_size;
    uint32_t type;         /* fg_event_type */
    int64_t epoch;         /* 0-based */
    int64_t global_step;   /* optimizer steps taken */
    int64_t step_in_epoch; /* batches seen in this epoch */
    int64_t steps_per_epoch;
    double learning_rate;
    const fg_metric *metrics;
    uint32_t metric_count;
    int32_t is_rank_zero;  /* only rank 0 writes files */
    const char *run_dir;   /* this run's folder */
    int64_t max_epochs;    /* the fit's epoch limit */
} fg_event;

typedef struct fg_callback_action {
    uint32_t struct_size;
    int32_t stop;              /* set to end training after this event */
    char reason[256];          /* why, printed by the trainer */
    int32_t save_checkpoint;   /* set to ask for a checkpoint at this point */
    char checkpoint_path[512]; /* where; empty: the trainer picks */
} fg_callback_action;

typedef struct fg_callback_vtable {
    uint32_t struct_size;
    fg_status (*on_event)(void *state, const fg_event *event, fg_callback_action *action,
                          fg_error *err);
} fg_callback_vtable;

#ifdef __cplusplus
}
#endif
#endif
