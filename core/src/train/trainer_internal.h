/* The trainer: a small loop state (the plugins it bound, the data splits, the model and
 * its services, the schedule) and the parts it owns, each with its own header and narrow
 * interface: keys (trainer_keys.h), progress and resume (progress.h), checks and the
 * per-step metric sink (trainer_checks.h), events and the metric table
 * (trainer_events.h), the loss scaler (trainer_precision.h), the checkpointer
 * (trainer_ckpt.h) and requeue (requeue.h). A file includes the headers of the parts it
 * calls; functions are declared there, never here. */
#ifndef FG_TRAINER_INTERNAL_H
#define FG_TRAINER_INTERNAL_H

#include <stdio.h>

#include "data_split.h"
#include "dataloader.h"
#include "fulgur/backend.h"
#include "fulgur/callback.h"
#include "fulgur/data.h"
#include "fulgur/precision.h"
#include "fulgur/strategy.h"
#include "decay_groups.h"
#include "fp8_amax.h"
#include "lm_metrics.h"
#include "model.h"
#include "optimizer.h"
#include "progress.h"
#include "requeue.h"
#include "scheduler.h"
#include "step_graph.h"
#include "train_services.h"
#include "trainer.h"
#include "trainer_checks.h"
#include "trainer_ckpt.h"
#include "trainer_events.h"
#include "trainer_keys.h"
#include "trainer_precision.h"

#define FG_MAX_CALLBACKS 16
#define FG_MAX_REPORTED_DEVICES 8

typedef struct fg_plugin_ref {
    const void *vt;
    void *state;
    const fg_instance *inst;
} fg_plugin_ref;

typedef struct fg_trainer {
    fg_runtime *rt;
    const fg_config *cfg;
    FILE *out;
    FILE *text_out;            /* generate's text: the runtime's output (t->out is stderr then) */
    fg_verb verb;
    fg_plugin_ref backend, data, strategy, precision;
    fg_plugin_ref callbacks[FG_MAX_CALLBACKS];
    int callback_count;
    fg_data_split train, val, test, predict;
    fg_model *model;
    fg_lm_metrics lm;          /* perplexity and bits per byte of a language model */
    float *init_params, *init_buffers;
    fg_train_ctx tctx;         /* the services the strategy drives */
    fg_scheduler *scheduler;
    fg_decay_groups decay; /* [optimizer] weight decay per tensor (runs NULL: all) */
    fg_optimizer_config optim; /* [optimizer], read once (fg_trainer_read_keys) */
    float lr;                  /* the learning rate of the next optimizer step */
    int strategy_ready;
    int rank, world_size;
    int devices; /* this process drives them (fg_strategy_info.devices) */
    fg_memory_report memory[FG_MAX_REPORTED_DEVICES];
    char run_dir[4096];
    int stop;                  /* a callback, the time limit or a requeue ends the fit */

    /* the parts */
    fg_trainer_keys keys;
    fg_progress progress;
    fg_checks checks;
    fg_trainer_events events;
    fg_scaler scaler;
    fg_checkpointer ckpt;
    fg_requeue requeue;        /* [trainer] requeue_signal */
    fg_step_graph graph;       /* [backend] cuda_graphs */
    fg_fp8_amax_sync fp8_amax; /* fp8-mixed across ranks or replicas: the amax reduction */
} fg_trainer;

#endif
