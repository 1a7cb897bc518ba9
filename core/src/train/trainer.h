/* The trainer: fit / validate / test / predict loops over the configured plugins. */
#ifndef FG_TRAINER_H
#define FG_TRAINER_H

#include <stdio.h>

#include "config.h"
#include "data_split.h"
#include "fulgur/backend.h"
#include "fulgur/strategy.h"
#include "model.h"
#include "runtime.h"

/* What a verb that runs on the trainer's set-up model reads (predict, generate, export):
 * built by the trainer after setup; the verbs never see the trainer. */
typedef struct fg_verb_model {
    const fg_config *cfg;
    fg_model *model;
    const float *init_params; /* host: the parameters the model was loaded with */
    FILE *out;                /* messages */
    FILE *text_out;           /* generate's text (NULL: stdout) */
    const char *run_dir;
    int world_size;
    const fg_backend_vtable *be;
    void *bs;
    const fg_strategy_vtable *strategy; /* its primary_replica holds the whole model */
    void *strategy_state;
    const char *strategy_name;
    const fg_train_services *svc;      /* the stage services (forward) */
    const fg_data_split *predict;      /* the predict split and its loader */
    int64_t eval_batch_size;           /* [data] eval_batch_size: the loader's largest batch */
} fg_verb_model;

/* The verbs that run on the trainer's set-up model but live above train/ (verbs/: predict,
 * generate, export): handed down by the caller, so train/ never calls verbs/. */
typedef struct fg_trainer_verbs {
    fg_status (*predict)(const fg_verb_model *vm, fg_error *err);
    fg_status (*generate)(const fg_verb_model *vm, fg_error *err);
    fg_status (*export_weights)(const fg_verb_model *vm, fg_error *err);
} fg_trainer_verbs;

fg_status fg_trainer_run(fg_runtime *rt, fg_verb verb, const fg_trainer_verbs *verbs, fg_error *err);

#endif
