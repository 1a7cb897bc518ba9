/* What the trainer asks of its strategy plugin: its fg_strategy_info, and the primary
 * stage where the strategy's gradients and update are all there. */
#ifndef FG_TRAINER_STRATEGY_H
#define FG_TRAINER_STRATEGY_H

#include "fulgur/strategy.h"

struct fg_trainer;

/* The strategy's info into *si (zeroed first, struct_size set); FG_OK with *si zeroed when
 * the strategy has no info entry; else its status, its words in *e. */
fg_status fg_trainer_strategy_info(struct fg_trainer *t, fg_strategy_info *si, fg_error *e);

/* The primary replica's stage when the strategy says its gradients and update are all
 * there (fg_strategy_info.primary_grads); NULL otherwise or when its info fails. */
void *fg_trainer_primary_grads_stage(struct fg_trainer *t);

#endif
