/* The trainer's state, shared by its files: trainer.c (setup, teardown, verbs),
 * trainer_keys.c ([trainer] and [data] keys), trainer_loop.c (fit and evaluation loops),
 * trainer_ckpt.c (checkpoints and resume), run_dir.c (versioned run folders). */
#ifndef FG_TRAINER_INTERNAL_H
#define FG_TRAINER_INTERNAL_H

#include <stdio.h>

#include "dataloader.h"
#include "fulgur/backend.h"
#include "fulgur/callback.h"
#include "fulgur/data.h"
#include "fulgur/precision.h"
#include "fulgur/strategy.h"
#include "model.h"
#include "requeue.h"
#include "scheduler.h"
#include "step_sink.h"
#include "train_services.h"
#include "trainer.h"

#define FG_MAX_CALLBACKS 16
#define FG_MAX_METRICS 64
#define FG_MAX_REPORTED_DEVICES 8

typedef struct fg_plugin_ref {
    const void *vt;
    void *state;
    const fg_instance *inst;
} fg_plugin_ref;

typedef struct fg_data_split {
    const char *name;
    void *dataset;
    fg_dataset_info info;
    fg_dataloader *loader;
} fg_data_split;

/* "A fraction of the epoch or a count of batches", as Lightning's float/int keys. */
typedef struct fg_batch_limit {
    int is_fraction;
    double fraction;
    int64_t count;
} fg_batch_limit;

/* Metrics of the latest events, by name, for checkpoint metadata and `best`. */
typedef struct fg_metric_table {
    char names[FG_MAX_METRICS][64];
    double values[FG_MAX_METRICS];
    int count;
} fg_metric_table;

/* Where an interrupted fit resumes. */
typedef struct fg_resume_point {
    int active;
    int64_t epoch;          /* the epoch to continue */
    int64_t batches_done;   /* batches of that epoch already trained */
    double sum_loss, sum_correct, sum_n; /* the epoch's training sums so far */
} fg_resume_point;

typedef struct fg_trainer {
    fg_runtime *rt;
    const fg_config *cfg;
    FILE *out;
    fg_verb verb;
    fg_plugin_ref backend, data, strategy, precision;
    fg_plugin_ref callbacks[FG_MAX_CALLBACKS];
    int callback_count;
    fg_data_split train, val, test, predict;
    fg_model *model;
    float *init_params, *init_buffers;
    fg_train_ctx tctx;
    float lr; /* the learning rate of the next optimizer step */
    fg_scheduler *scheduler;
    int strategy_ready;
    int rank, world_size;
    int devices; /* this process drives them (fg_strategy_info.devices) */
    fg_memory_report memory[FG_MAX_REPORTED_DEVICES];
    char run_dir[4096];

    /* [trainer] */
    int64_t max_epochs, max_steps, accumulate, num_sanity_val_steps, fast_dev_run;
    int64_t check_val_every_n_epoch, log_every, seed;
    double max_time_s, clip_val;
    int clip_by_value, test_after_fit, save_on_exception;
    fg_batch_limit val_check_interval, limit_train, limit_val, limit_test, overfit;
    char ckpt_path[4096], final_checkpoint[4096];
    /* [data] loader keys */
    int64_t batch_size, eval_batch_size, num_workers, prefetch;
    int pin_memory, shuffle, drop_last;

    /* progress */
    int64_t epoch, global_step, step_in_epoch, steps_per_epoch;
    int64_t batches_done;      /* batches of this epoch trained */
    int epoch_training_done;   /* every batch of this epoch trained: a checkpoint resumes at the next */
    double epoch_sum_loss, epoch_sum_correct, epoch_sum_n;
    double fit_start_time;
    int stop;
    int progress_bar; /* a progress callback draws on the terminal: no per-step, epoch or
                       * validation lines of a fit, its line erased before each event */
    fg_resume_point resume;
    fg_metric_table metrics;
    struct fg_ckpt *loaded; /* the checkpoint being resumed from, between the two loads */
    fg_requeue requeue;     /* [trainer] requeue_signal (requeue.c) */

    /* What callbacks asked the trainer to measure (trainer_checks.c). */
    fg_step_sink sink;         /* per-step metrics of the logging window, during a fit */
    int sink_ready;
    int timing;                /* FG_REQUEST_STEP_TIMING: phases timed, queue synced */
    int64_t finite_every;      /* FG_REQUEST_FINITE_CHECK: every n steps; 0: never */
    int finite_grads;          /* gradients are checked (not under dynamic loss scaling) */
    double nonfinite_inputs;   /* non-finite input values of the checked step's batches */
    const char *event_layer;   /* nonfinite_layer of the next FG_EVENT_NONFINITE */

    /* precision (trainer_precision.c) */
    fg_precision_info prec;    /* the plugin's dtypes */
    int loss_scaling;          /* dynamic loss scale: unscale, finite check, maybe skip */
} fg_trainer;

