/* fulgur predict: class probabilities of the predict split to run_dir/predictions.csv. */
#ifndef FG_TRAINER_PREDICT_H
#define FG_TRAINER_PREDICT_H

#include "fulgur/plugin.h"

struct fg_trainer;

fg_status fg_trainer_predict(struct fg_trainer *t, fg_error *err);

#endif
