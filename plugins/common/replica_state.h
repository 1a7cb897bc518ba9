/* Checkpoints of a strategy whose one replica holds the whole model (single, ddp), as
 * fg_strategy_vtable.gather_state / scatter_state: the params (f32, widened from a half
 * working copy), the buffers and the optimizer state slots from the stage's regions, or,
 * under offload_optimizer = host, the f32 master and the state from host memory. The same
 * values the core writes from the replica itself. Local to the process: every rank holds
 * the same model, and every rank is handed the file's state on resume. */
#ifndef FG_PLUGIN_REPLICA_STATE_H
#define FG_PLUGIN_REPLICA_STATE_H

#include "fulgur/backend.h"
#include "fulgur/strategy.h"
#include "offload_optimizer.h"

typedef struct fg_plugin_replica_state {
    const fg_backend_vtable *be;
    void *be_state;
    const fg_train_services *svc;
    void *stage;
    int device;
    fg_offload *offload; /* NULL: the state is the stage's */
} fg_plugin_replica_state;

fg_status fg_plugin_replica_gather(const fg_plugin_replica_state *r, float *params,
                                   float *buffers, float *opt_state, fg_error *err);
fg_status fg_plugin_replica_scatter(const fg_plugin_replica_state *r, const float *opt_state,
                                    fg_error *err);

#endif
