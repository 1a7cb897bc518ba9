/* Chat forms by family, recognised from tokenizer_config.json (chat_template.h). A form is
 * written with markers: {user} the user's line, {bos} / {eos} tokenizer_config.json's tokens
 * (or the family's usual ones), {X} the special token X (it must exist), {?X} X as a special
 * token when the tokenizer has it, else as text (as Hugging Face matches added tokens in a
 * rendered template). Text between special tokens, the user's line included, is encoded as
 * one run, as Hugging Face encodes the rendered string. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "chat_template.h"
#include "core_util.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

typedef struct chat_form {
    const char *name, *marker;    /* marker: what detection looks for in the Jinja text */
    const char *bos, *eos;        /* the family's usual tokens when the config names none */
    const char *start, *user, *reply_end, *stop;
} chat_form;

static const chat_form forms[] = {
    [FG_CHAT_PLAIN] = {"plain", NULL, "", "", "", "User: {user}\nAssistant:", "", ""},
    [FG_CHAT_CHATML] = {"chatml", "<|im_start|>", "", "<|im_end|>", "",
                        "{<|im_start|>}user\n{user}{<|im_end|>}\n{<|im_start|>}assistant\n",
                        "{<|im_end|>}\n", "<|im_end|>"},
    [FG_CHAT_LLAMA3] = {"llama3", "<|start_header_id|>", "<|begin_of_text|>", "<|eot_id|>",
                        "{bos}",
                        "{<|start_header_id|>}user{<|end_header_id|>}\n\n{user}{<|eot_id|>}"
                        "{<|start_header_id|>}assistant{<|end_header_id|>}\n\n",
                        "{<|eot_id|>}", "<|eot_id|>"},
    [FG_CHAT_LLAMA2] = {"llama2", "[INST]", "<s>", "</s>", "", "{bos}{?[INST]} {user} {?[/INST]}",
                        "{eos}", ""},
    [FG_CHAT_ZEPHYR] = {"zephyr", "<|user|>", "<s>", "</s>", "",
                        "{?<|user|>}\n{user}{eos}\n{?<|assistant|>}\n", "{eos}\n", ""},
};
#define FORMS (sizeof forms / sizeof forms[0])

const char *fg_chat_family_name(fg_chat_family f)
{
    return forms[f].name;
}

int fg_chat_family_detect(const char *jinja)
{
    /* Llama 3 before ChatML and [INST]: its templates hold neither; ChatML before Zephyr */
    static const fg_chat_family order[] = {FG_CHAT_LLAMA3, FG_CHAT_CHATML, FG_CHAT_ZEPHYR,
                                           FG_CHAT_LLAMA2};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (strstr(jinja, forms[order[i]].marker))
            return (int)order[i];
    return -1;
}

/* ---- tokenizer_config.json ------------------------------------------------------------- */

/* A token as the config writes it: a string or {"content": string}; NULL otherwise. */
static const char *token_text(const json_t *v)
{
    if (json_is_object(v))
        v = json_object_get(v, "content");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static fg_status read_token(const json_t *root, const char *key, const fg_chat_template *c,
                            const fg_tokenizer *t, char *out, fg_error *err)
{
    const json_t *v = json_object_get(root, key);
    const char *s = token_text(v);
    if (!v || json_is_null(v))
        return FG_OK;
    if (!s || strlen(s) >= FG_CHAT_TOKEN_MAX)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: \"%s\" is not a token's text",
                            c->config, key);
    if (fg_tokenizer_special(t, s) < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: \"%s\" is \"%s\", which the "
                            "tokenizer does not have as a token", c->config, key, s);
    snprintf(out, FG_CHAT_TOKEN_MAX, "%s", s);
    return FG_OK;
}

/* added_tokens_decoder: each declared id is the tokenizer's id of that text. */
static fg_status check_added(const json_t *root, const fg_chat_template *c,
                             const fg_tokenizer *t, fg_error *err)
{
    const json_t *added = json_object_get(root, "added_tokens_decoder");
    const char *key;
    json_t *v;
    if (!added)
        return FG_OK;
    if (!json_is_object(added))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: \"added_tokens_decoder\" is not an "
                            "object", c->config);
    json_object_foreach((json_t *)added, key, v) {
        const char *text = token_text(v);
        char *end;
        long id = strtol(key, &end, 10);
        if (!text || *end || end == key)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: added_tokens_decoder \"%s\" is "
                                "not an id with a content", c->config, key);
        int32_t have = fg_tokenizer_special(t, text);
        if (have != id)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: added_tokens_decoder declares "
                                "\"%s\" as id %ld, but the tokenizer %s", c->config, text, id,
                                have < 0 ? "does not have it" : "gives it another id");
    }
    return FG_OK;
}

