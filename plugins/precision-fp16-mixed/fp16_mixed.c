/* precision.fp16-mixed: f32 master weights and optimizer state; forward and backward in
 * float16 from a working copy of the parameters cast once per optimizer step; gradients
 * accumulated in f32; the loss scaled dynamically (scaler.c) so that small gradients
 * survive float16, steps with inf/NaN gradients skipped. */
#include <stdlib.h>

#include "precision_plugin.h"
#include "scaler.h"

typedef struct fp16_state {
    fg_scaler scaler;
    uint32_t grad_dtype;
} fp16_state;

static const fg_option fp16_options[] = {
    FG_PLUGIN_GRAD_DTYPE_OPTION("16-mixed", "fp16"),
    {"init_scale", FG_OPT_FLOAT, "65536", 1e-30, 3.4e38, NULL,
     "loss scale at the start (2^16)"},
    {"growth_factor", FG_OPT_FLOAT, "2", 1, 1e6, NULL,
     "the scale is multiplied by this after growth_interval clean steps in a row"},
    {"backoff_factor", FG_OPT_FLOAT, "0.5", 1e-6, 1, NULL,
     "the scale is multiplied by this when a step's gradients hold an inf or NaN"},
    {"growth_interval", FG_OPT_INT, "2000", 1, 1e12, NULL,
     "clean optimizer steps in a row before the scale grows"},
    {"min_scale", FG_OPT_FLOAT, "1", 1e-30, 3.4e38, NULL,
     "the scale never backs off below this"},
    {"hysteresis", FG_OPT_INT, "1", 1, 1000000, NULL,
     "overflowing steps skipped before the scale backs off (DeepSpeed's hysteresis; 1: "
     "back off at every overflow, as PyTorch)"},
};

static fg_status read_float(const fg_host *host, const char *key, double *out, fg_error *err)
{
    fg_status st = host->get_float(host, key, out);
    return st == FG_OK ? FG_OK : fg_error_set(err, st, "precision.fp16-mixed: cannot read %s", key);
}

static fg_status read_int(const fg_host *host, const char *key, int64_t *out, fg_error *err)
{
    fg_status st = host->get_int(host, key, out);
    return st == FG_OK ? FG_OK : fg_error_set(err, st, "precision.fp16-mixed: cannot read %s", key);
}

static fg_status fp16_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    fp16_state *p = calloc(1, sizeof *p);
    if (!p)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "precision.fp16-mixed: out of memory");
    fg_scaler_config cfg;
    fg_status st = read_float(host, "init_scale", &cfg.init_scale, err);
    if (st == FG_OK) st = read_float(host, "growth_factor", &cfg.growth_factor, err);
    if (st == FG_OK) st = read_float(host, "backoff_factor", &cfg.backoff_factor, err);
    if (st == FG_OK) st = read_float(host, "min_scale", &cfg.min_scale, err);
    if (st == FG_OK) st = read_int(host, "growth_interval", &cfg.growth_interval, err);
    if (st == FG_OK) st = read_int(host, "hysteresis", &cfg.hysteresis, err);
    if (st == FG_OK)
        st = fg_plugin_read_grad_dtype(host, FG_F16, "precision.fp16-mixed", &p->grad_dtype, err);
    if (st == FG_OK) st = fg_scaler_init(&p->scaler, &cfg, err);
    if (st == FG_OK)
        *state = p;
    else
        free(p);
    return st;
}

static void fp16_deinit(void *state) { free(state); }

static fg_status fp16_info(void *state, fg_precision_info *out, fg_error *err)
{
    uint32_t grad = ((const fp16_state *)state)->grad_dtype;
    return fg_plugin_precision_info(out, FG_F16, FG_F16, grad, 1, 1);
}

static float fp16_loss_scale(void *state)
{
    return (float)((fp16_state *)state)->scaler.s.scale;
}

static fg_status fp16_update_scale(void *state, int found_nonfinite, int *skip_step,
                                   fg_error *err)
{
    *skip_step = fg_scaler_update(&((fp16_state *)state)->scaler, found_nonfinite);
    return FG_OK;
}

static fg_status fp16_get_state(void *state, fg_loss_scaler_state *out, fg_error *err)
{
    *out = ((fp16_state *)state)->scaler.s;
    return FG_OK;
}

static fg_status fp16_set_state(void *state, const fg_loss_scaler_state *in, fg_error *err)
{
    return fg_scaler_restore(&((fp16_state *)state)->scaler, in, err);
}

static fg_status fp16_scaler_rule(void *state, fg_loss_scale_rule *out, fg_error *err)
{
    (void)err;
    const fg_scaler_config *c = &((const fp16_state *)state)->scaler.cfg;
    fg_loss_scale_rule r = {sizeof r, c->growth_factor, c->backoff_factor, c->min_scale,
                            c->growth_interval, c->hysteresis};
    *out = r;
    return FG_OK;
}

static const fg_precision_vtable vtable = {
    .struct_size = sizeof(fg_precision_vtable),
    .info = fp16_info,
    .loss_scale = fp16_loss_scale,
    .update_scale = fp16_update_scale,
    .get_scaler_state = fp16_get_state,
    .set_scaler_state = fp16_set_state,
    .scaler_rule = fp16_scaler_rule,
};

FG_PLUGIN_DEFINE(FG_KIND_PRECISION, 0, "fp16-mixed", "1.0.0",
                 "float16 forward/backward from f32 master weights, dynamic loss scaling",
                 FG_PLUGIN_OPTIONS(fp16_options), fp16_init, fp16_deinit, &vtable);
