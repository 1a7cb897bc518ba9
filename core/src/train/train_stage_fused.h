/* The optimizer step of a stage without a host round trip (train_stage_fused.c): the clip
 * factor on the device and the update that reads it and writes the working copy in one
 * backend op (ABI 1.5). */
#ifndef FG_TRAIN_STAGE_FUSED_H
#define FG_TRAIN_STAGE_FUSED_H

#include "train_services.h"

struct fg_train_stage;

/* Gradient clipping by norm without a host round trip (backend op grad_clip_coef, ABI
 * 1.5): nonzero when the stage can compute clip_grad_norm_'s factor of its gradients on the
 * device for its fused optimizer update to read (the optimizer covers the stage's whole
 * parameters, no strategy master, the backend has grad_clip_coef and the fused update). */
int fg_train_stage_can_clip_on_device(const fg_train_ctx *c, const void *stage);
/* Enqueues that factor for step `step` (1-based): the sum of squares of the stage's
 * gradients and the factor stay on the device; optimizer_step of that step scales the
 * gradients it reads by it. Nothing is read by the host. */
fg_status fg_train_stage_clip_on_device(fg_train_ctx *c, void *stage, double max_norm,
                                        int64_t step, fg_error *err);

/* Nonzero when the stage's own updates run fused (the backend has the op for its dtypes
 * and FULGUR_TEST_UNFUSED_STEP is not set). */
int fg_train_stage_can_fuse(const fg_train_ctx *c, const struct fg_train_stage *s);
/* The update of the stage's own parameters [opt_lo + rel, + count) for step a, scaled by
 * the device clip factor when fg_train_stage_clip_on_device enqueued one for a->step. The
 * working copy is written (and the next forward's cast skipped) when the update covers
 * every parameter of the stage. Call after c->param_version moved for this update. */
fg_status fg_train_stage_fused_step(fg_train_ctx *c, struct fg_train_stage *s,
                                    const fg_step_args *a, size_t rel, size_t count,
                                    fg_error *err);

#endif
