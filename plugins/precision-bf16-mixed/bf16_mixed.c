/* precision.bf16-mixed: f32 master weights and optimizer state; forward and backward in
 * bfloat16 from a working copy of the parameters cast once per optimizer step; gradients
 * accumulated in f32. bfloat16 has float32's exponent range: no loss scaling. */
#include <stdlib.h>

#include "precision_plugin.h"

typedef struct bf16_state {
    uint32_t grad_dtype;
} bf16_state;

static const fg_option bf16_options[] = {
    FG_PLUGIN_GRAD_DTYPE_OPTION("bf16-mixed", "bf16"),
};

static fg_status bf16_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    uint32_t grad = FG_F32;
    fg_status st = fg_plugin_read_grad_dtype(host, FG_BF16, "precision.bf16-mixed", &grad, err);
    bf16_state *p = st == FG_OK ? calloc(1, sizeof *p) : NULL;
    if (st == FG_OK && !p)
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "precision.bf16-mixed: out of memory");
    if (st == FG_OK) {
        p->grad_dtype = grad;
        *state = p;
    }
    return st;
}

static void bf16_deinit(void *state) { free(state); }

static fg_status bf16_info(void *state, fg_precision_info *out, fg_error *err)
{
    uint32_t grad = ((const bf16_state *)state)->grad_dtype;
    return fg_plugin_precision_info(out, FG_BF16, FG_BF16, grad, 1, 0);
}

FG_PLUGIN_DEFINE_VTABLE(fg_precision_vtable, FG_KIND_PRECISION, 0, "bf16-mixed", "1.0.0",
                        "bfloat16 forward/backward from f32 master weights; no loss scaling",
                        FG_PLUGIN_OPTIONS(bf16_options), bf16_init, bf16_deinit,
                        .info = bf16_info, .loss_scale = fg_plugin_unscaled_loss_scale,
                        .update_scale = fg_plugin_unscaled_update_scale);
