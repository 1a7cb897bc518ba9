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

FG_PLUGIN_STATELESS_PRECISION("bf16-true",
                              "bfloat16 parameters, activations and gradients, no f32 master copy "
                              "(optimizer state stays f32; updates rounded to nearest even); no "
                              "loss scaling; strategy single",
                              bf16t_info);
