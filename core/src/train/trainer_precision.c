/* The precision plugin in the trainer: which dtypes the model runs in, the loss scale each
 * backward is multiplied by, and the optimizer step's unscale, finite check and skip; the
 * scaler's state in checkpoints. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "trainer_internal.h"
#include "trainer_precision.h"
#include "trainer_strategy.h"
#include "train_stage_scaler.h"

#define PREC(t) ((const fg_precision_vtable *)(t)->precision.vt)
#define STRAT(t) ((const fg_strategy_vtable *)(t)->strategy.vt)
#define BE(t) ((const fg_backend_vtable *)(t)->backend.vt)

static int half(uint32_t d) { return d == FG_F16 || d == FG_BF16; }

static fg_status refuse(const fg_trainer *t, fg_status st, const char *what, fg_error *err)
{
    return fg_error_set(err, st, "%s: [precision] %s: %s", fg_config_path(t->cfg),
                        t->precision.inst->name, what);
}

/* ABI 1.9's fp8 fields: an old plugin leaves them zero (no fp8). */
static fg_status check_fp8(const fg_trainer *t, const fg_precision_info *info, fg_error *err)
{
    uint32_t f = info->fp8_format;
    if (f == FG_FP8_NONE)
        return FG_OK;
    if (f != FG_FP8_HYBRID && f != FG_FP8_E4M3)
        return refuse(t, FG_INCOMPATIBLE, "asks for an unknown fp8 format", err);
    if (!half(info->compute_dtype))
        return refuse(t, FG_UNAVAILABLE, "fp8 gemms need half activations (bf16 or f16)", err);
    if (info->fp8_amax_history_len < 1 ||
        (info->fp8_amax_compute_algo != FG_FP8_AMAX_MAX &&
         info->fp8_amax_compute_algo != FG_FP8_AMAX_MOST_RECENT) ||
        !isfinite(info->fp8_margin))
        return refuse(t, FG_INCOMPATIBLE, "asks for an fp8 amax history below 1, an unknown "
                      "amax algorithm or a margin that is not finite", err);
    return FG_OK;
}

fg_fp8_recipe fg_trainer_fp8_recipe(const fg_trainer *t)
{
    const fg_precision_info *i = &t->scaler.prec;
    fg_fp8_recipe r = {i->fp8_format, i->fp8_amax_history_len, i->fp8_amax_compute_algo,
                       i->fp8_margin};
    return r;
}

fg_status fg_trainer_check_precision(fg_trainer *t, fg_error *err)
{
    const fg_precision_vtable *pv = PREC(t);
    fg_precision_info *info = &t->scaler.prec;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    if (!FG_HAS_FIELD(pv, fg_precision_vtable, update_scale) || !pv->info || !pv->loss_scale ||
        !pv->update_scale)
        return refuse(t, FG_INCOMPATIBLE, "the plugin lacks info, loss_scale or update_scale",
                      err);
    fg_error e = {0};
    fg_status st = pv->info(t->precision.state, info, &e);
    if (st != FG_OK) return refuse(t, st, e.message, err);
    uint32_t p = info->param_dtype, c = info->compute_dtype, g = info->grad_dtype;
    if ((p != FG_F32 && !half(p)) || (c != FG_F32 && !half(c)) || (g != FG_F32 && !half(g)))
        return refuse(t, FG_INCOMPATIBLE, "asks for a dtype other than f32, f16 and bf16", err);
    if (half(g) && !half(c))
        return refuse(t, FG_UNAVAILABLE, "half gradients with f32 activations are not "
                      "supported", err);
    if (half(p) && !info->master_weights && !half(g))
        return refuse(t, FG_UNAVAILABLE, "half parameters without an f32 master copy (a 'true' "
                      "half mode) need half gradients too", err);
    if (p != c)
        return refuse(t, FG_UNAVAILABLE, "working parameters and activations in different "
                      "dtypes are not supported", err);
    if ((st = check_fp8(t, info, err)) != FG_OK)
        return st;
    if (info->loss_scaling && !FG_HAS_FIELD(pv, fg_precision_vtable, set_scaler_state))
        return refuse(t, FG_INCOMPATIBLE, "loss scaling without get/set_scaler_state (the "
                      "scale could not be checkpointed)", err);
    t->scaler.loss_scaling = info->loss_scaling != 0;
    return FG_OK;
}

/* Half gradients and "true" half parameters: the strategy must say it reads them as such
 * (fg_strategy_info.half_storage). (The backend's ops in those dtypes are checked with all
 * the run's others: fg_trainer_check_backend.) */
