/* Dynamic loss scaling, as torch.cuda.amp.GradScaler with DeepSpeed's min_scale and
 * hysteresis: the loss is multiplied by `scale` before backward; a step whose unscaled
 * gradients hold an inf or NaN is skipped and, once `hysteresis` such steps have been
 * absorbed, the scale is multiplied by backoff_factor (never below min_scale); after
 * growth_interval clean steps in a row it is multiplied by growth_factor (never beyond
 * FLT_MAX) and the hysteresis is restored. */
#ifndef FG_FP16_SCALER_H
#define FG_FP16_SCALER_H

#include "fulgur/precision.h"

typedef struct fg_scaler_config {
    double init_scale, growth_factor, backoff_factor, min_scale;
    int64_t growth_interval, hysteresis;
} fg_scaler_config;

typedef struct fg_scaler {
    fg_scaler_config cfg;
    fg_loss_scaler_state s;
} fg_scaler;

/* Checks the configuration (message in err) and starts at init_scale. */
fg_status fg_scaler_init(fg_scaler *sc, const fg_scaler_config *cfg, fg_error *err);
/* After a step's gradients were unscaled and checked: returns 1 when the step must be
 * skipped (found_nonfinite), 0 otherwise; updates the scale. */
int fg_scaler_update(fg_scaler *sc, int found_nonfinite);
/* Restores a saved state, checked against the configuration. */
fg_status fg_scaler_restore(fg_scaler *sc, const fg_loss_scaler_state *in, fg_error *err);

#endif
