/* GPT-2's scaled initialisation of the residual projections ([model] scaled_residual_init,
 * residual_init.c). */
#ifndef FG_RESIDUAL_INIT_H
#define FG_RESIDUAL_INIT_H

#include "config.h"
#include "model.h"

/* Divides the init std of every transformer_block's attn.proj.weight and mlp.proj.weight by
 * sqrt(2 * the model's transformer_block count). Fails, naming the key's file:line, when
 * the model has no block or a block draws them uniformly (init_std = 0). */
fg_status fg_model_scale_residual_init(fg_model *m, const fg_config *cfg, fg_error *err);

#endif
