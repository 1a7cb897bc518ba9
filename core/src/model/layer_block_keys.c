/* The transformer block's keys (GPT-2's and the Llama-family options), the combinations
 * they refuse with the key at fault, and the tensors a block declares for them (names as
 * PyTorch's state dict; SwiGLU's as Hugging Face Llama's), in layer_block.h's slot order. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layer_block.h"
#include "rope_freq.h"

const fg_option fg_block_options[] = {
    FG_LAYER_TYPE_OPTION("transformer_block"),
    {"heads", FG_OPT_INT, FG_OPT_REQUIRED, 1, 4096, NULL,
     "attention heads; they split the width C evenly"},
    {"repeat", FG_OPT_INT, "1", 1, FG_MAX_REPEAT, NULL,
     "blocks this section makes, one after the other, named NAME.0, NAME.1, ... (their "
     "tensors h.0.attn.qkv.weight, ... as PyTorch's state dict of a ModuleList)"},
    {"mlp_ratio", FG_OPT_INT, "4", 1, 64, NULL,
     "hidden units of the MLP per unit of width (GPT-2: 4)"},
    {"causal", FG_OPT_BOOL, "true", 1, 0, NULL, "position i attends to positions 0..i only"},
    {"attn_dropout", FG_OPT_FLOAT, "0", 0, 0.99, NULL,
     "dropout on the attention weights while training"},
    {"eps", FG_OPT_FLOAT, "1e-5", 0, 1, NULL, "the two norms' epsilon (layernorm or rmsnorm)"},
    {"init_std", FG_OPT_FLOAT, "0", 0, 1e3, NULL,
     "0: PyTorch's Linear initialisation; > 0: weights from N(0, init_std^2) and zero biases, "
     "as GPT-2 (0.02)"},
    {"norm", FG_OPT_ENUM, "layernorm", 1, 0, "layernorm|rmsnorm",
     "the two norms: layernorm (weight, bias) or rmsnorm (weight only, as Llama)"},
    {"mlp", FG_OPT_ENUM, "gelu", 1, 0, "gelu|swiglu",
     "gelu: proj(gelu(fc(x))); swiglu: down_proj(silu(gate_proj(x)) * up_proj(x)) (Llama)"},
    {"mlp_hidden", FG_OPT_INT, "0", 0, 1 << 20, NULL,
     "the MLP's hidden units (Llama's intermediate_size); 0: mlp_ratio * C (gelu only: "
     "swiglu needs it)"},
    {"kv_heads", FG_OPT_INT, "0", 0, 4096, NULL,
     "key/value heads (grouped-query attention; 1: multi-query); they divide heads; 0: heads"},
    {"position", FG_OPT_ENUM, "learned", 1, 0, "learned|rope",
     "learned: the block adds none (a position_embedding layer does); rope: rotary "
     "embedding of q and k inside the block (Hugging Face Llama's half-split convention)"},
    {"rope_theta", FG_OPT_FLOAT, "10000", 2, 1e12, NULL,
     "rope's base: head pair i turns by position * rope_theta^(-2i/head_dim)"},
    {"rope_scaling", FG_OPT_ENUM, "none", 1, 0, "none|llama3|linear",
     "Hugging Face's rope_scaling.rope_type: llama3 (Llama 3.1's: low frequencies divided "
     "by rope_factor, high ones kept, a blend between) or linear (every frequency divided by "
     "rope_factor)"},
    {"rope_factor", FG_OPT_FLOAT, "1", 1, 1e6, NULL,
     "rope_scaling's factor (required by llama3 and linear; >= 1, as Hugging Face requires)"},
    {"rope_low_freq_factor", FG_OPT_FLOAT, "1", 1e-6, 1e6, NULL,
     "llama3 (required): wavelengths over original / low_freq_factor are divided by "
     "rope_factor"},
    {"rope_high_freq_factor", FG_OPT_FLOAT, "4", 1e-6, 1e6, NULL,
     "llama3 (required): wavelengths under original / high_freq_factor are kept"},
    {"rope_original_max_position_embeddings", FG_OPT_INT, "8192", 1, 1 << 30, NULL,
     "llama3 (required): the context the model was trained at before the scaling"},
    {"bias", FG_OPT_BOOL, "true", 1, 0, NULL, "biases on every linear and layer norm of the block (nanoGPT's bias = False, Llama: "
     "false)"},
    {"recompute", FG_OPT_BOOL, "false", 1, 0, NULL,
     "keep only the block's input and recompute its activations in backward (one scratch "
     "set shared by every such block: less memory, one more forward); unset: [model] "
     "recompute"},
};
_Static_assert(sizeof fg_block_options / sizeof fg_block_options[0] == FG_BLOCK_OPTION_COUNT,
               "FG_BLOCK_OPTION_COUNT (layer_block.h) counts fg_block_options");

/* The value of an enum key (the schema has checked it), or its default. */
static int key_is(const fg_layer *l, const fg_config *cfg, const char *key, const char *value)
{
    const char *v = fg_config_get(cfg, l->section, key);
    return v && strcmp(v, value) == 0;
}

