/* `fulgur export`'s writer: the model in the Hugging Face Llama layout (hf_export.h). */
#include "hf_export.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "checkpoint.h"
#include "hf_index.h"
#include "hf_llama.h"
#include "hf_rope_scaling.h"
#include "output_file.h"

typedef struct llama_shape {
    long long vocab, hidden, inter, layers, heads, kv_heads;
    double eps, theta;
    int tied;
    const fg_layer *first; /* the first block: its rope scaling */
} llama_shape;

static fg_status not_llama(const fg_layer *l, const char *why, fg_error *err)
{
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] (%s): the Hugging Face Llama "
                        "layout needs %s", l->origin, l->section, l->ops->type, why);
}

/* Block l has the shape of the first block (or is the first). */
static fg_status read_block(const fg_layer *l, llama_shape *s, fg_error *err)
{
    if (!l->rms || !l->swiglu || !l->rope || l->bias || !l->causal)
        return not_llama(l, "norm = rmsnorm, mlp = swiglu, position = rope, bias = false, "
                         "causal = true", err);
    long long kv = l->kv_heads ? l->kv_heads : l->heads;
    if (s->layers++ == 0) {
        s->heads = l->heads;
        s->kv_heads = kv;
        s->inter = l->mlp_hidden;
        s->eps = l->eps;
        s->theta = l->rope_theta;
        s->hidden = l->in.dims[1];
        s->first = l;
        return FG_OK;
    }
    const fg_layer *f = s->first;
    if (s->heads != l->heads || s->kv_heads != kv || s->inter != l->mlp_hidden ||
        s->eps != l->eps || s->theta != l->rope_theta || f->rope_scaling != l->rope_scaling ||
        f->rope_factor != l->rope_factor || f->rope_low_freq_factor != l->rope_low_freq_factor ||
        f->rope_high_freq_factor != l->rope_high_freq_factor ||
        f->rope_original_max_positions != l->rope_original_max_positions)
        return not_llama(l, "every block of one shape (heads, kv_heads, mlp_hidden, eps, "
                         "rope_theta, rope_scaling as the first block's)", err);
    return FG_OK;
}

static fg_status read_shape(const fg_model *m, llama_shape *s, fg_error *err)
{
    memset(s, 0, sizeof *s);
    int seen[3] = {0, 0, 0}; /* embedding, rmsnorm, linear */
    const char *order[3] = {"embedding", "rmsnorm", "linear"};
    fg_status st = FG_OK;
    for (size_t i = 0; st == FG_OK && i < fg_model_layer_count(m); i++) {
        const fg_layer *l = fg_model_layer(m, i);
        const char *type = l->ops->type;
        if (strcmp(type, "transformer_block") == 0) {
            st = seen[1] ? not_llama(l, "the blocks before the final rmsnorm", err)
                         : read_block(l, s, err);
            continue;
        }
        int k = 0;
        while (k < 3 && strcmp(type, order[k]) != 0)
            k++;
        if (k == 3 || seen[k]++)
            return not_llama(l, "one embedding, the blocks, one rmsnorm and one linear head",
                             err);
        if (k == 0)
            s->vocab = fg_model_tensor(m, l->param_tensor[0])->shape[0];
        if (k == 1 && s->layers && l->eps != s->eps)
            return not_llama(l, "one rms_norm_eps: the final norm's eps as the blocks'", err);
        if (k == 2 && (l->bias || l->units != s->vocab))
            return not_llama(l, "a head without bias over the embedding's vocabulary", err);
        s->tied |= k == 2 && l->tied;
    }
    if (st == FG_OK && (!seen[0] || !seen[1] || !seen[2] || s->layers == 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "export: the Hugging Face Llama layout "
                            "needs an embedding, transformer blocks, an rmsnorm and a linear "
                            "head; the model has %zu layers", fg_model_layer_count(m));
    return st;
}

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* a quiet NaN stays a NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

typedef struct export_list {
    fg_hf_part *parts;
    fg_ckpt_tensor *tensors;
    uint16_t *bf16;
    size_t count;
} export_list;

static void free_list(export_list *x)
{
    free(x->parts);
    free(x->tensors);
    free(x->bf16);
}

static fg_status build_list(const fg_model *m, const float *params, fg_dtype dtype,
                            export_list *x, fg_error *err)
{
    size_t n = fg_model_tensor_count(m), floats = fg_model_params_size(m);
    x->parts = calloc(3 * n + 1, sizeof *x->parts);
    x->tensors = calloc(3 * n + 1, sizeof *x->tensors);
    x->bf16 = dtype == FG_BF16 ? calloc(floats + 1, sizeof *x->bf16) : NULL;
    if (!x->parts || !x->tensors || (dtype == FG_BF16 && !x->bf16))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "export: out of memory");
    for (size_t i = 0; i < floats && x->bf16; i++)
        x->bf16[i] = bf16_of(params[i]);
    for (size_t i = 0; i < n; i++) {
        const fg_tensor_info *t = fg_model_tensor(m, i);
        int count;
        fg_status st = fg_hf_llama_parts(m, i, x->parts + x->count, &count, err);
        if (st != FG_OK)
            return st;
        int64_t cols = t->rank == 2 ? t->shape[1] : 1;
        for (int p = 0; p < count; p++, x->count++) {
            const fg_hf_part *part = &x->parts[x->count];
            size_t at = t->offset + (size_t)(part->first_row * cols);
            fg_ckpt_tensor *ct = &x->tensors[x->count];
            ct->name = part->name;
            ct->dtype = dtype;
            ct->rank = t->rank;
            ct->shape[0] = part->rows;
            ct->shape[1] = cols;
            ct->data = dtype == FG_BF16 ? (const void *)(x->bf16 + at)
                                        : (const void *)(params + at);
        }
    }
    return FG_OK;
}

