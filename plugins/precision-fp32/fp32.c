/* precision.fp32: parameters, activations and gradients in float32; no loss scaling. */
#include "precision_plugin.h"

static fg_status fp32_info(void *state, fg_precision_info *out, fg_error *err)
{
    return fg_plugin_precision_info(out, FG_F32, FG_F32, FG_F32, 0, 0);
}

static const fg_precision_vtable vtable = {
    .struct_size = sizeof(fg_precision_vtable),
    .info = fp32_info,
    .loss_scale = fg_plugin_unscaled_loss_scale,
    .update_scale = fg_plugin_unscaled_update_scale,
};

FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
    FG_PLUGIN_HEADER(FG_KIND_PRECISION, 0),
    .name = "fp32",
    .version = "1.0.0",
    .description = "float32 parameters, activations and gradients; no loss scaling",
    .init = fg_plugin_stateless_init,
    .deinit = fg_plugin_stateless_deinit,
    .vtable = &vtable,
};
