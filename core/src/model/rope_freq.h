/* Rope scaling (transformer_block rope_scaling = llama3 | linear): the keys' reading and
 * checks, and the table of inverse frequencies computed once from them, as Hugging Face's
 * _compute_llama3_parameters and linear rope scaling compute theirs. */
#ifndef FG_MODEL_ROPE_FREQ_H
#define FG_MODEL_ROPE_FREQ_H

#include "layer.h"

/* Reads rope_scaling and its parameters into l (after rope and rope_theta); a parameter
 * set without its scaling, or one the scaling needs left unset, fails naming the key. */
fg_status fg_rope_scaling_configure(fg_layer *l, const fg_config *cfg, fg_error *err);

/* Fills l->rope_inv_freq for head_dim when l scales its rope (nothing otherwise); a
 * head_dim over 2 * FG_ROPE_MAX_PAIRS fails naming the key. */
fg_status fg_rope_scaling_plan(fg_layer *l, int64_t head_dim, fg_error *err);

/* The inverse frequency of pair i of head_dim under the scaling's parameters (exposed for
 * the tests' sake: what the table holds). */
double fg_rope_inv_freq(int scaling, double theta, double factor, double low, double high,
                        double original, int i, int64_t head_dim);

#endif
