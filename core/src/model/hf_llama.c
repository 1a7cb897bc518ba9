/* Hugging Face Llama's tensor names for a model's tensors, by layer kind (hf_llama.h). */
#include "hf_llama.h"

#include <stdio.h>
#include <string.h>

/* A block's tensors (after "model.layers.N."), attn.qkv aside. */
static const fg_hf_rename block_renames[] = {
    {"ln_1.weight", "input_layernorm.weight"},
    {"attn.proj.weight", "self_attn.o_proj.weight"},
    {"ln_2.weight", "post_attention_layernorm.weight"},
    {"mlp.gate_proj.weight", "mlp.gate_proj.weight"},
    {"mlp.up_proj.weight", "mlp.up_proj.weight"},
    {"mlp.down_proj.weight", "mlp.down_proj.weight"},
};

static fg_status no_place(const fg_tensor_info *t, const fg_layer *l, const char *why,
                          fg_error *err)
{
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: the model's tensor '%s' ([%s], %s) has "
                        "no place in the Hugging Face Llama layout: %s", l->origin, t->name,
                        l->section, l->ops->type, why);
}

/* How many layers of the given kind come before layer `index`. */
static int kind_rank(const fg_model *m, const char *type, int index)
{
    int n = 0;
    for (int i = 0; i < index; i++)
        n += strcmp(fg_model_layer(m, (size_t)i)->ops->type, type) == 0;
    return n;
}

static void set_part(fg_hf_part *p, const char *name, int64_t first, int64_t rows)
{
    size_t n = strlen(name);
    n = n < sizeof p->name - 1 ? n : sizeof p->name - 1; /* names are far shorter */
    memcpy(p->name, name, n);
    p->name[n] = '\0';
    p->first_row = first;
    p->rows = rows;
}

static fg_status block_parts(const fg_model *m, const fg_tensor_info *t, const fg_layer *l,
                             fg_hf_part parts[3], int *count, fg_error *err)
{
    if (!l->rms || !l->swiglu || !l->rope)
        return no_place(t, l, "a Llama block has norm = rmsnorm, mlp = swiglu and position = "
                        "rope", err);
    char prefix[FG_HF_NAME_MAX];
    snprintf(prefix, sizeof prefix, "model.layers.%d.", kind_rank(m, l->ops->type, l->index));
    const char *local = t->name + strlen(l->name) + 1;
    char name[FG_HF_NAME_MAX * 2];
    if (strcmp(local, "attn.qkv.weight") == 0) {
        int64_t head_dim = l->in.dims[1] / l->heads;
        int64_t kv = (l->kv_heads ? l->kv_heads : l->heads) * head_dim;
        const char *proj[3] = {"q_proj", "k_proj", "v_proj"};
        int64_t first[3] = {0, l->heads * head_dim, l->heads * head_dim + kv};
        int64_t rows[3] = {l->heads * head_dim, kv, kv};
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "%sself_attn.%s.weight", prefix, proj[p]);
            set_part(&parts[p], name, first[p], rows[p]);
        }
        *count = 3;
        return FG_OK;
    }
    for (size_t r = 0; r < sizeof block_renames / sizeof *block_renames; r++)
        if (strcmp(local, block_renames[r].ours) == 0) {
            snprintf(name, sizeof name, "%s%s", prefix, block_renames[r].theirs);
            set_part(&parts[0], name, 0, t->shape[0]);
            *count = 1;
            return FG_OK;
        }
    return no_place(t, l, "Llama's blocks have no biases (bias = false)", err);
}

/* The embedding, the final rmsnorm and the head: one each, weights only. */
static fg_status single_part(const fg_model *m, const fg_tensor_info *t, const fg_layer *l,
                             const char *name, fg_hf_part *part, int *count, fg_error *err)
{
    if (kind_rank(m, l->ops->type, l->index) > 0)
        return no_place(t, l, "the layout has one layer of this kind", err);
    if (strcmp(t->name + strlen(l->name), ".weight") != 0)
        return no_place(t, l, "only weights (bias = false)", err);
    set_part(part, name, 0, t->shape[0]);
    *count = 1;
    return FG_OK;
}

fg_status fg_hf_llama_parts(const fg_model *m, size_t i, fg_hf_part parts[3], int *count,
                            fg_error *err)
{
    const fg_tensor_info *t = fg_model_tensor(m, i);
    const fg_layer *l = fg_model_layer(m, (size_t)t->layer);
    const char *type = l->ops->type;
    *count = 0;
    if (fg_tensor_is_fp8_state(t)) /* fp8-mixed's scaling state: no place in the layout */
        return FG_OK;
    if (strcmp(type, "transformer_block") == 0)
        return block_parts(m, t, l, parts, count, err);
    if (strcmp(type, "embedding") == 0)
        return single_part(m, t, l, "model.embed_tokens.weight", parts, count, err);
    if (strcmp(type, "rmsnorm") == 0)
        return single_part(m, t, l, "model.norm.weight", parts, count, err);
    if (strcmp(type, "linear") == 0)
        return single_part(m, t, l, "lm_head.weight", parts, count, err);
    return no_place(t, l, "the layout holds an embedding, transformer blocks, an rmsnorm and "
                    "a linear head", err);
}

int fg_hf_llama_is_derived(const char *file_name)
{
    const char *tail = ".self_attn.rotary_emb.inv_freq";
    size_t a = strlen(file_name), b = strlen(tail);
    return a >= b && strcmp(file_name + a - b, tail) == 0;
}
