/* fulgur predict: class probabilities of the predict split to run_dir/predictions.csv. */
#ifndef FG_TRAINER_PREDICT_H
#define FG_TRAINER_PREDICT_H

#include "fulgur/plugin.h"
#include "trainer.h"

fg_status fg_trainer_predict(const fg_verb_model *vm, fg_error *err);

#endif