/* A key that only means something next to another option. */
static fg_status refuse_key(const fg_layer *l, const fg_config *cfg, const char *key,
                            const char *why, fg_error *err)
{
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] %s: %s",
                        fg_config_origin(cfg, l->section, key), l->section, key, why);
}

/* The Llama-family keys, and the combinations they refuse. */
static fg_status llama_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    l->rms = key_is(l, cfg, "norm", "rmsnorm");
    l->swiglu = key_is(l, cfg, "mlp", "swiglu");
    l->rope = key_is(l, cfg, "position", "rope");
    const fg_layer_key keys[] = {
        {"mlp_hidden", .i = &l->mlp_hidden},
        {"kv_heads", .i = &l->kv_heads},
        {"rope_theta", .f = &l->rope_theta},
        {"bias", .b = &l->bias},
    };
    fg_status st = fg_layer_read_keys(l, cfg, keys, COUNT(keys), err);
    if (st != FG_OK)
        return st;
    if (l->swiglu && l->mlp_hidden == 0)
        return refuse_key(l, cfg, "mlp", "swiglu needs mlp_hidden (Llama's intermediate_size; "
                          "there is no default)", err);
    if (l->mlp_hidden > 0 && fg_config_get(cfg, l->section, "mlp_ratio"))
        return refuse_key(l, cfg, "mlp_ratio", "set mlp_hidden or mlp_ratio, not both", err);
    if (!l->rope && fg_config_get(cfg, l->section, "rope_theta"))
        return refuse_key(l, cfg, "rope_theta", "only with position = rope", err);
    st = fg_rope_scaling_configure(l, cfg, err);
    if (st != FG_OK)
        return st;
    if (l->kv_heads > 0 && l->heads % l->kv_heads != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] kv_heads = %" PRId64 " does "
                            "not divide heads = %" PRId64,
                            fg_config_origin(cfg, l->section, "kv_heads"), l->section,
                            l->kv_heads, l->heads);
    return FG_OK;
}

fg_status fg_block_configure(fg_layer *l, const fg_config *cfg, fg_error *err)
{
    int64_t ratio = 4;
    const fg_layer_key keys[] = {
        {"heads", .i = &l->heads},
        {"mlp_ratio", .i = &ratio},
        {"causal", .b = &l->causal},
        {"attn_dropout", .f = &l->p},
        {"eps", .f = &l->eps},
        {"init_std", .f = &l->momentum}, /* reused: init std */
    };
    fg_status st = fg_layer_read_keys(l, cfg, keys, COUNT(keys), err);
    if (st == FG_OK && fg_config_get(cfg, l->section, "recompute")) /* else [model]'s */
        st = fg_layer_read_bool(l, cfg, "recompute", &l->recompute, err);
    l->in_units = ratio; /* reused: the MLP ratio */
    if (st == FG_OK)
        st = llama_configure(l, cfg, err);
    return st;
}

/* The tensor names of each slot (layer_block.h), GELU's and SwiGLU's MLP. */
static const char *const gelu_names[BLOCK_TENSORS] = {
    "ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
    "attn.proj.bias", "ln_2.weight", "ln_2.bias", "mlp.fc.weight", "mlp.fc.bias", NULL, NULL,
    "mlp.proj.weight", "mlp.proj.bias"};
static const char *const swiglu_names[BLOCK_TENSORS] = {
    "ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
    "attn.proj.bias", "ln_2.weight", "ln_2.bias", "mlp.gate_proj.weight", "mlp.gate_proj.bias",
    "mlp.up_proj.weight", "mlp.up_proj.bias", "mlp.down_proj.weight", "mlp.down_proj.bias"};

/* Slot t's (out, in) as a linear's weight; a norm's or a bias's length in shape[0]. */
static void slot_shape(const block_dims *d, int t, int64_t shape[2])
{
    static const int outs[] = {0, 0, 1, 1, 2, 2, 0, 0, 3, 3, 3, 3, 2, 2};
    static const int ins[] = {0, 0, 2, 2, 2, 2, 0, 0, 2, 2, 2, 2, 3, 3};
    const int64_t size[4] = {d->C, d->Q, d->C, d->F}; /* 0: norm width, 1: qkv, 2: C, 3: F */
    shape[0] = size[outs[t]];
    shape[1] = size[ins[t]];
}

/* Slot t's tensor: a norm's weight 1 and bias 0; a linear's weight and bias from
 * PyTorch's Linear initialisation, or N(0, init_std^2) and zero biases. */
