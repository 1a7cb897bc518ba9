/* precision.bf16-true (Lightning's "bf16-true"): parameters, activations and parameter
 * gradients stored in bfloat16, no f32 master copy. The optimizer updates the bf16
 * parameters in place: each element's update is computed in f32 and rounded to nearest
 * even back into bf16; its state (SGD momentum, AdamW m and v) stays f32. bfloat16 has
 * float32's exponent range: no loss scaling. */
#include "fulgur/precision.h"

static fg_status bf16t_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    return FG_OK;
}

static void bf16t_deinit(void *state) {}

static fg_status bf16t_info(void *state, fg_precision_info *out, fg_error *err)
{
    out->param_dtype = FG_BF16;
    out->compute_dtype = FG_BF16;
    out->grad_dtype = FG_BF16;
    out->master_weights = 0;
    out->loss_scaling = 0;
    return FG_OK;
}

static float bf16t_loss_scale(void *state) { return 1.0f; }

static fg_status bf16t_update_scale(void *state, int found_nonfinite, int *skip_step,
                                    fg_error *err)
{
    *skip_step = found_nonfinite ? 1 : 0;
    return FG_OK;
}

static const fg_precision_vtable vtable = {
    .struct_size = sizeof(fg_precision_vtable),
    .info = bf16t_info,
    .loss_scale = bf16t_loss_scale,
    .update_scale = bf16t_update_scale,
};

FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
    FG_PLUGIN_HEADER(FG_KIND_PRECISION, 0),
    .name = "bf16-true",
    .version = "1.0.0",
    .description = "bfloat16 parameters, activations and gradients, no f32 master copy "
                   "(optimizer state stays f32; updates rounded to nearest even); no loss "
                   "scaling; strategy single",
    .init = bf16t_init,
    .deinit = bf16t_deinit,
    .vtable = &vtable,
};
