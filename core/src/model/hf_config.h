/* A Hugging Face config.json (model_type llama) read into the config as the layer sections
 * an INI would write: [layer.embed_tokens] (embedding), [layer.layers] (transformer_block,
 * repeat = num_hidden_layers, the Llama options), [layer.norm] (rmsnorm), [layer.lm_head]
 * (linear, tied to the embedding when tie_word_embeddings). Each value's origin is
 * "FILE: json_key", so `fulgur check` and every later message name the key. */
#ifndef FG_HF_CONFIG_H
#define FG_HF_CONFIG_H

#include <stdio.h>

#include "config.h"

/* [model] hf_config, or else the config.json beside [model] init_from when the INI has no
 * [layer.*] section but those four (nothing when neither). A key the INI also sets must
 * agree (numbers by value), else it fails naming both; a [layer.*] section of another
 * name, a model_type other than llama, a rope_scaling other than default, llama3 or linear
 * (hf_rope_scaling.h), or a key it does not know fail naming the key and file;
 * [data] context above max_position_embeddings fails naming both. */
fg_status fg_hf_config_apply(fg_config *cfg, fg_error *err);

/* The config.json fg_hf_config_apply reads (path in out), or "" when none applies. */
void fg_hf_config_path(const fg_config *cfg, char *out, size_t cap);

/* `fulgur check`: the layer sections as the INI would write them, each key with its origin
 * (nothing when no config.json was read). */
void fg_hf_config_print(const fg_config *cfg, FILE *out);

#endif
