/* Strategy plugins: where parameters, gradients and optimizer state live and how a step
 * runs across devices. The vtable grows by appending as strategies land.
 * Thread rule: called from the trainer's thread. */
#ifndef FULGUR_STRATEGY_H
#define FULGUR_STRATEGY_H

#include "fulgur/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fg_launch_mode {
    FG_LAUNCH_ONE_PROCESS = 1,      /* one process drives its devices (single, dp, model-parallel) */
    FG_LAUNCH_PROCESS_PER_DEVICE = 2 /* started by mpirun/srun, one process per device */
} fg_launch_mode;

typedef struct fg_strategy_info {
    uint32_t struct_size;
    uint32_t launch_mode; /* fg_launch_mode */
    int32_t needs_comm;   /* a [comm] plugin must be configured */
    int32_t devices;      /* devices this process drives */
} fg_strategy_info;

typedef struct fg_strategy_vtable {
    uint32_t struct_size;
    fg_status (*info)(void *state, fg_strategy_info *out, fg_error *err);
} fg_strategy_vtable;

#ifdef __cplusplus
}
#endif
#endif