static fg_status check_half_storage(fg_trainer *t, fg_error *err)
{
    fg_strategy_info si;
    fg_error e = {0};
    fg_status st = fg_trainer_strategy_info(t, &si, &e);
    if (st != FG_OK)
        return fg_error_set(err, st, "[strategy] %s: %s", t->strategy.inst->name, e.message);
    if (!si.half_storage)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: [precision] %s keeps %s gradients%s, but "
                            "[strategy] %s reads gradients and parameters as f32 only (it does "
                            "not declare half storage); use [strategy] name = single%s",
                            fg_config_path(t->cfg), t->precision.inst->name,
                            fg_dtype_name((fg_dtype)t->scaler.prec.grad_dtype),
                            t->scaler.prec.master_weights ? "" : " and parameters",
                            t->strategy.inst->name,
                            t->scaler.prec.master_weights ? ", or grad_dtype = fp32" : "");
    return FG_OK;
}

/* The strategy says it keeps the f32 master weights of what it updates (a failing info is
 * reported by check_half_storage, which runs next). */
static int strategy_owns_master(fg_trainer *t)
{
    fg_strategy_info si;
    fg_error e = {0};
    return fg_trainer_strategy_info(t, &si, &e) == FG_OK && si.half_storage && si.own_master;
}

fg_status fg_trainer_apply_precision(fg_trainer *t, fg_error *err)
{
    const fg_precision_info *info = &t->scaler.prec;
    if (info->compute_dtype == FG_F32 && info->param_dtype == FG_F32) return FG_OK;
    const fg_strategy_vtable *sv = STRAT(t);
    if (t->scaler.loss_scaling && (!FG_HAS_FIELD(sv, fg_strategy_vtable, scale_grads) ||
                            !sv->grad_norm_sq || !sv->scale_grads))
        return fg_error_set(err, FG_UNAVAILABLE, "[precision] %s scales the loss, but [strategy] "
                            "%s cannot unscale and check gradients (grad_norm_sq, scale_grads)",
                            t->precision.inst->name, t->strategy.inst->name);
    /* A strategy that keeps the f32 master of its own range (fg_strategy_info.own_master):
     * the replicas hold half parameters and half gradients only, like a "true" mode. */
    if (info->fp8_format != FG_FP8_NONE &&
        !fg_backend_can(BE(t), t->backend.state, FG_OP_GEMM_FP8,
                        (const uint32_t[]){info->compute_dtype, info->compute_dtype}))
        return fg_error_set(err, FG_UNAVAILABLE, "%s: [precision] name = %s: backend.%s has no "
                            "fp8 gemm (gemm_fp8, ABI 1.9): fp8 runs on [backend] name = cuda "
                            "with fp8 tensor cores (compute capability 8.9+); use "
                            "[precision] name = bf16-mixed here",
                            fg_config_path(t->cfg), t->precision.inst->name,
                            t->backend.inst->name);
    int own = half(info->param_dtype) && info->master_weights && strategy_owns_master(t);
    uint32_t grad = own ? info->param_dtype : info->grad_dtype;
    int true_half = half(info->param_dtype) && (!info->master_weights || own);
    fg_status st = half(grad) || true_half ? check_half_storage(t, err) : FG_OK;
    if (st == FG_OK)
        st = fg_model_set_dtypes(t->model, info->compute_dtype, info->param_dtype, grad, err);
    if (st == FG_OK && true_half)
        st = fg_model_set_master_owner(t->model, own ? FG_MASTER_STRATEGY : FG_MASTER_NONE, err);
    return st;
}

float fg_trainer_grad_scale(const fg_trainer *t)
{
    float mean = 1.0f / (float)t->keys.accumulate;
    if (t->scaler.dev_stage) return mean; /* the backward multiplies by the device's scale */
    return t->scaler.loss_scaling ? mean * PREC(t)->loss_scale(t->precision.state) : mean;
}

/* The primary stage, where the strategy's gradients are all there and its device can run
 * the scaler. */
static void *device_scaler_stage(fg_trainer *t)
{
    void *stage = fg_trainer_primary_grads_stage(t);
    return fg_train_stage_can_scale_on_device(&t->tctx, stage) ? stage : NULL;
}

fg_status fg_trainer_scaler_to_device(fg_trainer *t, fg_error *err)
{
    const fg_precision_vtable *pv = PREC(t);
    if (!t->scaler.loss_scaling || t->scaler.dev_stage ||
        !FG_HAS_FIELD(pv, fg_precision_vtable, scaler_rule) || !pv->scaler_rule)
        return FG_OK;
    void *stage = device_scaler_stage(t);
    if (!stage) return FG_OK;
    fg_loss_scaler_state s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    memset(&t->scaler.rule, 0, sizeof t->scaler.rule);
    t->scaler.rule.struct_size = sizeof t->scaler.rule;
    fg_error e = {0};
    fg_status st = pv->get_scaler_state(t->precision.state, &s, &e);
    if (st == FG_OK) st = pv->scaler_rule(t->precision.state, &t->scaler.rule, &e);
    if (st != FG_OK) return refuse(t, st, e.message, err);
    st = fg_train_stage_scaler_start(&t->tctx, stage, &s, err);
    if (st != FG_OK) return st;
    t->scaler.dev_stage = stage;
    fprintf(t->out, "loss scaler: on the device (inf check, skip and scale update without a "
            "host round trip; a skipped step still counts)\n");
    return FG_OK;
}

