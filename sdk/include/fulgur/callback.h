/* Callback plugins: react to trainer events; may stop training or ask for a checkpoint.
 * Thread rule: called from the trainer's thread, on every rank, in event order. Metrics
 * are already reduced across ranks, so every rank can take the same decision.
 * The terminal: while callback.progress draws its bar on a terminal, fulgur's trainer
 * erases the bar's line ("\r\033[K") before each event and calls the progress callback
 * last, so a callback that prints a line gets a clean line of its own. */
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
    FG_EVENT_EXCEPTION = 8,
    /* a step checked for a callback that asked (FG_REQUEST_FINITE_CHECK)
     * has a non-finite loss or gradient. Sent before that step's optimizer update, which
     * is skipped when a callback stops the run. Metrics: train/step_loss (mean since the
     * last log), grad/nonfinite_layers, input/nonfinite_values; field nonfinite_layer. */
    FG_EVENT_NONFINITE = 9
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
    /* FG_EVENT_NONFINITE: the layer (its [layer.NAME] section without the
     * prefix) whose parameter gradients are non-finite, the first in backward order, i.e.
     * the nearest the loss; NULL when every gradient is finite (the loss alone is not) or
     * the strategy cannot tell. NULL for other events. */
    const char *nonfinite_layer;
} fg_event;

typedef struct fg_callback_action {
    uint32_t struct_size;
    int32_t stop;              /* set to end training after this event */
    char reason[256];          /* why, printed by the trainer */
    int32_t save_checkpoint;   /* set to ask for a checkpoint at this point */
    char checkpoint_path[512]; /* where; empty: the trainer picks */
    /* a second name for the same checkpoint (save_last's last.safetensors),
     * relative to the run folder unless absolute; empty: none. The trainer makes it a hard
     * link of checkpoint_path, or writes a copy where the file system has no hard links,
     * through a temporary name and a rename either way: a reader never sees it torn. */
    char checkpoint_also_path[512];
} fg_callback_action;

/* What a callback needs the trainer to measure. */
#define FG_REQUEST_STEP_TIMING 1u  /* every step split into time/... metrics on step events;
                                    * the trainer waits for the device queue between phases,
                                    * a small cost where the backend runs asynchronously */
#define FG_REQUEST_FINITE_CHECK 2u /* check loss, gradients (per layer) and input for
                                    * non-finite values; FG_EVENT_NONFINITE when one is */

typedef struct fg_callback_requests {
    uint32_t struct_size;
    uint32_t flags;             /* FG_REQUEST_* */
    int64_t finite_check_every; /* FG_REQUEST_FINITE_CHECK: every n optimizer steps (>= 1) */
} fg_callback_requests;

typedef struct fg_callback_vtable {
    uint32_t struct_size;
    fg_status (*on_event)(void *state, const fg_event *event, fg_callback_action *action,
                          fg_error *err);
    /* NULL: nothing to ask. Called once per instance before training
     * starts; fills out (struct_size set by the trainer). */
    fg_status (*requests)(void *state, fg_callback_requests *out, fg_error *err);
} fg_callback_vtable;

/* A callback plugin in one statement: its vtable (on_event_, and requests_ or NULL) and
 * its descriptor (FG_PLUGIN_DEFINE, kind callback, min_host_minor 0). */
#define FG_CALLBACK_PLUGIN_DEFINE(name_, version_, description_, options_, init_, deinit_, \
                                  on_event_, requests_)                                   \
    static const fg_callback_vtable fg_callback_plugin_vtable = {                         \
        .struct_size = sizeof(fg_callback_vtable), .on_event = (on_event_),               \
        .requests = (requests_)};                                                         \
    FG_PLUGIN_DEFINE_(FG_KIND_CALLBACK, 0, name_, version_, description_, init_, deinit_,  \
                      &fg_callback_plugin_vtable, options_)

#ifdef __cplusplus
}
#endif
#endif