/* The Jinja text: a string, or a list of {name, template} (the one named "default"). */
static const char *jinja_of(const json_t *root)
{
    const json_t *v = json_object_get(root, "chat_template");
    if (json_is_string(v))
        return json_string_value(v);
    const json_t *first = NULL, *item;
    size_t i;
    json_array_foreach((json_t *)v, i, item) {
        const char *name = json_string_value(json_object_get(item, "name"));
        if (!first)
            first = item;
        if (name && strcmp(name, "default") == 0)
            return json_string_value(json_object_get(item, "template"));
    }
    return first ? json_string_value(json_object_get(first, "template")) : NULL;
}

static void config_path(const char *tokenizer, char *out, size_t cap)
{
    struct stat s;
    if (stat(tokenizer, &s) == 0 && S_ISDIR(s.st_mode)) {
        snprintf(out, cap, "%s/tokenizer_config.json", tokenizer);
        return;
    }
    char *dup = strdup(tokenizer);
    snprintf(out, cap, "%s/tokenizer_config.json", dup ? dirname(dup) : ".");
    free(dup);
}

static int family_named(const char *name)
{
    for (size_t f = 0; f < FORMS; f++)
        if (strcmp(name, forms[f].name) == 0)
            return (int)f;
    return -1;
}

static fg_status read_config(const json_t *root, const char *choice, const fg_tokenizer *t,
                             fg_chat_template *c, fg_error *err)
{
    fg_status st = read_token(root, "bos_token", c, t, c->bos, err);
    if (st == FG_OK)
        st = read_token(root, "eos_token", c, t, c->eos, err);
    if (st == FG_OK)
        st = check_added(root, c, t, err);
    if (st != FG_OK || (choice[0] && strcmp(choice, "auto") != 0))
        return st;
    const char *jinja = jinja_of(root);
    int f = jinja ? fg_chat_family_detect(jinja) : FG_CHAT_PLAIN;
    if (f < 0)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: its chat_template is of no family fulgur "
                            "knows (ChatML <|im_start|>, Llama 3 <|start_header_id|>, Llama 2 "
                            "/ Mistral [INST], Zephyr <|user|>); fulgur does not run Jinja: pick "
                            "the form with --chat-template (" FG_CHAT_TEMPLATE_CHOICES ")",
                            c->config);
    c->family = (fg_chat_family)f;
    return FG_OK;
}

fg_status fg_chat_template_open(const char *tokenizer, const fg_tokenizer *t,
                                const char *choice, fg_chat_template *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    choice = choice ? choice : "";
    int named = choice[0] && strcmp(choice, "auto") != 0 ? family_named(choice) : FG_CHAT_PLAIN;
    if (named < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[generate] chat_template = %s is not "
                            "one of " FG_CHAT_TEMPLATE_CHOICES, choice);
    out->family = (fg_chat_family)named;
    if (!t)
        return FG_OK;
    config_path(tokenizer, out->config, sizeof out->config);
    json_error_t jerr;
    json_t *root = json_load_file(out->config, 0, &jerr);
    if (!root) {
        struct stat s;
        if (stat(out->config, &s) != 0) { /* none beside the tokenizer */
            out->config[0] = '\0';
            return FG_OK;
        }
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: %s", out->config, jerr.line,
                            jerr.text);
    }
    fg_status st = json_is_object(root)
                       ? read_config(root, choice, t, out, err)
                       : fg_error_set(err, FG_INVALID_ARGUMENT, "%s: not a JSON object",
                                      out->config);
    json_decref(root);
    return st;
}

/* ---- rendering ---------------------------------------------------------------------------- */

typedef struct run {
    char *text;
    size_t len, cap;
} run;

static int run_add(run *r, const char *s, size_t n)
{
    if (fg_grow_bytes(&r->text, &r->cap, r->len + n + 1, 256) != 0)
        return -1;
    memcpy(r->text + r->len, s, n);
    r->len += n;
    r->text[r->len] = '\0';
    return 0;
}

