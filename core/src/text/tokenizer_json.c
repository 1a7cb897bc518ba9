/* Hugging Face's tokenizer.json, the byte-level BPE kind (GPT-2, Llama 3): model.type BPE
 * with its vocab and merges ("a b" strings or [a, b] pairs), the ByteLevel pre-tokenizer
 * (GPT-2's pattern) or a Sequence of a Split by a regex and a ByteLevel without one, a
 * ByteLevel decoder, added_tokens. Anything else (a normalizer, dropout, byte fallback,
 * subword prefixes, a prefix space) is refused by name rather than encoded differently. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer_internal.h"

static fg_status refuse(fg_error *err, const char *path, const char *what)
{
    return fg_error_set(err, FG_UNAVAILABLE, "tokenizer: %s: %s is not supported (fulgur reads "
                        "byte-level BPE tokenizers: GPT-2, Llama 3)", path, what);
}

static int truthy(json_t *v)
{
    return v && !json_is_null(v) && !json_is_false(v) &&
           !(json_is_string(v) && json_string_length(v) == 0);
}

static fg_status check_model(json_t *model, const char *path, fg_error *err)
{
    const char *type = json_string_value(json_object_get(model, "type"));
    if (!json_is_object(model) || !type || strcmp(type, "BPE") != 0)
        return refuse(err, path, "a model.type other than BPE");
    static const char *const off[] = {"dropout", "byte_fallback", "continuing_subword_prefix",
                                      "end_of_word_suffix", "unk_token"};
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
        if (truthy(json_object_get(model, off[i])) &&
            !(i == 4 && json_is_string(json_object_get(model, off[i])))) {
            char what[80];
            snprintf(what, sizeof what, "model.%s", off[i]);
            return refuse(err, path, what);
        }
    return FG_OK;
}

static fg_status load_vocab(fg_tokenizer *t, json_t *vocab, const char *path, fg_error *err)
{
    if (!json_is_object(vocab))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: model.vocab is not an "
                            "object of token -> id", path);
    const char *key;
    json_t *value;
    fg_status st = FG_OK;
    json_object_foreach(vocab, key, value) {
        if (st != FG_OK)
            break;
        st = json_is_integer(value)
                 ? fg_tokenizer_add_spelled(t, key, (int32_t)json_integer_value(value), path, err)
                 : fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: model.vocab \"%s\": "
                                "its id is not an integer", path, key);
    }
    return st;
}

static fg_status load_merge(fg_tokenizer *t, json_t *m, int32_t rank, const char *path,
                            fg_error *err)
{
    char where[4200];
    snprintf(where, sizeof where, "tokenizer: %s: model.merges[%d]", path, rank);
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
        return fg_tokenizer_add_merge(t, json_string_value(a), json_string_length(a),
                                      json_string_value(b), json_string_length(b), rank, where, err);
    }
    const char *s = json_string_value(m);
    const char *space = s ? strchr(s, ' ') : NULL;
    if (!space || space == s || !space[1] || strchr(space + 1, ' '))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: not a merge (\"a b\" or [\"a\", "
                            "\"b\"])", where);
    return fg_tokenizer_add_merge(t, s, (size_t)(space - s), space + 1, strlen(space + 1), rank,
                                  where, err);
}

static fg_status load_merges(fg_tokenizer *t, json_t *merges, const char *path, fg_error *err)
{
    if (!json_is_array(merges))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: model.merges is not an "
                            "array", path);
    fg_status st = FG_OK;
    for (size_t i = 0; st == FG_OK && i < json_array_size(merges); i++)
        st = load_merge(t, json_array_get(merges, i), (int32_t)i, path, err);
    return st;
}

static fg_status load_added(fg_tokenizer *t, json_t *added, const char *path, fg_error *err)
{
    if (added && !json_is_null(added) && !json_is_array(added))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: added_tokens is not an "
                            "array", path);
    fg_status st = FG_OK;
    for (size_t i = 0; st == FG_OK && added && i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        json_t *id = json_object_get(a, "id");
        const char *content = json_string_value(json_object_get(a, "content"));
        if (!json_is_integer(id) || !content)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: added_tokens[%zu] "
                                "needs an integer id and a string content", path, i);
        st = fg_tokenizer_add_special(t, content, (int32_t)json_integer_value(id), path, err);
    }
    return st;
}

/* A ByteLevel step: no prefix space; *uses_regex: whether it splits by GPT-2's pattern. */
static fg_status byte_level(json_t *p, const char *path, int *uses_regex, fg_error *err)
{
    if (json_is_true(json_object_get(p, "add_prefix_space")))
        return refuse(err, path, "pre_tokenizer ByteLevel with add_prefix_space = true");
    json_t *use = json_object_get(p, "use_regex");
    *uses_regex = !use || json_is_true(use);
    return FG_OK;
}

