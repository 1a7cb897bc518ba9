/* Optimizers over flat ranges of parameters: sgd (momentum, dampening, nesterov, weight
 * decay) and adamw (decoupled weight decay), each step one fused backend update. The state
 * (momentum, or m and v) is allocated once on the device, in the layout of the range the
 * optimizer was created for; a step over [offset, offset + count) of that range touches
 * the same offsets of the parameters, gradients and state. The learning rate comes from
 * the caller on every step (schedulers live outside). Thread rule: one host thread. */
#ifndef FG_OPTIMIZER_H
#define FG_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "fulgur/backend.h"
#include "op_needs.h"

typedef enum fg_optimizer_kind { FG_OPTIMIZER_SGD = 1, FG_OPTIMIZER_ADAMW = 2 } fg_optimizer_kind;

#define FG_OPTIMIZER_GLOBS_MAX 256

typedef struct fg_optimizer_config {
    fg_optimizer_kind kind;
    double lr;
    double weight_decay;
    int decay_matrices_only;               /* weight_decay_params = matrices (rank >= 2) */
    char no_decay[FG_OPTIMIZER_GLOBS_MAX]; /* comma-separated globs of names not decayed */
    double momentum, dampening; /* sgd */
    int nesterov;               /* sgd */
    double beta1, beta2, eps;   /* adamw */
} fg_optimizer_config;

typedef struct fg_optimizer fg_optimizer;

/* Keys of [optimizer], for both kinds. */
const fg_option *fg_optimizer_schema(size_t *count);
/* Reads [optimizer] (absent: sgd with its defaults). A key of the other kind is refused:
 * "ORIGIN: [optimizer] momentum is an sgd key but name = adamw; ...". */
fg_status fg_optimizer_read_config(const fg_config *cfg, fg_optimizer_config *out,
                                   fg_error *err);

/* State for `count` floats on `device`, zeroed. */
fg_status fg_optimizer_create(const fg_config *cfg, const fg_backend_vtable *be, void *bs,
                              int device, size_t count, fg_optimizer **out, fg_error *err);
fg_status fg_optimizer_create_with(const fg_optimizer_config *oc, const fg_backend_vtable *be,
                                   void *bs, int device, size_t count, fg_optimizer **out,
                                   fg_error *err);
void fg_optimizer_destroy(fg_optimizer *opt);

const fg_optimizer_config *fg_optimizer_get_config(const fg_optimizer *opt);
const char *fg_optimizer_name(const fg_optimizer *opt);

/* The optimizer counts no steps: it is told the number of the step it makes (1-based, the
 * trainer's fg_step_args.step, the run's one step counter), for AdamW's bias correction and
 * SGD's first momentum step. Set before the ranges of a step are updated (several ranges of
 * one step set the same number). */
void fg_optimizer_set_step(fg_optimizer *opt, int64_t step);
/* The number of the step it last made (0: none): a checkpoint records it (optimizer_step)
 * and a resumed fit sets it back. */
int64_t fg_optimizer_get_step(const fg_optimizer *opt);

/* Updates params[offset, offset + count) from grads; params and grads point at the start
 * of the range the optimizer was created for. Enqueued on queue. */
fg_status fg_optimizer_step(fg_optimizer *opt, void *queue, float lr, float *params,
                            const float *grads, size_t offset, size_t count, fg_error *err);

/* fg_optimizer_step with params and grads pointing at element `offset` of the range (the
 * state's offset): for parameters held outside one flat buffer (sharded strategies). */
fg_status fg_optimizer_step_at(fg_optimizer *opt, void *queue, float lr, float *params,
                               const float *grads, size_t offset, size_t count, fg_error *err);
/* The step in one pass (backend ops sgd_fused / adamw_fused, ABI 1.5): fg_optimizer_step_at
 * from grads * *grad_scale (an f32 device scalar, NULL: 1; grads are not modified), and
 * `work` (count values of work_dtype, NULL: none) = the updated params cast, written by the
 * same op. Bitwise the sequence scale, fg_optimizer_step_at, cast. Only when
 * fg_optimizer_can_fuse said yes for work_dtype. */
fg_status fg_optimizer_step_fused(fg_optimizer *opt, void *queue, float lr, void *params,
                                  const void *grads, size_t offset, size_t count,
                                  const float *grad_scale, void *work, uint32_t work_dtype,
                                  fg_error *err);
/* Nonzero when the backend runs the fused update of this optimizer with its params and
 * grads dtypes and a working copy of work_dtype. */
int fg_optimizer_can_fuse(const fg_optimizer *opt, uint32_t work_dtype);
/* CUDA graphs (ABI 1.7): the fused updates read the per-step values from device memory dev
 * (fg_sgd_args.lr_dev, fg_adamw_args.step_dev; NULL: from the call's arguments again). */
void fg_optimizer_read_step_values(fg_optimizer *opt, const float *dev);
/* The loss scaler on the device (ABI 1.10): the fused updates write nothing when the
 * device flag dev (fg_loss_scale_dev.found_inf) is nonzero (fg_sgd_args.skip_dev; NULL:
 * they always update). */
void fg_optimizer_read_skip_flag(fg_optimizer *opt, const int64_t *dev);
/* The values a step with lr and (1-based) step number puts there: lr, then for AdamW the
 * bias corrections exactly as the backends compute them; returns how many (1 or 3). */
int fg_optimizer_step_values(const fg_optimizer *opt, float lr, int64_t step, float out[3]);
/* The dtypes of the params and grads the steps are given (FG_F32 by default; half ones in
 * "true" half modes and with half gradients), the state staying f32; FG_UNAVAILABLE when
 * the backend's update does not take them. Pointers and offsets of fg_optimizer_step count
 * elements of those dtypes. */
fg_status fg_optimizer_set_dtypes(fg_optimizer *opt, uint32_t param, uint32_t grad,
                                  fg_error *err);
/* The backend ops the optimizer of `oc` calls, with params and grads in these dtypes. */
void fg_optimizer_op_needs(const fg_optimizer_config *oc, uint32_t param, uint32_t grad,
                           fg_op_needs *n);
/* State slots a config needs, and their names, without an optimizer (checkpoints of
 * sharded state). */
size_t fg_optimizer_config_state_count(const fg_optimizer_config *oc);
const char *fg_optimizer_config_state_name(const fg_optimizer_config *oc, size_t i);

/* A run [lo, hi) of elements of the flat parameters and whether weight decay applies. */
typedef struct fg_decay_run {
    size_t lo, hi;
    int decay;
} fg_decay_run;
/* Weight decay per tensor: `runs` cover the model's flat parameters in order; this
 * optimizer's range starts at element `base` of them. Keeps (a copy of) what overlaps its
 * range; a step then updates each overlapping part with weight_decay or 0, bitwise the
 * whole-range update on the decayed parts. Without it every value decays, in one call.
 * Allocates here, never in a step. */
fg_status fg_optimizer_set_decay_runs(fg_optimizer *opt, const fg_decay_run *runs, size_t n,
                                      size_t base, fg_error *err);

/* State tensors for checkpoints: 0 (plain sgd), 1 ("momentum_buffer") or 2 ("exp_avg",
 * "exp_avg_sq"), each `count` floats on the device. */
size_t fg_optimizer_state_count(const fg_optimizer *opt);
float *fg_optimizer_state(const fg_optimizer *opt, size_t i, const char **name);

#endif
