/* Precision plugins: parameter/compute/gradient dtypes, master weights and loss scaling.
 * Thread rule: called from the trainer's thread only. */
#ifndef FULGUR_PRECISION_H
#define FULGUR_PRECISION_H

#include "fulgur/plugin.h"
#include "fulgur/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fg_precision_info {
    uint32_t struct_size;
    uint32_t param_dtype;    /* fg_dtype the model's working parameters are stored in */
    uint32_t compute_dtype;  /* fg_dtype of activations */
    uint32_t grad_dtype;     /* fg_dtype of gradients */
    int32_t master_weights;  /* fp32 master copy kept for the optimizer */
    int32_t loss_scaling;    /* dynamic loss scaling in use */
    /* ABI 1.9: linear layers' gemms in fp8 (backend op gemm_fp8) with delayed scaling.
     * fp8_format FG_FP8_NONE (0, and every older plugin): none. Otherwise the history length
     * (>= 1), the amax algorithm (fg_fp8_amax_algo) and the margin: a tensor's scale is
     * fp8_max / amax / 2^margin (Transformer Engine's DelayedScaling). */
    uint32_t fp8_format;
    int32_t fp8_amax_history_len;
    int32_t fp8_amax_compute_algo;
    float fp8_margin;
} fg_precision_info;

/* A dynamic loss scaler's state, saved in checkpoints and restored on resume (ABI 1.x
 * append). */
typedef struct fg_loss_scaler_state {
    uint32_t struct_size;
    double scale;            /* the factor the loss is multiplied by */
    int64_t growth_tracker;  /* clean steps since the scale last changed or overflowed */
    int64_t hysteresis_left; /* overflows still absorbed before the scale backs off */
    int64_t skipped_steps;   /* optimizer steps skipped so far for inf/NaN gradients */
} fg_loss_scaler_state;

/* ABI 1.10: how a dynamic loss scaler moves its scale (precision.fp16-mixed's keys):
 * the backend's loss_scale_update applies it on the device. */
typedef struct fg_loss_scale_rule {
    uint32_t struct_size;
    double growth_factor, backoff_factor, min_scale;
    int64_t growth_interval, hysteresis;
} fg_loss_scale_rule;

typedef struct fg_precision_vtable {
    uint32_t struct_size;
    fg_status (*info)(void *state, fg_precision_info *out, fg_error *err);
    /* The factor the loss is multiplied by before backward (1 without scaling). */
    float (*loss_scale)(void *state);
    /* After unscaling: found_nonfinite says whether any gradient was inf/NaN. Sets
     * *skip_step when the optimizer step must be skipped, and updates the scale. */
    fg_status (*update_scale)(void *state, int found_nonfinite, int *skip_step, fg_error *err);
    /* the scaler's state, for checkpoints (NULL without loss scaling).
     * set_scaler_state checks the values (a scale that is not finite and positive fails). */
    fg_status (*get_scaler_state)(void *state, fg_loss_scaler_state *out, fg_error *err);
    fg_status (*set_scaler_state)(void *state, const fg_loss_scaler_state *in, fg_error *err);
    /* ABI 1.10: the rule update_scale follows, for the trainer to run the same update on
     * the device (backend op loss_scale_update) where reading the gradients' finiteness on
     * the host would wait for the device. NULL: the scaler runs on the host only. */
    fg_status (*scaler_rule)(void *state, fg_loss_scale_rule *out, fg_error *err);
} fg_precision_vtable;

#ifdef __cplusplus
}
#endif
#endif