static fg_status push_id(fg_token_buf *out, int32_t id, fg_error *err)
{
    if (out->len == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 64;
        int32_t *p = realloc(out->ids, cap * sizeof *p);
        if (!p)
            return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur chat: out of memory");
        out->ids = p;
        out->cap = cap;
    }
    out->ids[out->len++] = id;
    return FG_OK;
}

/* The pending text encoded and appended; the run emptied. */
static fg_status flush(const fg_tokenizer *t, run *r, fg_token_buf *out, fg_error *err)
{
    if (r->len == 0)
        return FG_OK;
    fg_token_encoder *enc = NULL;
    fg_token_buf buf = {0};
    fg_status st = fg_token_encoder_create(t, &enc, err);
    if (st == FG_OK)
        st = fg_token_encode(enc, r->text, r->len, &buf, err);
    for (size_t i = 0; st == FG_OK && i < buf.len; i++)
        st = push_id(out, buf.ids[i], err);
    fg_token_buf_free(&buf);
    fg_token_encoder_free(enc);
    r->len = 0;
    return st;
}

/* One {marker}: the user's line joins the text; a token becomes its id. */
static fg_status marker(const fg_chat_template *c, const fg_tokenizer *t, const char *name,
                        const char *line, run *r, fg_token_buf *out, fg_error *err)
{
    if (strcmp(name, "user") == 0)
        return run_add(r, line, strlen(line)) ? fg_error_set(err, FG_OUT_OF_MEMORY,
                                                             "fulgur chat: out of memory")
                                              : FG_OK;
    const chat_form *f = &forms[c->family];
    int optional = name[0] == '?';
    const char *token = strcmp(name, "bos") == 0   ? (c->bos[0] ? c->bos : f->bos)
                        : strcmp(name, "eos") == 0 ? (c->eos[0] ? c->eos : f->eos)
                                                   : name + optional;
    int32_t id = fg_tokenizer_special(t, token);
    if (id < 0 && optional)
        return run_add(r, token, strlen(token)) ? fg_error_set(err, FG_OUT_OF_MEMORY,
                                                               "fulgur chat: out of memory")
                                                : FG_OK;
    if (id < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur chat: the %s chat form needs the "
                            "special token %s, which the tokenizer does not have", f->name,
                            token);
    fg_status st = flush(t, r, out, err);
    return st == FG_OK ? push_id(out, id, err) : st;
}

static fg_status render(const fg_chat_template *c, const fg_tokenizer *t, const char *form,
                        const char *line, fg_token_buf *out, fg_error *err)
{
    run r = {0};
    fg_status st = FG_OK;
    const char *p = form;
    while (st == FG_OK && *p) {
        const char *open = strchr(p, '{');
        size_t n = open ? (size_t)(open - p) : strlen(p);
        if (n && run_add(&r, p, n))
            st = fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur chat: out of memory");
        if (!open)
            break;
        const char *close = strchr(open, '}');
        char name[FG_CHAT_TOKEN_MAX];
        snprintf(name, sizeof name, "%.*s", (int)(close - open - 1), open + 1);
        if (st == FG_OK)
            st = marker(c, t, name, line, &r, out, err);
        p = close + 1;
    }
    if (st == FG_OK)
        st = flush(t, &r, out, err);
    free(r.text);
    return st;
}

fg_status fg_chat_render_start(const fg_chat_template *c, const fg_tokenizer *t,
                               fg_token_buf *out, fg_error *err)
{
    return render(c, t, forms[c->family].start, "", out, err);
}

fg_status fg_chat_render_user(const fg_chat_template *c, const fg_tokenizer *t,
                              const char *line, fg_token_buf *out, fg_error *err)
{
    return render(c, t, forms[c->family].user, line, out, err);
}

fg_status fg_chat_render_reply_end(const fg_chat_template *c, const fg_tokenizer *t,
                                   fg_token_buf *out, fg_error *err)
{
    return render(c, t, forms[c->family].reply_end, "", out, err);
}

int32_t fg_chat_stop_id(const fg_chat_template *c, const fg_tokenizer *t)
{
    const chat_form *f = &forms[c->family];
    if (c->family == FG_CHAT_PLAIN)
        return -1;
    return fg_tokenizer_special(t, f->stop[0] ? f->stop : c->eos[0] ? c->eos : f->eos);
}
