/* Hugging Face Llama's tensor names for a model's tensors (model.embed_tokens, model.layers.N
 * .self_attn.{q,k,v,o}_proj, .mlp.{gate,up,down}_proj, .{input,post_attention}_layernorm,
 * model.norm, lm_head), by layer kind: the embedding, the transformer blocks (counted from
 * 0 in file order), the rmsnorm layer and the linear head. Shared by init_from (reading) and
 * `fulgur export` (writing). */
#ifndef FG_HF_LLAMA_H
#define FG_HF_LLAMA_H

#include <stdint.h>

#include "model.h"

#define FG_HF_NAME_MAX (FG_TENSOR_NAME_MAX + 48)

/* A rename table's row: a name (or part of one) of ours and Hugging Face's for it (Llama's
 * block tensors here, GPT-2's Conv1D modules in init_from.c). */
typedef struct fg_hf_rename {
    const char *ours, *theirs;
} fg_hf_rename;

/* One file tensor a model tensor is made of: its name and the model tensor's rows it holds
 * (attn.qkv's rows are q_proj's, then k_proj's, then v_proj's). */
typedef struct fg_hf_part {
    char name[FG_HF_NAME_MAX];
    int64_t first_row, rows;
} fg_hf_part;

/* The file tensors of model tensor i: 1 (a rename) or 3 (attn.qkv). Fails naming the tensor
 * and its [layer.NAME] when the layout has no place for it (a bias, a layer norm, a GELU MLP,
 * learned positions, a second embedding, ...). */
fg_status fg_hf_llama_parts(const fg_model *m, size_t i, fg_hf_part parts[3], int *count,
                            fg_error *err);

/* Whether a file tensor is derived from the config, not a weight (rotary_emb.inv_freq of
 * older checkpoints): init_from skips it. */
int fg_hf_llama_is_derived(const char *file_name);

#endif
