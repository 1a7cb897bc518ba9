/* The fit loop and evaluation passes. */
#ifndef FG_TRAINER_LOOP_H
#define FG_TRAINER_LOOP_H

#include "fulgur/plugin.h"
#include "trainer_keys.h"

struct fg_trainer;
struct fg_data_split;

fg_status fg_trainer_fit(struct fg_trainer *t, fg_error *err);
fg_status fg_trainer_evaluate_split(struct fg_trainer *t, struct fg_data_split *s,
                                    const fg_batch_limit *limit, const char *prefix, int event,
                                    fg_error *err);

#endif
