/* The dynamic loss scaler on a stage's device (train_stage_scaler.h). */
#include <string.h>

#include "train_stage.h"
#include "train_stage_fused.h"
#include "train_stage_scaler.h"

static int host_synchronous(const fg_train_ctx *c, const fg_train_stage *s)
{
    return FG_HAS_FIELD(c->be, fg_backend_vtable, host_synchronous) && c->be->host_synchronous &&
           c->be->host_synchronous(c->bs, s->device);
}

int fg_train_stage_can_scale_on_device(const fg_train_ctx *c, const void *stage)
{
    const fg_train_stage *s = stage;
    if (!s || !s->is_first || !s->is_last || host_synchronous(c, s) ||
        !fg_train_stage_can_clip_on_device(c, s))
        return 0;
    uint32_t grad = fg_replica_grad_dtype(s->arena[0]), act = fg_replica_act_dtype(s->arena[0]);
    if (!fg_backend_can(c->be, c->bs, FG_OP_LOSS_SCALE_UPDATE, &grad) ||
        !fg_backend_can(c->be, c->bs, FG_OP_SOFTMAX_XENT_BACKWARD_SCALED, &act))
        return 0;
    for (int i = 0; i < s->chunks; i++)
        if (!fg_replica_takes_loss_scale_dev(s->arena[i])) return 0;
    return 1;
}

fg_status fg_train_stage_scaler_start(fg_train_ctx *c, void *stage,
                                      const fg_loss_scaler_state *state, fg_error *err)
{
    fg_train_stage *s = stage;
    if (!fg_train_stage_can_scale_on_device(c, s))
        return fg_error_set(err, FG_UNAVAILABLE, "the loss scaler on the device: the backend "
                            "lacks loss_scale_update or softmax_xent_backward_scaled, or this "
                            "stage's loss or update cannot read the scale there");
    fg_status st = s->scaler_dev ? FG_OK
                                 : c->be->alloc(c->bs, s->device, sizeof *s->scaler_dev,
                                                (void **)&s->scaler_dev, err);
    fg_loss_scale_dev d;
    memset(&d, 0, sizeof d);
    d.scale = state->scale;
    d.growth_tracker = state->growth_tracker;
    d.hysteresis_left = state->hysteresis_left;
    d.skipped_steps = state->skipped_steps;
    if (st == FG_OK)
        st = c->be->copy(c->bs, s->queue, s->scaler_dev, s->device, &d, -1, sizeof d, err);
    if (st != FG_OK) return st;
    for (int i = 0; i < s->chunks; i++)
        fg_replica_set_loss_scale_dev(s->arena[i], s->scaler_dev);
    fg_optimizer_read_skip_flag(s->opt, &s->scaler_dev->found_inf);
    return FG_OK;
}

fg_status fg_train_stage_scaler_step(fg_train_ctx *c, void *stage,
                                     const fg_loss_scale_rule *rule, fg_error *err)
{
    fg_train_stage *s = stage;
    const fg_replica *r = s->arena[0];
    if (!s->scaler_dev)
        return fg_error_set(err, FG_INTERNAL, "the loss scaler on the device was not started");
    return c->be->loss_scale_update(c->bs, s->queue, fg_replica_grad_dtype(r),
                                    fg_replica_grads(r), s->param_n, rule, &s->scratch_dev[0],
                                    s->scaler_dev, err);
}

fg_status fg_train_stage_scaler_read(fg_train_ctx *c, void *stage, fg_loss_scaler_state *out,
                                     fg_error *err)
{
    fg_train_stage *s = stage;
    fg_loss_scale_dev d;
    fg_status st = c->be->copy(c->bs, s->queue, &d, -1, s->scaler_dev, s->device, sizeof d, err);
    if (st == FG_OK) st = c->be->queue_sync(c->bs, s->queue, err);
    if (st != FG_OK) return st;
    out->scale = d.scale;
    out->growth_tracker = d.growth_tracker;
    out->hysteresis_left = d.hysteresis_left;
    out->skipped_steps = d.skipped_steps;
    return FG_OK;
}
