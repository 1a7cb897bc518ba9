/* A Hugging Face Llama config.json expanded into [layer.*] sections (hf_config.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "hf_config.h"

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "hf_rope_scaling.h"

#define VALUE_MAX 64

/* Keys that change nothing fulgur computes (ids, bookkeeping, HF's tensor-parallel hint). */
static const char *const ignored_keys[] = {
    "architectures", "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range",
    "torch_dtype", "transformers_version", "use_cache", "pretraining_tp", "_name_or_path",
    "is_llama_config", "model_type",
};
/* Keys read below (shape) or checked to hold the value fulgur computes with. */
static const char *const read_keys[] = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "rms_norm_eps", "rope_theta",
    "max_position_embeddings", "tie_word_embeddings", "rope_scaling", "hidden_act",
    "attention_bias", "mlp_bias", "attention_dropout", "rope_interleaved", "head_dim",
};
static const char *const sections[] = {"layer.embed_tokens", "layer.layers", "layer.norm",
                                       "layer.lm_head"};

typedef struct hf_json {
    const char *path;
    json_t *root;
} hf_json;

static int in_list(const char *key, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, list[i]) == 0)
            return 1;
    return 0;
}

static fg_status refuse(const hf_json *j, const char *key, const char *why, fg_error *err)
{
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: \"%s\" %s", j->path, key, why);
}

static fg_status read_number(const hf_json *j, const char *key, int required, double fallback,
                             double *out, fg_error *err)
{
    json_t *v = json_object_get(j->root, key);
    if (!v && !required) {
        *out = fallback;
        return FG_OK;
    }
    if (!v || !json_is_number(v))
        return refuse(j, key, v ? "is not a number" : "is missing (the model's shape needs it)",
                      err);
    *out = json_number_value(v);
    return FG_OK;
}

static fg_status read_count(const hf_json *j, const char *key, int required, double fallback,
                            long long *out, fg_error *err)
{
    double v = 0;
    fg_status st = read_number(j, key, required, fallback, &v, err);
    if (st == FG_OK && (v < 1 || v != floor(v) || v > 1e12))
        return refuse(j, key, "is not a positive integer", err);
    *out = (long long)v;
    return st;
}

/* A key fulgur cannot honour unless it holds the value it computes with. */
static fg_status expect(const hf_json *j, const char *key, const char *want, const char *why,
                        fg_error *err)
{
    json_t *v = json_object_get(j->root, key);
    if (!v || json_is_null(v))
        return FG_OK;
    int ok = !strcmp(want, "false")  ? json_is_false(v)
             : !strcmp(want, "0")    ? json_is_number(v) && json_number_value(v) == 0
                                     : json_is_string(v) && !strcmp(json_string_value(v), want);
    return ok ? FG_OK : refuse(j, key, why, err);
}

static fg_status check_keys(const hf_json *j, fg_error *err)
{
    json_t *type = json_object_get(j->root, "model_type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "llama") != 0)
        return refuse(j, "model_type", "must be \"llama\": the one Hugging Face architecture "
                      "hf_config reads", err);
    const char *key;
    json_t *v;
    json_object_foreach(j->root, key, v) {
        if (!in_list(key, ignored_keys, sizeof ignored_keys / sizeof *ignored_keys) &&
            !in_list(key, read_keys, sizeof read_keys / sizeof *read_keys))
            return refuse(j, key, "is not a key hf_config knows; fulgur will not guess what "
                          "it changes", err);
    }
    fg_status st = expect(j, "hidden_act", "silu", "must be \"silu\" (SwiGLU's gate)", err);
    if (st == FG_OK)
        st = expect(j, "attention_bias", "false", "must be false (no biases)", err);
    if (st == FG_OK)
        st = expect(j, "mlp_bias", "false", "must be false (no biases)", err);
    if (st == FG_OK)
        st = expect(j, "rope_interleaved", "false", "must be false (rotate_half rope)", err);
    if (st == FG_OK)
        st = expect(j, "attention_dropout", "0", "must be 0 (not supported)", err);
    return st;
}

/* The shortest text that reads back as v. */
static void format_number(double v, char *out)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(out, VALUE_MAX, "%.*g", digits, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

typedef struct hf_key {
    const char *section, *key, *json_key;
    char value[VALUE_MAX];
} hf_key;

static int numbers_equal(const char *a, const char *b)
{
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    return *a && *b && !*ea && !*eb && x == y;
}

static int bools_equal(const char *a, const char *b)
{
    int x, y;
    return fg_option_parse_bool(a, &x) == FG_OK && fg_option_parse_bool(b, &y) == FG_OK &&
           x == y;
}

/* Sets one key, or checks the INI's value agrees. */
static fg_status apply_key(fg_config *cfg, const hf_json *j, const hf_key *k, fg_error *err)
{
    const char *ini = fg_config_get(cfg, k->section, k->key);
    char origin[4200];
    snprintf(origin, sizeof origin, "%s: %s", j->path, k->json_key);
    if (!ini)
        return fg_config_set_from(cfg, k->section, k->key, k->value, origin, err);
    if (!strcmp(ini, k->value) || numbers_equal(ini, k->value) || bools_equal(ini, k->value))
        return FG_OK;
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] %s = %s disagrees with %s = %s "
                        "([model] hf_config)", fg_config_origin(cfg, k->section, k->key),
                        k->section, k->key, ini, origin, k->value);
}

