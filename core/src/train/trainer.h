/* The trainer: fit / validate / test / predict loops over the configured plugins. */
#ifndef FG_TRAINER_H
#define FG_TRAINER_H

#include "runtime.h"

fg_status fg_trainer_run(fg_runtime *rt, fg_verb verb, fg_error *err);

#endif
