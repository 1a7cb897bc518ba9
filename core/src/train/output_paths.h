/* Before a fit trains anything (and in `fulgur check`): the places it will write are
 * writable, so a bad path fails at once instead of after an epoch. */
#ifndef FG_OUTPUT_PATHS_H
#define FG_OUTPUT_PATHS_H

#include "fulgur/plugin.h"

struct fg_trainer;

/* [trainer] default_root_dir, final_checkpoint (absolute) and [callback.checkpoint] dirpath
 * (absolute): the nearest existing folder on each path must be a writable folder. */
fg_status fg_trainer_check_outputs(const struct fg_trainer *t, fg_error *err);

#endif
