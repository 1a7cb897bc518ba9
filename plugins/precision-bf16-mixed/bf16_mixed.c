/* precision.bf16-mixed: f32 master weights and optimizer state; forward and backward in
 * bfloat16 from a working copy of the parameters cast once per optimizer step; gradients
 * accumulated in f32. bfloat16 has float32's exponent range: no loss scaling. */
#include <stdlib.h>
#include <string.h>

#include "fulgur/precision.h"

typedef struct bf16_state {
    uint32_t grad_dtype;
} bf16_state;

static const fg_option bf16_options[] = {
    {"grad_dtype", FG_OPT_ENUM, "fp32", 1, 0, "fp32|half",
     "dtype of parameter gradients: fp32 (as Lightning's bf16-mixed) or half (bf16 gradients, half "
     "the bytes; strategy single only; the f32 master update reads them)"},
};

static fg_status bf16_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    const char *grad = "fp32";
    if (host->get_string(host, "grad_dtype", &grad) != FG_OK)
        return fg_error_set(err, FG_INTERNAL, "precision.bf16-mixed: cannot read grad_dtype");
    bf16_state *p = calloc(1, sizeof *p);
    if (!p)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "precision.bf16-mixed: out of memory");
    p->grad_dtype = strcmp(grad, "half") == 0 ? FG_BF16 : FG_F32;
    *state = p;
    return FG_OK;
}

static void bf16_deinit(void *state) { free(state); }

static fg_status bf16_info(void *state, fg_precision_info *out, fg_error *err)
{
    out->param_dtype = FG_BF16;
    out->compute_dtype = FG_BF16;
    out->grad_dtype = ((const bf16_state *)state)->grad_dtype;
    out->master_weights = 1;
    out->loss_scaling = 0;
    return FG_OK;
}

static float bf16_loss_scale(void *state) { return 1.0f; }

static fg_status bf16_update_scale(void *state, int found_nonfinite, int *skip_step,
                                   fg_error *err)
{
    *skip_step = found_nonfinite ? 1 : 0;
    return FG_OK;
}

static const fg_precision_vtable vtable = {
    .struct_size = sizeof(fg_precision_vtable),
    .info = bf16_info,
    .loss_scale = bf16_loss_scale,
    .update_scale = bf16_update_scale,
};

FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
    FG_PLUGIN_HEADER(FG_KIND_PRECISION, 0),
    .name = "bf16-mixed",
    .version = "1.0.0",
    .description = "bfloat16 forward/backward from f32 master weights; no loss scaling",
    FG_PLUGIN_OPTIONS(bf16_options),
    .init = bf16_init,
    .deinit = bf16_deinit,
    .vtable = &vtable,
};