static const char *type_of(json_t *p)
{
    const char *type = json_string_value(json_object_get(p, "type"));
    return type ? type : "";
}

/* The pre-tokenizer's regex: ByteLevel alone, or Sequence [Split(Regex, Isolated),
 * ByteLevel(use_regex = false)]. */
static fg_status pattern_of(json_t *pre, const char *path, const char **pattern, fg_error *err)
{
    int uses_regex = 0;
    if (strcmp(type_of(pre), "ByteLevel") == 0) {
        fg_status st = byte_level(pre, path, &uses_regex, err);
        *pattern = FG_GPT2_PATTERN;
        return st != FG_OK ? st : uses_regex ? FG_OK
                                             : refuse(err, path, "ByteLevel without its regex");
    }
    json_t *steps = json_object_get(pre, "pretokenizers");
    if (strcmp(type_of(pre), "Sequence") != 0 || json_array_size(steps) != 2)
        return refuse(err, path, "this pre_tokenizer");
    json_t *split = json_array_get(steps, 0), *bl = json_array_get(steps, 1);
    const char *behavior = json_string_value(json_object_get(split, "behavior"));
    *pattern = json_string_value(json_object_get(json_object_get(split, "pattern"), "Regex"));
    if (strcmp(type_of(split), "Split") != 0 || !*pattern || !behavior ||
        strcmp(behavior, "Isolated") != 0 || json_is_true(json_object_get(split, "invert")) ||
        strcmp(type_of(bl), "ByteLevel") != 0)
        return refuse(err, path, "a pre_tokenizer Sequence other than [Split(Regex, Isolated), "
                      "ByteLevel]");
    fg_status st = byte_level(bl, path, &uses_regex, err);
    return st != FG_OK ? st : uses_regex ? refuse(err, path, "a ByteLevel regex after a Split")
                                         : FG_OK;
}

static fg_status load_root(fg_tokenizer *t, json_t *root, const char *path, fg_error *err)
{
    json_t *model = json_object_get(root, "model");
    json_t *norm = json_object_get(root, "normalizer");
    json_t *decoder = json_object_get(root, "decoder");
    if (norm && !json_is_null(norm))
        return refuse(err, path, "a normalizer");
    if (decoder && !json_is_null(decoder) && strcmp(type_of(decoder), "ByteLevel") != 0)
        return refuse(err, path, "a decoder other than ByteLevel");
    fg_status st = check_model(model, path, err);
    const char *pattern = NULL;
    if (st == FG_OK)
        st = pattern_of(json_object_get(root, "pre_tokenizer"), path, &pattern, err);
    if (st == FG_OK)
        st = load_vocab(t, json_object_get(model, "vocab"), path, err);
    if (st == FG_OK)
        st = load_added(t, json_object_get(root, "added_tokens"), path, err);
    if (st == FG_OK)
        st = load_merges(t, json_object_get(model, "merges"), path, err);
    t->model.ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    char where[4200];
    snprintf(where, sizeof where, "tokenizer: %s: pre_tokenizer", path);
    if (st == FG_OK)
        st = fg_pretokenizer_compile(pattern, where, &t->pre, err);
    return st;
}

fg_status fg_tokenizer_load_json(fg_tokenizer *t, const char *path, fg_error *err)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s:%d: not JSON: %s", path,
                            jerr.line, jerr.text);
    fg_status st = json_is_object(root) ? load_root(t, root, path, err)
                 : fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: not a tokenizer.json "
                                "(an object with a model)", path);
    json_decref(root);
    return st;
}