static void set_config(json_t *root, const llama_shape *s, fg_dtype dtype, long long max_pos)
{
    json_t *arch = json_array();
    json_array_append_new(arch, json_string("LlamaForCausalLM"));
    if (!json_object_get(root, "architectures"))
        json_object_set_new(root, "architectures", arch);
    else
        json_decref(arch);
    json_object_set_new(root, "model_type", json_string("llama"));
    json_object_set_new(root, "vocab_size", json_integer(s->vocab));
    json_object_set_new(root, "hidden_size", json_integer(s->hidden));
    json_object_set_new(root, "intermediate_size", json_integer(s->inter));
    json_object_set_new(root, "num_hidden_layers", json_integer(s->layers));
    json_object_set_new(root, "num_attention_heads", json_integer(s->heads));
    json_object_set_new(root, "num_key_value_heads", json_integer(s->kv_heads));
    json_object_set_new(root, "rms_norm_eps", json_real(s->eps));
    json_object_set_new(root, "rope_theta", json_real(s->theta));
    json_t *scaling = s->first ? fg_hf_rope_scaling_json(s->first) : json_null();
    json_object_set_new(root, "rope_scaling", scaling ? scaling : json_null());
    if (!json_object_get(root, "max_position_embeddings"))
        json_object_set_new(root, "max_position_embeddings", json_integer(max_pos));
    json_object_set_new(root, "tie_word_embeddings", json_boolean(s->tied));
    json_object_set_new(root, "hidden_act", json_string("silu"));
    json_object_set_new(root, "attention_bias", json_false());
    json_object_set_new(root, "torch_dtype", json_string(dtype == FG_BF16 ? "bfloat16"
                                                                          : "float32"));
}

static int dump_json(FILE *f, void *user)
{
    if (json_dumpf((const json_t *)user, f, JSON_INDENT(2)) != 0)
        return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

static fg_status write_config(const char *dir, const llama_shape *s, fg_dtype dtype,
                              const char *base, long long max_pos, fg_error *err)
{
    json_error_t jerr;
    json_t *root = base ? json_load_file(base, 0, &jerr) : json_object();
    if (!root)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: %s", base, jerr.line, jerr.text);
    set_config(root, s, dtype, max_pos);
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    fg_status st = fg_output_write_atomic(path, dump_json, root, err);
    json_decref(root);
    return st;
}

/* model.safetensors, or shards of at most max_shard_bytes and their index. */
static fg_status write_weights(const char *dir, const export_list *x, uint64_t max_shard_bytes,
                               char *what, size_t cap, fg_error *err)
{
    const char *meta_key = "format", *meta_value = "pt"; /* what transformers writes */
    if (max_shard_bytes == 0) {
        snprintf(what, cap, "%s/model.safetensors", dir);
        return fg_ckpt_write_atomic(what, x->tensors, x->count, &meta_key, &meta_value, 1, err);
    }
    size_t shards = 0;
    fg_status st = fg_hf_index_write(dir, x->tensors, x->count, max_shard_bytes, &meta_key,
                                     &meta_value, 1, &shards, err);
    snprintf(what, cap, "%s/model.safetensors.index.json + %zu shard%s", dir, shards,
             shards == 1 ? "" : "s");
    return st;
}

fg_status fg_hf_llama_export(const fg_model *m, const float *params, const char *dir,
                             fg_dtype dtype, const char *base_config, long long max_positions,
                             uint64_t max_shard_bytes, FILE *out, fg_error *err)
{
    llama_shape s;
    fg_status st = read_shape(m, &s, err);
    export_list x = {0};
    if (st == FG_OK)
        st = build_list(m, params, dtype, &x, err);
    char what[4300];
    if (st == FG_OK)
        st = write_weights(dir, &x, max_shard_bytes, what, sizeof what, err);
    if (st == FG_OK)
        st = write_config(dir, &s, dtype, base_config, max_positions, err);
    if (st == FG_OK && out)
        fprintf(out, "export: %s (%zu tensors, %s, Hugging Face Llama names) and %s/config.json"
                " (%lld layers, hidden %lld, %lld heads on %lld kv heads, vocab %lld%s)\n",
                what, x.count, fg_dtype_name(dtype), dir, s.layers, s.hidden, s.heads,
                s.kv_heads, s.vocab, s.tied ? ", tied" : "");
    free_list(&x);
    return st;
}
