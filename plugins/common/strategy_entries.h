/* A strategy's vtable entries named by one prefix: FG_PLUGIN_STRATEGY_ENTRIES(ddp_) is
 * `.info = ddp_info, ..., .memory_report = ddp_memory_report`, the twelve entries every
 * built-in strategy has; FG_PLUGIN_STRATEGY_STATE_ENTRIES(ddp_) adds gather_state and
 * scatter_state (the strategies whose checkpoint state is not the primary replica's). The
 * backends' FG_BACKEND_OP_INIT works the same way. */
#ifndef FULGUR_PLUGIN_COMMON_STRATEGY_ENTRIES_H
#define FULGUR_PLUGIN_COMMON_STRATEGY_ENTRIES_H

#define FG_PLUGIN_STRATEGY_ENTRIES(p)                                                          \
    .info = p##info, .setup = p##setup, .teardown = p##teardown,                               \
    .train_step = p##train_step, .optimizer_step = p##optimizer_step,                          \
    .eval_step = p##eval_step, .read_metrics = p##read_metrics,                                \
    .primary_replica = p##primary, .sync_grads = p##sync_grads,                                \
    .grad_norm_sq = p##grad_norm_sq, .scale_grads = p##scale_grads,                            \
    .memory_report = p##memory_report

#define FG_PLUGIN_STRATEGY_STATE_ENTRIES(p)                                                    \
    FG_PLUGIN_STRATEGY_ENTRIES(p), .gather_state = p##gather_state,                            \
    .scatter_state = p##scatter_state

#endif
