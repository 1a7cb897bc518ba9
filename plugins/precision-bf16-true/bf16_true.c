/* precision.bf16-true (Lightning's "bf16-true"): parameters, activations and parameter
 * gradients stored in bfloat16, no f32 master copy. The optimizer updates the bf16
 * parameters in place: each element's update is computed in f32 and rounded to nearest
 * even back into bf16; its state (SGD momentum, AdamW m and v) stays f32. bfloat16 has
 * float32's exponent range: no loss scaling. */
#include "precision_plugin.h"

static fg_status bf16t_info(void *state, fg_precision_info *out, fg_error *err)
{
    return fg_plugin_precision_info(out, FG_BF16, FG_BF16, FG_BF16, 0, 0);
}

static const fg_precision_vtable vtable = {
    .struct_size = sizeof(fg_precision_vtable),
    .info = bf16t_info,
    .loss_scale = fg_plugin_unscaled_loss_scale,
    .update_scale = fg_plugin_unscaled_update_scale,
};

FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
    FG_PLUGIN_HEADER(FG_KIND_PRECISION, 0),
    .name = "bf16-true",
    .version = "1.0.0",
    .description = "bfloat16 parameters, activations and gradients, no f32 master copy "
                   "(optimizer state stays f32; updates rounded to nearest even); no loss "
                   "scaling; strategy single",
    .init = fg_plugin_stateless_init,
    .deinit = fg_plugin_stateless_deinit,
    .vtable = &vtable,
};
