/* [model] scaled_residual_init: GPT-2's initialisation of the residual projections (the
 * attention's and the MLP's output projections of every transformer_block, nanoGPT's
 * c_proj.weight; a SwiGLU MLP's down_proj) drawn with std / sqrt(2 * n_layer), n_layer =
 * the model's blocks. */
#include "residual_init.h"

#include <math.h>
#include <string.h>

#include "model_internal.h"

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

static int is_block(const fg_layer *l)
{
    return strcmp(l->ops->type, "transformer_block") == 0;
}

static int is_residual_projection(const fg_model *m, const fg_tensor_info *t)
{
    return !t->is_buffer && is_block(&m->layers[t->layer]) &&
           (ends_with(t->name, ".attn.proj.weight") || ends_with(t->name, ".mlp.proj.weight") ||
            ends_with(t->name, ".mlp.down_proj.weight"));
}

fg_status fg_model_scale_residual_init(fg_model *m, const fg_config *cfg, fg_error *err)
{
    size_t blocks = 0;
    for (size_t i = 0; i < m->layer_count; i++) blocks += is_block(&m->layers[i]);
    const char *origin = fg_config_origin(cfg, "model", "scaled_residual_init");
    if (!blocks)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] scaled_residual_init = true "
                            "scales the projections of transformer_block layers, and the model "
                            "has none", origin);
    double scale = 1.0 / sqrt(2.0 * (double)blocks);
    for (size_t i = 0; i < m->tensor_count; i++) {
        fg_tensor_info *t = &m->tensors[i];
        if (!is_residual_projection(m, t)) continue;
        if (t->init != FG_INIT_NORMAL)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] scaled_residual_init = "
                                "true scales GPT-2's normal initialisation, but [%s] draws "
                                "%s uniformly; set init_std (0.02 as GPT-2) there", origin,
                                m->layers[t->layer].section, t->name);
        t->bound *= scale;
    }
    return FG_OK;
}
