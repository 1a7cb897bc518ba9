/* precision.fp32: parameters, activations and gradients in float32; no loss scaling. */
#include "fulgur/precision.h"

static fg_status fp32_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    return FG_OK;
}

static void fp32_deinit(void *state) {}

static fg_status fp32_info(void *state, fg_precision_info *out, fg_error *err)
{
    out->param_dtype = FG_F32;
    out->compute_dtype = FG_F32;
    out->grad_dtype = FG_F32;
    out->master_weights = 0;
    out->loss_scaling = 0;
    return FG_OK;
}

static float fp32_loss_scale(void *state) { return 1.0f; }

static fg_status fp32_update_scale(void *state, int found_nonfinite, int *skip_step, fg_error *err)
{
    *skip_step = found_nonfinite ? 1 : 0;
    return FG_OK;
}

static const fg_precision_vtable vtable = {
    .struct_size = sizeof(fg_precision_vtable),
    .info = fp32_info,
    .loss_scale = fp32_loss_scale,
    .update_scale = fp32_update_scale,
};

FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
    FG_PLUGIN_HEADER(FG_KIND_PRECISION, 0),
    .name = "fp32",
    .version = "1.0.0",
    .description = "float32 parameters, activations and gradients; no loss scaling",
    .init = fp32_init,
    .deinit = fp32_deinit,
    .vtable = &vtable,
};
