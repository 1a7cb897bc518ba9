/* The step entries of the train services (train_stage_step.c): forward, backward, output,
 * input_grad, read_metrics, grad_norm_sq, scale_grads and optimizer_step. */
#ifndef FG_TRAIN_STAGE_STEP_H
#define FG_TRAIN_STAGE_STEP_H

#include "fulgur/strategy.h"

void fg_train_stage_step_init(fg_train_services *s);

#endif
