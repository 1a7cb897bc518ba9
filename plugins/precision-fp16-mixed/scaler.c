/* The dynamic loss scaler of precision.fp16-mixed (see scaler.h). */
#include "scaler.h"

#include <float.h>
#include <math.h>

fg_status fg_scaler_init(fg_scaler *sc, const fg_scaler_config *cfg, fg_error *err)
{
    if (!(cfg->init_scale > 0) || !(cfg->init_scale <= FLT_MAX))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "precision.fp16-mixed: init_scale = %g "
                            "must be positive and at most %g", cfg->init_scale, (double)FLT_MAX);
    if (!(cfg->min_scale > 0) || cfg->min_scale > cfg->init_scale)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "precision.fp16-mixed: min_scale = %g must "
                            "be positive and at most init_scale = %g", cfg->min_scale,
                            cfg->init_scale);
    if (!(cfg->growth_factor >= 1) || !(cfg->backoff_factor > 0 && cfg->backoff_factor <= 1))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "precision.fp16-mixed: growth_factor = %g "
                            "must be >= 1 and backoff_factor = %g in (0, 1]", cfg->growth_factor,
                            cfg->backoff_factor);
    if (cfg->growth_interval < 1 || cfg->hysteresis < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "precision.fp16-mixed: growth_interval = "
                            "%lld and hysteresis = %lld must be >= 1",
                            (long long)cfg->growth_interval, (long long)cfg->hysteresis);
    sc->cfg = *cfg;
    sc->s.struct_size = sizeof sc->s;
    sc->s.scale = cfg->init_scale;
    sc->s.growth_tracker = 0;
    sc->s.hysteresis_left = cfg->hysteresis;
    sc->s.skipped_steps = 0;
    return FG_OK;
}

int fg_scaler_update(fg_scaler *sc, int found_nonfinite)
{
    fg_loss_scaler_state *s = &sc->s;
    if (found_nonfinite) {
        s->skipped_steps++;
        s->growth_tracker = 0;
        if (s->hysteresis_left > 1) {
            s->hysteresis_left--;
        } else {
            double next = s->scale * sc->cfg.backoff_factor;
            s->scale = next > sc->cfg.min_scale ? next : sc->cfg.min_scale;
        }
        return 1;
    }
    if (++s->growth_tracker >= sc->cfg.growth_interval) {
        double next = s->scale * sc->cfg.growth_factor;
        if (next <= FLT_MAX)
            s->scale = next;
        s->growth_tracker = 0;
        s->hysteresis_left = sc->cfg.hysteresis;
    }
    return 0;
}

fg_status fg_scaler_restore(fg_scaler *sc, const fg_loss_scaler_state *in, fg_error *err)
{
    if (!(in->scale > 0) || !(in->scale <= FLT_MAX) || in->growth_tracker < 0 ||
        in->hysteresis_left < 1 || in->skipped_steps < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "precision.fp16-mixed: saved loss-scaler "
                            "state (scale %g, growth tracker %lld, hysteresis left %lld of %lld) "
                            "is not valid", in->scale, (long long)in->growth_tracker,
                            (long long)in->hysteresis_left, (long long)sc->cfg.hysteresis);
    sc->s.scale = in->scale;
    sc->s.growth_tracker = in->growth_tracker;
    /* a run resumed with a smaller hysteresis absorbs no more than it allows */
    sc->s.hysteresis_left = in->hysteresis_left < sc->cfg.hysteresis ? in->hysteresis_left
                                                                     : sc->cfg.hysteresis;
    sc->s.skipped_steps = in->skipped_steps;
    return FG_OK;
}
