/* GPT-2's files: encoder.json (token spelling -> id) and vocab.bpe (a "#version" line, then
 * one merge a line, "left right", by rank); Hugging Face's vocab.json and merges.txt are
 * the same files under other names. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static fg_status load_vocab(fg_tokenizer *t, const char *path, fg_error *err)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s:%d: not JSON: %s", path,
                            jerr.line, jerr.text);
    fg_status st = json_is_object(root) ? FG_OK
                 : fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: not a JSON object of "
                                "token -> id", path);
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (st != FG_OK)
            break;
        if (!json_is_integer(value))
            st = fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: token \"%s\": its id is "
                              "not an integer", path, key);
        else
            st = fg_tokenizer_add_spelled(t, key, (int32_t)json_integer_value(value), path, err);
    }
    json_decref(root);
    return st;
}

/* "left right" at line (n bytes, no newline) as rank. */
static fg_status merge_line(fg_tokenizer *t, const char *line, size_t n, int32_t rank,
                            const char *where, fg_error *err)
{
    const char *space = memchr(line, ' ', n);
    if (!space || space == line || space + 1 == line + n || memchr(space + 1, ' ', (size_t)(line + n - space - 1)))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: \"%.*s\" is not a merge (two tokens "
                            "and one space)", where, (int)n, line);
    return fg_tokenizer_add_merge(t, line, (size_t)(space - line), space + 1,
                                  (size_t)(line + n - space - 1), rank, where, err);
}

static fg_status load_merges(fg_tokenizer *t, const char *path, fg_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return fg_error_set(err, FG_NOT_FOUND, "tokenizer: %s: cannot open", path);
    char *line = NULL, where[4200];
    size_t cap = 0;
    ssize_t n;
    int32_t rank = 0;
    fg_status st = FG_OK;
    for (long lineno = 1; st == FG_OK && (n = getline(&line, &cap, f)) >= 0; lineno++) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            n--;
        if (n == 0 || (lineno == 1 && strncmp(line, "#version", 8) == 0))
            continue;
        snprintf(where, sizeof where, "tokenizer: %s:%ld", path, lineno);
        st = merge_line(t, line, (size_t)n, rank++, where, err);
    }
    free(line);
    fclose(f);
    return st;
}

fg_status fg_tokenizer_load_gpt2(fg_tokenizer *t, const char *vocab_path,
                                 const char *merges_path, fg_error *err)
{
    fg_status st = load_vocab(t, vocab_path, err);
    if (st == FG_OK)
        st = load_merges(t, merges_path, err);
    if (st == FG_OK)
        st = fg_pretokenizer_compile(FG_GPT2_PATTERN, "GPT-2's pattern", &t->pre, err);
    return st;
}