/* trainer_keys.c */
fg_status fg_trainer_read_keys(fg_trainer *t, fg_error *err);
/* Batches of an epoch of `available` batches under a limit. */
int64_t fg_batch_limit_apply(const fg_batch_limit *l, int64_t available);

/* trainer_loop.c */
fg_status fg_trainer_fit(fg_trainer *t, fg_error *err);
fg_status fg_trainer_evaluate_split(fg_trainer *t, fg_data_split *s, const fg_batch_limit *limit,
                                    const char *prefix, int event, fg_error *err);
fg_status fg_trainer_emit(fg_trainer *t, int type, const fg_metric *metrics, uint32_t n,
                          fg_error *err);
double fg_now_seconds(void);

/* trainer_memory.c: per-device bytes by role from the strategy, printed at setup; as
 * memory/... metrics (names kept in `names`) for the fit-start event. */
fg_status fg_trainer_report_memory(fg_trainer *t, fg_error *err);
uint32_t fg_trainer_memory_metrics(const fg_trainer *t, fg_metric *out, char (*names)[64],
                                   uint32_t capacity);

/* trainer_checks.c: the callbacks' requests, the per-step sink host->metric feeds
 * during a fit, and the finite check of loss, gradients and input. */
fg_status fg_trainer_collect_requests(fg_trainer *t, fg_error *err);
void fg_trainer_sink_start(fg_trainer *t);
void fg_trainer_sink_stop(fg_trainer *t);
/* 1 when the step about to be taken (global_step + 1) is checked. */
int fg_trainer_step_checked(const fg_trainer *t);
/* Non-finite values among n host floats. */
double fg_count_nonfinite(const float *x, size_t n);
/* Before the optimizer update of a checked step: a non-finite loss, gradient or input
 * sends FG_EVENT_NONFINITE (a callback may stop the run: t->stop). */
fg_status fg_trainer_finite_check(fg_trainer *t, fg_error *err);
/* dst (a checkpoint's second name) made a hard link of src, or a copy where the file
 * system has none, through a temporary name and a rename. */
fg_status fg_checkpoint_link(const char *src, const char *dst, fg_error *err);

/* trainer_predict.c: class probabilities of the predict split to run_dir/predictions.csv */
fg_status fg_trainer_predict(fg_trainer *t, fg_error *err);

/* trainer_precision.c: the precision plugin's dtypes checked (check) and given to the
 * model (apply, after it is built); the scale of each backward (the mean over the
 * accumulated micro-batches times the loss scale); before an optimizer step under loss
 * scaling: gradients synced, unscaled and checked (global norm finite), *skip set when the
 * scaler skips the step; the scaler's state for checkpoints (0: none) and from one. */
fg_status fg_trainer_check_precision(fg_trainer *t, fg_error *err);
fg_status fg_trainer_apply_precision(fg_trainer *t, fg_error *err);
/* trainer_ops.c: the backend runs every op the run needs, in its dtypes (after the
 * precision is applied, before the strategy is set up). */
fg_status fg_trainer_check_backend(fg_trainer *t, fg_error *err);
float fg_trainer_grad_scale(const fg_trainer *t);
fg_status fg_trainer_unscale_grads(fg_trainer *t, int *skip, fg_error *err);
int fg_trainer_scaler_state(const fg_trainer *t, fg_loss_scaler_state *out);
fg_status fg_trainer_restore_scaler(fg_trainer *t, const struct fg_ckpt *c, fg_error *err);
/* "loss scale: S, N step(s) skipped" after a fit under loss scaling. */
void fg_trainer_report_precision(fg_trainer *t);

/* trainer_ckpt.c */
fg_status fg_trainer_save_checkpoint(fg_trainer *t, const char *path, fg_error *err);
/* Resolves ckpt_path (last, best or a file) and loads its weights into the initial host
 * parameters (before the strategy creates replicas), keeping the file open for the state. */
fg_status fg_trainer_load_weights(fg_trainer *t, fg_error *err);
/* After setup: optimizer state, scheduler, progress and loader position from that file. */
fg_status fg_trainer_load_training_state(fg_trainer *t, fg_error *err);
void fg_trainer_close_checkpoint(fg_trainer *t);
/* FNV-1a of the primary replica's parameters: equal digests, bitwise-equal weights. */
fg_status fg_trainer_weights_digest(fg_trainer *t, uint64_t *digest, fg_error *err);

/* run_dir.c: DIR/NAME/version_N (the next free N), with config.ini inside. */
fg_status fg_run_dir_create(const fg_config *cfg, const char *root, const char *name,
                            char *out, size_t size, fg_error *err);
/* Writes the resolved config (every section and key as the run saw them). */
fg_status fg_config_write_ini(const fg_config *cfg, const char *path, fg_error *err);
/* mkdir -p */
fg_status fg_mkdirs(const char *path, fg_error *err);

#endif
