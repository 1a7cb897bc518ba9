/* A model in the Hugging Face Llama layout: DIR/model.safetensors (or its shards and index;
 * hf_llama.h's names, q, k
 * and v split out of attn.qkv, F32 or BF16) and DIR/config.json (model_type llama, the shape
 * read off the layers), so that transformers' LlamaForCausalLM.from_pretrained(DIR) opens a
 * model fulgur trained. */
#ifndef FG_HF_EXPORT_H
#define FG_HF_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include "fulgur/types.h"
#include "model.h"

/* params: fg_model_params_size floats on the host. dtype: FG_F32 or FG_BF16 (rounded to
 * nearest even). base_config: the config.json the run read ([model] hf_config, hf_config.h),
 * or NULL: its other keys (token ids, architectures, ...) are kept and the shape keys
 * rewritten; max_positions is max_position_embeddings when there is none. A model that is
 * not an embedding, Llama blocks of one shape, an rmsnorm and a bias-free head fails naming
 * the layer at fault. max_shard_bytes > 0: the weights as Hugging Face's shards of at most
 * that many bytes each and model.safetensors.index.json (hf_index.h) instead of
 * model.safetensors. A line saying what was written goes to out. */
fg_status fg_hf_llama_export(const fg_model *m, const float *params, const char *dir,
                             fg_dtype dtype, const char *base_config, long long max_positions,
                             uint64_t max_shard_bytes, FILE *out, fg_error *err);

#endif
