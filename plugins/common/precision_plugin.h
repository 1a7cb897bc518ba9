/* What the precision plugins share: init/deinit of a plugin without state, the answer to
 * info(), the two vtable entries of a precision without loss scaling, and the whole
 * definition of a plugin that has only those. */
#ifndef FULGUR_PLUGIN_COMMON_PRECISION_H
#define FULGUR_PLUGIN_COMMON_PRECISION_H

#include "fulgur/precision.h"

/* init and deinit of a plugin that keeps no state (*state = NULL). */
fg_status fg_plugin_stateless_init(const fg_host *host, void **state, fg_error *err);
void fg_plugin_stateless_deinit(void *state);

/* Fills info()'s answer and returns FG_OK; out->struct_size is the caller's and stays. */
fg_status fg_plugin_precision_info(fg_precision_info *out, uint32_t param_dtype,
                                   uint32_t compute_dtype, uint32_t grad_dtype,
                                   int master_weights, int loss_scaling);

/* The enum option "grad_dtype" (fp32|half) of the mixed modes: FG_F32, or half_dtype for
 * "half". FG_INTERNAL "who: cannot read grad_dtype" when the host does not serve it. */
fg_status fg_plugin_read_grad_dtype(const fg_host *host, uint32_t half_dtype, const char *who,
                                    uint32_t *out, fg_error *err);

/* The option entry fg_plugin_read_grad_dtype reads: `lightning_` names the Lightning mode
 * that fp32 gradients match ("bf16-mixed"), `half_` the half type ("bf16"). */
#define FG_PLUGIN_GRAD_DTYPE_OPTION(lightning_, half_)                                       \
    {"grad_dtype", FG_OPT_ENUM, "fp32", 1, 0, "fp32|half",                                  \
     "dtype of parameter gradients: fp32 (as Lightning's " lightning_ ") or half (" half_    \
     " gradients, half the bytes; strategy single only; the f32 master update reads them)"}

/* loss_scale and update_scale without loss scaling: the factor is 1, and a step whose
 * gradients hold an inf or NaN is skipped. */
float fg_plugin_unscaled_loss_scale(void *state);
fg_status fg_plugin_unscaled_update_scale(void *state, int found_nonfinite, int *skip_step,
                                          fg_error *err);

/* A precision plugin without options, state or loss scaling (fp32, bf16-true, fp16-true)
 * in one statement: its descriptor with a vtable of info_ and the unscaled entries. */
#define FG_PLUGIN_STATELESS_PRECISION(name_, description_, info_)                            \
    FG_PLUGIN_DEFINE_VTABLE(fg_precision_vtable, FG_KIND_PRECISION, 0, name_, "1.0.0",       \
                            description_, FG_PLUGIN_NO_OPTIONS, fg_plugin_stateless_init,    \
                            fg_plugin_stateless_deinit, .info = (info_),                     \
                            .loss_scale = fg_plugin_unscaled_loss_scale,                     \
                            .update_scale = fg_plugin_unscaled_update_scale)

#endif
