/* Before a fit trains anything (and in `fulgur check`): the places it will write are
 * writable, so a bad path fails at once instead of after an epoch. */
#ifndef FG_OUTPUT_PATHS_H
#define FG_OUTPUT_PATHS_H

#include "config.h"
#include "fulgur/plugin.h"

/* [trainer] default_root_dir, final_checkpoint (the trainer's key, read once: absolute) and
 * [callback.checkpoint] dirpath (absolute): the nearest existing folder on each path must be
 * a writable folder. */
fg_status fg_output_paths_check(const fg_config *cfg, const char *final_checkpoint,
                                fg_error *err);

#endif
