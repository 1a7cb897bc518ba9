/* The optimizer step without a host round trip (backend ABI 1.5): clip_grad_norm_'s factor
 * computed on the device (grad_clip_coef) into the stage's scratch, and the update that
 * reads it, updates the f32 master and writes the half working copy in one op (sgd_fused,
 * adamw_fused). Bitwise the host path: the factor is computed in double from the same f32
 * sum of squares, and the fused op is the sequence scale, update, cast. */
#include <stdlib.h>
#include <string.h>

#include "train_stage.h"
#include "train_stage_fused.h"

/* The dtype of the copy a fused update of the stage writes: its working parameters', or
 * its parameters' when it has none. */
static uint32_t work_dtype(const fg_train_stage *s, void **work)
{
    uint32_t dt = FG_F32;
    *work = fg_replica_work(s->arena[0], &dt);
    return *work ? dt : fg_replica_param_dtype(s->arena[0]);
}

static int whole_stage_updated(const fg_train_stage *s)
{
    return s->opt_lo == s->param_lo && s->opt_n == s->param_n;
}

int fg_train_stage_can_fuse(const fg_train_ctx *c, const fg_train_stage *s)
{
    void *work;
    return !c->unfused && fg_optimizer_can_fuse(s->opt, work_dtype(s, &work));
}

int fg_train_stage_can_clip_on_device(const fg_train_ctx *c, const void *stage)
{
    const fg_train_stage *s = stage;
    if (!s) return 0;
    uint32_t grad = fg_replica_grad_dtype(s->arena[0]);
    return fg_model_master_owner(c->model) != FG_MASTER_STRATEGY && whole_stage_updated(s) && fg_replica_grads(s->arena[0]) &&
           fg_train_stage_can_fuse(c, s) &&
           fg_backend_can(c->be, c->bs, FG_OP_GRAD_CLIP_COEF, &grad);
}

fg_status fg_train_stage_clip_on_device(fg_train_ctx *c, void *stage, double max_norm,
                                        int64_t step, fg_error *err)
{
    fg_train_stage *s = stage;
    if (!fg_train_stage_can_clip_on_device(c, s))
        return fg_error_set(err, FG_UNAVAILABLE, "gradient clipping on the device: the "
                            "backend lacks grad_clip_coef or the fused optimizer update for "
                            "this stage's dtypes");
    const fg_replica *r = s->arena[0];
    fg_status st = c->be->grad_clip_coef(c->bs, s->queue, fg_replica_grad_dtype(r),
                                         fg_replica_grads(r), s->param_n, max_norm,
                                         &s->scratch_dev[0], &s->scratch_dev[1], err);
    s->clip_step = st == FG_OK ? step : 0;
    return st;
}

fg_status fg_train_stage_fused_step(fg_train_ctx *c, fg_train_stage *s, const fg_step_args *a,
                                    size_t rel, size_t count, fg_error *err)
{
    const fg_replica *r = s->arena[0];
    void *work = NULL;
    uint32_t wdt = work_dtype(s, &work);
    /* the working copy is written only when the update covers all of it */
    int whole = whole_stage_updated(s) && rel == 0 && count == s->param_n;
    if (!whole) work = NULL;
    void *p = fg_train_stage_at(fg_replica_params(r), s->param_lo, s->opt_lo,
                                fg_dtype_size((fg_dtype)fg_replica_param_dtype(r)));
    const void *g = fg_train_stage_at(fg_replica_grads(r), s->param_lo, s->opt_lo,
                                      fg_dtype_size((fg_dtype)fg_replica_grad_dtype(r)));
    size_t psz = fg_dtype_size((fg_dtype)fg_replica_param_dtype(r));
    size_t gsz = fg_dtype_size((fg_dtype)fg_replica_grad_dtype(r));
    const float *scale = s->clip_step == a->step ? &s->scratch_dev[1] : NULL;
    fg_status st = fg_optimizer_step_fused(s->opt, s->queue, a->lr, (char *)p + rel * psz,
                                           (const char *)g + rel * gsz, rel, count, scale,
                                           work, wdt, err);
    if (st == FG_OK && work) s->cast_version = c->param_version; /* written: no cast */
    return st;
}
