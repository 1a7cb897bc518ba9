/* The loss scaler's side of the trainer: the precision plugin's dtypes checked (check) and
 * given to the model (apply, after it is built); the scale of each backward (the mean over
 * the accumulated micro-batches times the loss scale); before an optimizer step under loss
 * scaling: gradients synced, unscaled and checked (global norm finite), *skip set when the
 * scaler skips the step; the scaler's state for checkpoints (0: none) and from one. */
#ifndef FG_TRAINER_PRECISION_H
#define FG_TRAINER_PRECISION_H

#include "fulgur/precision.h"
#include "layer.h"

struct fg_trainer;
struct fg_ckpt;

typedef struct fg_scaler {
    fg_precision_info prec;    /* the plugin's dtypes */
    int loss_scaling;          /* dynamic loss scale: unscale, finite check, maybe skip */
    void *dev_stage;           /* the stage whose device runs the scaler (NULL: the host) */
    fg_loss_scale_rule rule;   /* the plugin's, for the device */
} fg_scaler;

fg_status fg_trainer_check_precision(struct fg_trainer *t, fg_error *err);
fg_status fg_trainer_apply_precision(struct fg_trainer *t, fg_error *err);
float fg_trainer_grad_scale(const struct fg_trainer *t);
/* The precision's fp8 recipe (format FG_FP8_NONE without fp8; ABI 1.9's fields). */
fg_fp8_recipe fg_trainer_fp8_recipe(const struct fg_trainer *t);
/* The scaler moves to the primary stage's device where it can run there (backend ABI 1.10,
 * train_stage_scaler.h): then the loss gradient reads the scale on the device and the
 * unscale, inf check, skip and scale update run there; *skip stays 0 on the host, and a
 * skipped step still counts (global step, lr schedule, AdamW's step number: PyTorch's
 * GradScaler with a scheduler). Otherwise the host path: today's rule, nothing counted. */
fg_status fg_trainer_scaler_to_device(struct fg_trainer *t, fg_error *err);
fg_status fg_trainer_unscale_grads(struct fg_trainer *t, int *skip, fg_error *err);
int fg_trainer_scaler_state(struct fg_trainer *t, fg_loss_scaler_state *out);
fg_status fg_trainer_restore_scaler(struct fg_trainer *t, const struct fg_ckpt *c,
                                    fg_error *err);
/* "loss scale: S, N step(s) skipped" after a fit under loss scaling. */
void fg_trainer_report_precision(struct fg_trainer *t);

#endif
