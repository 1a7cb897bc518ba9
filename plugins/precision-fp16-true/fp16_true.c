/* precision.fp16-true (Lightning's "16-true"): parameters, activations and parameter
 * gradients stored in IEEE float16, no f32 master copy. The optimizer updates the f16
 * parameters in place: each element's update is computed in f32 and rounded to nearest
 * even back into f16; its state (SGD momentum, AdamW m and v) stays f32. As in Lightning's
 * 16-true there is no loss scaler: gradients below float16's range (6e-8) flush to zero
 * and a value above 65504 becomes inf, so this suits models whose values stay in that
 * range; fp16-mixed is the safe choice. */
#include "precision_plugin.h"

static fg_status fp16t_info(void *state, fg_precision_info *out, fg_error *err)
{
    return fg_plugin_precision_info(out, FG_F16, FG_F16, FG_F16, 0, 0);
}

FG_PLUGIN_STATELESS_PRECISION("fp16-true",
                              "IEEE float16 parameters, activations and gradients, no f32 master "
                              "copy (optimizer state stays f32; updates rounded to nearest even); "
                              "no loss scaling (values must stay within float16's range); strategy "
                              "single",
                              fp16t_info);
