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
} fg_precision_info;

typedef struct fg_precision_vtable {
    uint32_t struct_size;
    fg_status (*info)(void *state, fg_precision_info *out, fg_error *err);
    /* The factor the loss is multiplied by before backward (1 without scaling). */
    float (*loss_scale)(void *state);
    /* After unscaling: found_nonfinite says whether any gradient was inf/NaN. Sets
     * *skip_step when the optimizer step must be skipped, and updates the scale. */
    fg_status (*update_scale)(void *state, int found_nonfinite, int *skip_step, fg_error *err);
} fg_precision_vtable;

#ifdef __cplusplus
}
#endif
#endif
