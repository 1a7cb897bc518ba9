/* precision.fp32: parameters, activations and gradients in float32; no loss scaling. */
#include "precision_plugin.h"

static fg_status fp32_info(void *state, fg_precision_info *out, fg_error *err)
{
    return fg_plugin_precision_info(out, FG_F32, FG_F32, FG_F32, 0, 0);
}

FG_PLUGIN_STATELESS_PRECISION("fp32",
                              "float32 parameters, activations and gradients; no loss scaling",
                              fp32_info);
