/* The dynamic loss scaler on a stage's device (train_stage_scaler.c, backend ABI 1.10):
 * the scaler's state in device memory, the loss gradient multiplied by the scale read
 * there, the gradients unscaled and checked and the scale moved by one backend op, and the
 * fused update skipping the step on the device's flag: no host round trip a step. */
#ifndef FG_TRAIN_STAGE_SCALER_H
#define FG_TRAIN_STAGE_SCALER_H

#include "train_services.h"

/* Nonzero when `stage` can run the scaler on its device: a backend that is not
 * host-synchronous (on one that is, reading the flag costs nothing and the host path
 * stays), loss_scale_update and softmax_xent_backward_scaled for the stage's dtypes, the
 * stage's loss a softmax cross-entropy it computes itself, and every update of the stage
 * fused (fg_train_stage_can_clip_on_device's conditions). */
int fg_train_stage_can_scale_on_device(const fg_train_ctx *c, const void *stage);
/* Puts state on the device (allocated at the first call) and points the stage's backward
 * and fused updates at it. A copy from host memory: at the start and on a restore only. */
fg_status fg_train_stage_scaler_start(fg_train_ctx *c, void *stage,
                                      const fg_loss_scaler_state *state, fg_error *err);
/* Enqueues the step's unscale, inf check and scale update of the stage's gradients. */
fg_status fg_train_stage_scaler_step(fg_train_ctx *c, void *stage,
                                     const fg_loss_scale_rule *rule, fg_error *err);
/* The device state, read back (waits for the stage's queue: logging, checkpoints). */
fg_status fg_train_stage_scaler_read(fg_train_ctx *c, void *stage, fg_loss_scaler_state *out,
                                     fg_error *err);

#endif