typedef struct hf_shape {
    long long vocab, hidden, inter, layers, heads, kv_heads, max_pos;
    double eps, theta;
    int tied;
    fg_hf_rope_scaling scaling;
} hf_shape;

static fg_status read_shape(const hf_json *j, hf_shape *s, fg_error *err)
{
    fg_status st = read_count(j, "vocab_size", 1, 0, &s->vocab, err);
    if (st == FG_OK)
        st = read_count(j, "hidden_size", 1, 0, &s->hidden, err);
    if (st == FG_OK)
        st = read_count(j, "intermediate_size", 1, 0, &s->inter, err);
    if (st == FG_OK)
        st = read_count(j, "num_hidden_layers", 1, 0, &s->layers, err);
    if (st == FG_OK)
        st = read_count(j, "num_attention_heads", 1, 0, &s->heads, err);
    if (st == FG_OK) /* Hugging Face's defaults (LlamaConfig) for the optional ones */
        st = read_count(j, "num_key_value_heads", 0, (double)s->heads, &s->kv_heads, err);
    if (st == FG_OK)
        st = read_count(j, "max_position_embeddings", 0, 2048, &s->max_pos, err);
    if (st == FG_OK)
        st = read_number(j, "rms_norm_eps", 0, 1e-6, &s->eps, err);
    if (st == FG_OK)
        st = read_number(j, "rope_theta", 0, 10000, &s->theta, err);
    if (st == FG_OK)
        st = fg_hf_rope_scaling_read(j->path, json_object_get(j->root, "rope_scaling"),
                                     &s->scaling, err);
    json_t *tie = json_object_get(j->root, "tie_word_embeddings");
    if (st == FG_OK && tie && !json_is_boolean(tie))
        return refuse(j, "tie_word_embeddings", "is not true or false", err);
    s->tied = tie && json_is_true(tie);
    json_t *head_dim = json_object_get(j->root, "head_dim");
    if (st == FG_OK && head_dim && !json_is_null(head_dim) &&
        (!json_is_integer(head_dim) || s->hidden % s->heads != 0 ||
         json_integer_value(head_dim) != s->hidden / s->heads))
        return refuse(j, "head_dim", "must be hidden_size / num_attention_heads (fulgur's "
                      "heads split the width)", err);
    return st;
}

static size_t shape_keys(const hf_shape *s, hf_key *k)
{
    size_t n = 0;
#define KEY(sec, name, json, fmt, val)                                                      \
    do {                                                                                    \
        k[n] = (hf_key){.section = "layer." sec, .key = name, .json_key = json};            \
        snprintf(k[n].value, VALUE_MAX, fmt, val);                                          \
        n++;                                                                                \
    } while (0)
    KEY("embed_tokens", "type", "model_type", "%s", "embedding");
    KEY("embed_tokens", "num_embeddings", "vocab_size", "%lld", s->vocab);
    KEY("embed_tokens", "embedding_dim", "hidden_size", "%lld", s->hidden);
    KEY("layers", "type", "model_type", "%s", "transformer_block");
    KEY("layers", "repeat", "num_hidden_layers", "%lld", s->layers);
    KEY("layers", "heads", "num_attention_heads", "%lld", s->heads);
    KEY("layers", "kv_heads", "num_key_value_heads", "%lld", s->kv_heads);
    KEY("layers", "norm", "model_type", "%s", "rmsnorm");
    char eps[VALUE_MAX];
    format_number(s->eps, eps);
    KEY("layers", "eps", "rms_norm_eps", "%s", eps);
    KEY("layers", "mlp", "model_type", "%s", "swiglu");
    KEY("layers", "mlp_hidden", "intermediate_size", "%lld", s->inter);
    KEY("layers", "position", "model_type", "%s", "rope");
    KEY("layers", "rope_theta", "rope_theta", "%s", "");
    format_number(s->theta, k[n - 1].value);
    const char *scaling_key[5], *scaling_json[5];
    char scaling_value[5][64];
    int scaling = fg_hf_rope_scaling_keys(&s->scaling, scaling_key, scaling_value,
                                          scaling_json);
    for (int i = 0; i < scaling; i++)
        KEY("layers", scaling_key[i], scaling_json[i], "%s", scaling_value[i]);
    KEY("layers", "bias", "model_type", "%s", "false");
    KEY("norm", "type", "model_type", "%s", "rmsnorm");
    KEY("norm", "eps", "rms_norm_eps", "%s", eps);
    KEY("lm_head", "type", "model_type", "%s", "linear");
    KEY("lm_head", "out_features", "vocab_size", "%lld", s->vocab);
    KEY("lm_head", "bias", "model_type", "%s", "false");
    if (s->tied)
        KEY("lm_head", "tie", "tie_word_embeddings", "%s", "embed_tokens");
#undef KEY
    return n;
}

