/* The backend check at setup (fulgur fit and check, before anything runs): the ops the
 * model's layers and loss, the precision's dtypes, the optimizer and gradient clipping will
 * call, with their dtypes, asked of the backend in one go; every missing one is named in one
 * message (FG_UNAVAILABLE: exit 2). */
#include "loss.h"
#include "optimizer.h"
#include "trainer_internal.h"
#include "trainer_ops.h"

#define BE(t) ((const fg_backend_vtable *)(t)->backend.vt)

/* What a training step adds to the model's ops: the optimizer's update, and the gradient
 * norms, scaling and clamping of clipping, loss scaling and nan_guard. */
static fg_status training_needs(fg_trainer *t, fg_op_needs *n, fg_error *err)
{
    const fg_optimizer_config *oc = &t->optim;
    uint32_t param, grad;
    fg_model_storage_dtypes(t->model, &param, &grad);
    /* a strategy that keeps the f32 master steps it with the half gradients */
    fg_optimizer_op_needs(oc, fg_model_master_owner(t->model) == FG_MASTER_STRATEGY ? FG_F32 : param, grad, n);
    FG_NEED(n, "gradient norms (clipping, loss scaling, nan_guard)", FG_OP_SUM_SQUARES, grad);
    if (t->keys.clip_val > 0 || t->scaler.loss_scaling)
        FG_NEED(n, "gradient scaling (clipping, loss scaling)", FG_OP_SCALE, grad);
    if (t->keys.clip_val > 0 && t->keys.clip_by_value)
        FG_NEED(n, "[trainer] gradient_clip_algorithm = value", FG_OP_CLAMP, grad);
    return FG_OK;
}

/* [model] ignore_index: the backend's loss must read FG_IGNORED_LABEL, which it does when
 * built against ABI 1.1 or later. */
static fg_status ignore_index_needs(fg_trainer *t, fg_error *err)
{
    int enabled;
    int32_t label;
    fg_status st = fg_loss_read_ignore(t->cfg, &enabled, &label, err);
    const fg_plugin *p = t->backend.inst->plugin;
    if (st != FG_OK || !enabled || p->abi_minor >= 1)
        return st;
    return fg_error_set(err, FG_UNAVAILABLE, "[model] ignore_index: backend.%s was built "
                        "against ABI %d.%d; ignored labels need 1.1 or later",
                        t->backend.inst->name, (int)p->abi_major, (int)p->abi_minor);
}

fg_status fg_trainer_check_backend(fg_trainer *t, fg_error *err)
{
    fg_status ist = ignore_index_needs(t, err);
    if (ist != FG_OK)
        return ist;
    int training = t->verb == FG_VERB_FIT || t->verb == FG_VERB_CHECK;
    fg_op_needs n = {0};
    fg_status st = fg_model_op_needs(t->model, training, &n);
    if (st == FG_OK && training) st = training_needs(t, &n, err);
    if (st == FG_OK)
        st = fg_backend_check_needs(BE(t), t->backend.state, t->backend.inst->name, &n, err);
    else if (st == FG_OUT_OF_MEMORY)
        st = fg_error_set(err, st, "out of memory listing the backend's ops");
    fg_op_needs_free(&n);
    return st;
}
