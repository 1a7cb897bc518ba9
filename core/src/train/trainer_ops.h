/* The backend runs every op the run needs, in its dtypes (after the precision is applied,
 * before the strategy is set up). */
#ifndef FG_TRAINER_OPS_H
#define FG_TRAINER_OPS_H

#include "fulgur/plugin.h"

struct fg_trainer;

fg_status fg_trainer_check_backend(struct fg_trainer *t, fg_error *err);

#endif