/* The INI's [layer.*] sections must be among the ones config.json makes. */
static fg_status check_ini_layers(const fg_config *cfg, const hf_json *j, const hf_shape *s,
                                  fg_error *err)
{
    for (size_t i = 0; i < fg_config_section_count(cfg); i++) {
        const char *name = fg_config_section_name(cfg, i);
        if (strncmp(name, "layer.", 6) == 0 && !in_list(name, sections, 4))
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s]: with [model] hf_config "
                                "(%s) the layers are config.json's: [layer.embed_tokens], "
                                "[layer.layers], [layer.norm], [layer.lm_head] (a section of "
                                "those names may add keys)", fg_config_origin(cfg, name, NULL),
                                name, j->path);
    }
    if (!s->tied && fg_config_get(cfg, "layer.lm_head", "tie"))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [layer.lm_head] tie disagrees with "
                            "%s: tie_word_embeddings = false",
                            fg_config_origin(cfg, "layer.lm_head", "tie"), j->path);
    const char *context = fg_config_get(cfg, "data", "context");
    char *end;
    double t = context ? strtod(context, &end) : 0;
    if (context && t > (double)s->max_pos)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [data] context = %s is longer than "
                            "%s: max_position_embeddings = %lld",
                            fg_config_origin(cfg, "data", "context"), context, j->path,
                            s->max_pos);
    return FG_OK;
}

static fg_status expand(fg_config *cfg, const hf_json *j, fg_error *err)
{
    hf_shape s;
    fg_status st = check_keys(j, err);
    if (st == FG_OK)
        st = read_shape(j, &s, err);
    if (st == FG_OK)
        st = check_ini_layers(cfg, j, &s, err);
    hf_key keys[40];
    size_t n = st == FG_OK ? shape_keys(&s, keys) : 0;
    for (size_t sec = 0; st == FG_OK && sec < 4; sec++) {
        fg_config_move_section_last(cfg, sections[sec]);
        for (size_t i = 0; st == FG_OK && i < n; i++)
            if (strcmp(keys[i].section, sections[sec]) == 0)
                st = apply_key(cfg, j, &keys[i], err);
    }
    return st;
}

/* A [layer.*] section config.json does not make. */
static int has_other_layer(const fg_config *cfg)
{
    for (size_t i = 0; i < fg_config_section_count(cfg); i++) {
        const char *name = fg_config_section_name(cfg, i);
        if (strncmp(name, "layer.", 6) == 0 && !in_list(name, sections, 4))
            return 1;
    }
    return 0;
}

void fg_hf_config_path(const fg_config *cfg, char *out, size_t cap)
{
    const char *key = fg_config_get(cfg, "model", "hf_config");
    const char *init = fg_config_get(cfg, "model", "init_from");
    out[0] = '\0';
    if (key && *key) {
        snprintf(out, cap, "%s", key);
    } else if (init && *init && !has_other_layer(cfg)) {
        char *dup = strdup(init);
        if (dup)
            snprintf(out, cap, "%s/config.json", dirname(dup));
        free(dup);
        if (access(out, R_OK) != 0)
            out[0] = '\0';
    }
}

fg_status fg_hf_config_apply(fg_config *cfg, fg_error *err)
{
    char path[4096];
    fg_hf_config_path(cfg, path, sizeof path);
    if (!path[0])
        return FG_OK;
    json_error_t jerr;
    hf_json j = {.path = path, .root = json_load_file(path, 0, &jerr)};
    if (!j.root)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: [model] hf_config: %s", path,
                            jerr.line, jerr.text);
    int beside = !fg_config_get(cfg, "model", "hf_config"); /* found beside init_from */
    fg_status st = json_is_object(j.root)
                       ? expand(cfg, &j, err)
                       : fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] hf_config: not a "
                                      "JSON object", path);
    json_decref(j.root);
    if (st == FG_OK && beside) /* `fulgur check` and export see which file it was */
        st = fg_config_set_from(cfg, "model", "hf_config", path,
                                "the config.json beside [model] init_from", err);
    return st;
}

void fg_hf_config_print(const fg_config *cfg, FILE *out)
{
    const char *path = fg_config_get(cfg, "model", "hf_config");
    if (!path || !*path)
        return;
    fprintf(out, "hf_config %s: the layers it gives, as INI\n", path);
    for (size_t s = 0; s < 4; s++) {
        fprintf(out, "[%s]\n", sections[s]);
        for (size_t i = 0; i < fg_config_entry_count(cfg, sections[s]); i++) {
            const char *key = fg_config_entry_key(cfg, sections[s], i);
            fprintf(out, "%s = %s    ; %s\n", key, fg_config_get(cfg, sections[s], key),
                    fg_config_origin(cfg, sections[s], key));
        }
    }
}
