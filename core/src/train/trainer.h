/* The trainer: fit / validate / test / predict loops over the configured plugins. */
#ifndef FG_TRAINER_H
#define FG_TRAINER_H

#include "runtime.h"

struct fg_trainer;

/* The verbs that run on the trainer's set-up model but live above train/ (verbs/: predict,
 * generate, export): handed down by the caller, so train/ never calls verbs/. */
typedef struct fg_trainer_verbs {
    fg_status (*predict)(struct fg_trainer *t, fg_error *err);
    fg_status (*generate)(struct fg_trainer *t, fg_error *err);
    fg_status (*export_weights)(struct fg_trainer *t, fg_error *err);
} fg_trainer_verbs;

fg_status fg_trainer_run(fg_runtime *rt, fg_verb verb, const fg_trainer_verbs *verbs, fg_error *err);

#endif