static fg_status add_slot(fg_model *m, fg_layer *l, const block_dims *d, int t, fg_error *err)
{
    const char *name = (l->swiglu ? swiglu_names : gelu_names)[t];
    int64_t shape[2];
    slot_shape(d, t, shape);
    int is_bias = t % 2 == 1;
    if (t == LN1_W || t == LN1_B || t == LN2_W || t == LN2_B)
        return fg_model_add_tensor(m, l, name, 0, 1, shape, is_bias ? FG_INIT_ZERO : FG_INIT_ONE,
                                   0, err);
    double bound = 1.0 / sqrt((double)shape[1]), std = l->momentum; /* reused: init std */
    if (is_bias)
        return fg_model_add_tensor(m, l, name, 0, 1, shape, std > 0 ? FG_INIT_ZERO
                                   : FG_INIT_UNIFORM, bound, err);
    return fg_model_add_tensor(m, l, name, 0, 2, shape, std > 0 ? FG_INIT_NORMAL
                               : FG_INIT_UNIFORM, std > 0 ? std : bound, err);
}

/* Map k's name (its weight's without ".weight") and (in, out) features. */
static void fp8_map_shape(const fg_layer *l, const block_dims *d, int k, char *name,
                          size_t size, int64_t *in, int64_t *out)
{
    static const int weight_slot[BLOCK_FP8_MAPS] = {QKV_W, PROJ_W, FC_W, UP_W, MPROJ_W};
    int64_t shape[2];
    slot_shape(d, weight_slot[k], shape);
    *out = shape[0];
    *in = shape[1];
    const char *w = (l->swiglu ? swiglu_names : gelu_names)[weight_slot[k]];
    snprintf(name, size, "%.*s", (int)(strlen(w) - strlen(".weight")), w);
}

/* Under an fp8 recipe each linear map whose features are multiples of 16 runs its gemms in
 * fp8 with six buffers of its own (linear_fp8.c); one plan line names them, and those left
 * in the activations' dtype. Attention, the norms and the residual adds stay there too, as
 * in Transformer Engine's TransformerLayer. */
static fg_status plan_fp8(fg_model *m, fg_layer *l, const block_dims *d, fg_error *err)
{
    l->fp8 = 0;
    if (!fg_model_fp8(m))
        return FG_OK;
    char in_fp8[160] = "", left[200] = "", line[512];
    fg_status st = FG_OK;
    for (int k = 0; k < BLOCK_FP8_MAPS && st == FG_OK; k++) {
        if (k == BLOCK_FP8_UP && !l->swiglu)
            continue;
        char name[40], prefix[48];
        int64_t in, out;
        fp8_map_shape(l, d, k, name, sizeof name, &in, &out);
        if (!fg_fp8_shape_fits(in, out)) {
            snprintf(left + strlen(left), sizeof left - strlen(left), "%s%s (%lld x %lld)",
                     left[0] ? ", " : "", name, (long long)out, (long long)in);
            continue;
        }
        snprintf(prefix, sizeof prefix, "%s.", name);
        st = fg_fp8_declare(l, m, prefix, err);
        l->fp8 |= 1 << k;
        snprintf(in_fp8 + strlen(in_fp8), sizeof in_fp8 - strlen(in_fp8), "%s%s",
                 in_fp8[0] ? ", " : "", name);
    }
    if (st != FG_OK)
        return st;
    if (in_fp8[0])
        snprintf(line, sizeof line, "fp8: [%s] runs the gemms of %s in fp8 (%s); attention and "
                 "the norms stay in the activations' dtype%s%s%s", l->section, in_fp8,
                 fg_fp8_formats(m), left[0] ? "; so do " : "", left,
                 left[0] ? ": features must be multiples of 16 (cuBLASLt's fp8 gemm)" : "");
    else
        snprintf(line, sizeof line, "fp8: [%s] stays in the activations' dtype: %s: features "
                 "must be multiples of 16 (cuBLASLt's fp8 gemm)", l->section, left);
    fg_model_fp8_note_add(m, line);
    return FG_OK;
}

fg_status fg_block_plan(fg_layer *l, fg_model *m, fg_error *err)
{
    if (l->in.rank != 2)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] (transformer_block) needs a "
                            "sequence of vectors (T, C), but %s", l->origin, l->section,
                            l->input_text);
    if (l->in.dims[1] % l->heads != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] heads = %" PRId64 " does not "
                            "divide the width C = %" PRId64 " (%s)", l->origin, l->section,
                            l->heads, l->in.dims[1], l->input_text);
    if (l->rope && (l->in.dims[1] / l->heads) % 2 != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] position = rope needs an even "
                            "head_dim, but C / heads = %" PRId64 " / %" PRId64 " = %" PRId64,
                            l->origin, l->section, l->in.dims[1], l->heads,
                            l->in.dims[1] / l->heads);
    l->out = l->in;
    fg_status st = fg_rope_scaling_plan(l, l->in.dims[1] / l->heads, err);
    if (st != FG_OK)
        return st;
    block_dims d = fg_block_dims(l);
    l->aux_per_sample = l->recompute ? 0 : fg_block_saved_bytes(&d);
    for (int t = 0; st == FG_OK && t < BLOCK_TENSORS; t++)
        if (fg_block_has(l, t))
            st = add_slot(m, l, &d, t, err);
    return st == FG_OK ? plan_fp8(m, l, &d, err) : st;
}
