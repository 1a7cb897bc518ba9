/* Helpers of the precision plugins; see precision_plugin.h. */
#include "precision_plugin.h"

#include <string.h>

fg_status fg_plugin_stateless_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    return FG_OK;
}

void fg_plugin_stateless_deinit(void *state) {}

fg_status fg_plugin_precision_info(fg_precision_info *out, uint32_t param_dtype,
                                   uint32_t compute_dtype, uint32_t grad_dtype,
                                   int master_weights, int loss_scaling)
{
    out->param_dtype = param_dtype;
    out->compute_dtype = compute_dtype;
    out->grad_dtype = grad_dtype;
    out->master_weights = master_weights;
    out->loss_scaling = loss_scaling;
    return FG_OK;
}

fg_status fg_plugin_read_grad_dtype(const fg_host *host, uint32_t half_dtype, const char *who,
                                    uint32_t *out, fg_error *err)
{
    const char *grad = "fp32";
    if (host->get_string(host, "grad_dtype", &grad) != FG_OK)
        return fg_error_set(err, FG_INTERNAL, "%s: cannot read grad_dtype", who);
    *out = strcmp(grad, "half") == 0 ? half_dtype : FG_F32;
    return FG_OK;
}

float fg_plugin_unscaled_loss_scale(void *state) { return 1.0f; }

fg_status fg_plugin_unscaled_update_scale(void *state, int found_nonfinite, int *skip_step,
                                          fg_error *err)
{
    *skip_step = found_nonfinite ? 1 : 0;
    return FG_OK;
}