fg_status fg_trainer_unscale_grads(fg_trainer *t, int *skip, fg_error *err)
{
    *skip = 0;
    if (!t->scaler.loss_scaling) return FG_OK;
    const fg_strategy_vtable *sv = STRAT(t);
    if (t->scaler.dev_stage) {
        fg_status st = sv->sync_grads ? sv->sync_grads(t->strategy.state, err) : FG_OK;
        return st == FG_OK ? fg_train_stage_scaler_step(&t->tctx, t->scaler.dev_stage,
                                                        &t->scaler.rule, err)
                           : st;
    }
    float scale = PREC(t)->loss_scale(t->precision.state);
    fg_status st = sv->sync_grads ? sv->sync_grads(t->strategy.state, err) : FG_OK;
    if (st == FG_OK) st = sv->scale_grads(t->strategy.state, 1.0f / scale, 0.0f, err);
    double sq = 0;
    if (st == FG_OK) st = sv->grad_norm_sq(t->strategy.state, &sq, err);
    if (st != FG_OK) return st;
    fg_error e = {0};
    st = PREC(t)->update_scale(t->precision.state, !isfinite(sq), skip, &e);
    if (st != FG_OK)
        return fg_error_set(err, st, "[precision] %s: %s", t->precision.inst->name, e.message);
    return FG_OK;
}

/* ---- checkpoints --------------------------------------------------------------------- */

int fg_trainer_scaler_state(fg_trainer *t, fg_loss_scaler_state *out)
{
    if (!t->scaler.loss_scaling) return 0;
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    fg_error e = {0};
    if (t->scaler.dev_stage) /* the device's state becomes the plugin's again */
        return fg_train_stage_scaler_read(&t->tctx, t->scaler.dev_stage, out, &e) == FG_OK &&
               PREC(t)->set_scaler_state(t->precision.state, out, &e) == FG_OK;
    return PREC(t)->get_scaler_state(t->precision.state, out, &e) == FG_OK;
}

static fg_status meta_number(const fg_ckpt *c, const char *key, double *out, fg_error *err)
{
    const char *v = fg_ckpt_meta(c, key);
    char *end;
    *out = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: metadata '%s' is %s",
                            fg_ckpt_path(c), key, v ? "not a number" : "missing");
    return FG_OK;
}

fg_status fg_trainer_restore_scaler(fg_trainer *t, const struct fg_ckpt *c, fg_error *err)
{
    if (!t->scaler.loss_scaling) return FG_OK;
    if (!fg_ckpt_meta(c, "loss_scale")) {
        fprintf(t->out, "resuming: %s has no loss-scaler state (written without loss "
                "scaling); the scale starts at its initial value\n", fg_ckpt_path(c));
        return FG_OK;
    }
    double v[4];
    static const char *keys[] = {"loss_scale", "loss_scale_growth_tracker",
                                 "loss_scale_hysteresis_left", "loss_scale_skipped_steps"};
    for (int i = 0; i < 4; i++) {
        fg_status st = meta_number(c, keys[i], &v[i], err);
        if (st != FG_OK) return st;
    }
    fg_loss_scaler_state s = {sizeof s, v[0], (int64_t)v[1], (int64_t)v[2], (int64_t)v[3]};
    fg_error e = {0};
    fg_status st = PREC(t)->set_scaler_state(t->precision.state, &s, &e);
    if (st != FG_OK)
        return fg_error_set(err, st, "%s: %s", fg_ckpt_path(c), e.message);
    if (!t->scaler.dev_stage) return FG_OK;
    st = PREC(t)->get_scaler_state(t->precision.state, &s, &e); /* as the plugin took it */
    if (st != FG_OK) return fg_error_set(err, st, "%s: %s", fg_ckpt_path(c), e.message);
    return fg_train_stage_scaler_start(&t->tctx, t->scaler.dev_stage, &s, err);
}

void fg_trainer_report_precision(fg_trainer *t)
{
    fg_loss_scaler_state s;
    if (fg_trainer_scaler_state(t, &s))
        fprintf(t->out, "loss scale: %.17g, %lld step(s) skipped for inf/NaN gradients\n",
                s.scale, (long long)s.skipped_steps);
}
