/* Loading a tokenizer, and encoding with a per-thread cache (tokenizer.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "byte_unicode.h"
#include "core_util.h"
#include "grow_array.h"
#include "tokenizer_internal.h"
#include "utf8.h"

#define CACHE_WORDS_MAX (1u << 18) /* the encode cache is emptied beyond this */
#define CACHE_IDS_MAX (1u << 22)

struct fg_token_encoder {
    const fg_tokenizer *t;
    fg_pretoken_scanner *scan;
    fg_bytes_map cache;   /* word -> (offset in ids, count) */
    int32_t *ids;
    size_t ids_len, ids_cap;
    int32_t *sym, *rank, *out;
    size_t scratch_cap;
};

fg_status fg_tokenizer_add_spelled(fg_tokenizer *t, const char *spelled, int32_t id,
                                   const char *where, fg_error *err)
{
    size_t n = strlen(spelled);
    unsigned char stack[256];
    unsigned char *bytes = n <= sizeof stack ? stack : malloc(n);
    if (!bytes)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
    long len = fg_byte_level_decode(spelled, n, bytes);
    fg_bpe_add rc = len > 0 ? fg_bpe_model_add_token(&t->model, bytes, (size_t)len, id, 1)
                            : FG_BPE_ADDED;
    if (bytes != stack)
        free(bytes);
    if (len <= 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: token \"%s\" (id %d) is not spelled "
                            "in the byte-level alphabet: not a byte-level BPE vocabulary",
                            where, spelled, id);
    if (rc == FG_BPE_ID_TAKEN)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: id %d is given to two tokens (one is "
                            "\"%s\")", where, id, spelled);
    if (rc == FG_BPE_BAD_ID)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: token \"%s\" has id %d, outside "
                            "[0, 2^24)", where, spelled, id);
    return rc == FG_BPE_ADDED ? FG_OK : fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
}

static int32_t spelled_id(const fg_tokenizer *t, const char *s, size_t n)
{
    unsigned char stack[256];
    unsigned char *bytes = n <= sizeof stack ? stack : malloc(n);
    long len = bytes ? fg_byte_level_decode(s, n, bytes) : -1;
    int32_t id = len > 0 ? fg_bpe_model_find(&t->model, bytes, (size_t)len) : -1;
    if (bytes != stack)
        free(bytes);
    return id;
}

fg_status fg_tokenizer_add_merge(fg_tokenizer *t, const char *left, size_t left_len,
                                 const char *right, size_t right_len, int32_t rank,
                                 const char *where, fg_error *err)
{
    int32_t a = spelled_id(t, left, left_len), b = spelled_id(t, right, right_len);
    if (a < 0 || b < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: merge \"%.*s %.*s\" names a token "
                            "that is not in the vocabulary", where, (int)left_len, left,
                            (int)right_len, right);
    int rc = fg_bpe_model_add_merge(&t->model, a, b, rank);
    if (rc == -2)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: merge \"%.*s %.*s\" makes a token "
                            "that is not in the vocabulary", where, (int)left_len, left,
                            (int)right_len, right);
    return rc == 0 ? FG_OK : fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
}

fg_status fg_tokenizer_add_special(fg_tokenizer *t, const char *text, int32_t id,
                                   const char *where, fg_error *err)
{
    size_t n = strlen(text);
    fg_bpe_add rc = fg_bpe_model_add_token(&t->model, text, n, id, 0);
    if (rc == FG_BPE_ID_TAKEN || rc == FG_BPE_BAD_ID)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: added token \"%s\" has id %d, which "
                            "is %s", where, text, id, rc == FG_BPE_BAD_ID ? "outside [0, 2^24)"
                                                                          : "another token's");
    if (rc != FG_BPE_ADDED || fg_bytes_map_put(&t->special, text, n, fg_text_hash(text, n), id, 0))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
    return FG_OK;
}

int32_t fg_tokenizer_special(const fg_tokenizer *t, const char *text)
{
    if (t->spm)
        return fg_spm_piece_id(t->spm, text);
    size_t n = strlen(text);
    const fg_bytes_entry *e = fg_bytes_map_find(&t->special, text, n, fg_text_hash(text, n));
    return e ? e->v0 : fg_bpe_model_find(&t->model, text, n);
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

static fg_status load_files(fg_tokenizer *t, const char *path, fg_error *err)
{
    if (fg_is_regular_file(path) && ends_with(path, ".model"))
        return fg_spm_load(path, &t->spm, err);
    if (fg_is_regular_file(path))
        return fg_tokenizer_load_json(t, path, err);
    if (!fg_is_directory(path))
        return fg_error_set(err, FG_NOT_FOUND, "tokenizer: %s: no such file or folder", path);
    static const char *const names[][2] = {{"tokenizer.json", NULL},
                                           {"encoder.json", "vocab.bpe"},
                                           {"vocab.json", "merges.txt"},
                                           {"tokenizer.model", NULL}};
    size_t n = strlen(path) + 32;
    char *a = malloc(n), *b = malloc(n);
    fg_status st = a && b ? FG_NOT_FOUND : fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
    for (size_t i = 0; st == FG_NOT_FOUND && i < 4; i++) {
        snprintf(a, n, "%s/%s", path, names[i][0]);
        if (names[i][1])
            snprintf(b, n, "%s/%s", path, names[i][1]);
        if (fg_is_regular_file(a) && (!names[i][1] || fg_is_regular_file(b)))
            st = names[i][1] ? fg_tokenizer_load_gpt2(t, a, b, err)
                 : i == 3    ? fg_spm_load(a, &t->spm, err)
                             : fg_tokenizer_load_json(t, a, err);
    }
    if (st == FG_NOT_FOUND)
        fg_error_set(err, FG_NOT_FOUND, "tokenizer: %s holds none of tokenizer.json, "
                     "encoder.json + vocab.bpe, vocab.json + merges.txt, tokenizer.model", path);
    free(a);
    free(b);
    return st;
}

fg_status fg_tokenizer_load(const char *path, fg_tokenizer **out, fg_error *err)
{
    *out = NULL;
    fg_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
    fg_status st = load_files(t, path, err);
    int missing = st == FG_OK && !t->spm ? fg_bpe_model_finish(&t->model) : -1;
    if (missing >= 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: %s: no token stands for byte "
                          "0x%02x: not a byte-level vocabulary (every byte needs one)", path,
                          missing);
    static const char *const eot_names[] = {"<|endoftext|>", "<|end_of_text|>", "</s>"};
    t->eot = st == FG_OK && t->spm ? fg_spm_eos(t->spm) : -1;
    for (size_t i = 0; st == FG_OK && !t->spm && i < 3 && t->eot < 0; i++)
        t->eot = fg_tokenizer_special(t, eot_names[i]);
    return FG_CREATED(st, t, out, fg_tokenizer_free);
}

void fg_tokenizer_free(fg_tokenizer *t)
{
    if (!t)
        return;
    fg_bpe_model_free(&t->model);
    fg_pretokenizer_free(t->pre);
    fg_bytes_map_free(&t->special);
    fg_spm_free(t->spm);
    free(t);
}

int32_t fg_tokenizer_vocab_size(const fg_tokenizer *t)
{
    return t->spm ? fg_spm_vocab_size(t->spm) : t->model.ids;
}

int32_t fg_tokenizer_eot(const fg_tokenizer *t)
{
    return t->eot;
}

int32_t fg_tokenizer_bos(const fg_tokenizer *t)
{
    return t->spm ? fg_spm_bos(t->spm) : -1;
}

int fg_tokenizer_by_line(const fg_tokenizer *t)
{
    return t->spm != NULL;
}

const unsigned char *fg_tokenizer_bytes(const fg_tokenizer *t, int32_t id, size_t *n)
{
    return t->spm ? fg_spm_bytes(t->spm, id, n) : fg_bpe_model_bytes(&t->model, id, n);
}

void fg_token_buf_free(fg_token_buf *b)
{
    free(b->ids);
    memset(b, 0, sizeof *b);
}

static int buf_reserve(fg_token_buf *b, size_t more)
{
    return fg_plugin_grow_array(&b->ids, &b->cap, b->len + more, 4096, sizeof *b->ids);
}

fg_status fg_token_encoder_create(const fg_tokenizer *t, fg_token_encoder **out, fg_error *err)
{
    *out = NULL;
    fg_token_encoder *e = calloc(1, sizeof *e);
    if (!e)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
    e->t = t;
    if (t->spm) { /* SentencePiece keeps no state per thread */
        *out = e;
        return FG_OK;
    }
    fg_status st = fg_pretoken_scanner_create(t->pre, &e->scan, err);
    return FG_CREATED(st, e, out, free);
}

void fg_token_encoder_free(fg_token_encoder *e)
{
    if (!e)
        return;
    fg_pretoken_scanner_free(e->scan);
    fg_bytes_map_free(&e->cache);
    free(e->ids);
    free(e->sym);
    free(e->rank);
    free(e->out);
    free(e);
}

static int scratch_reserve(fg_token_encoder *e, size_t n)
{
    if (n <= e->scratch_cap)
        return 0;
    size_t cap = n < 256 ? 256 : n * 2;
    int32_t *sym = realloc(e->sym, cap * sizeof *sym);
    if (sym)
        e->sym = sym;
    int32_t *rank = realloc(e->rank, cap * sizeof *rank);
    if (rank)
        e->rank = rank;
    int32_t *o = realloc(e->out, cap * sizeof *o);
    if (o)
        e->out = o;
    if (!sym || !rank || !o)
        return -1;
    e->scratch_cap = cap;
    return 0;
}

/* Remembers word's ids (count of them in e->out); a full cache starts over. */
static void cache_put(fg_token_encoder *e, const char *word, size_t n, uint64_t h, size_t count)
{
    if (e->cache.count >= CACHE_WORDS_MAX || e->ids_len + count > CACHE_IDS_MAX) {
        fg_bytes_map_clear(&e->cache);
        e->ids_len = 0;
    }
    if (e->ids_len + count > e->ids_cap) {
        size_t cap = e->ids_cap ? e->ids_cap * 2 : 1 << 16;
        while (cap < e->ids_len + count)
            cap *= 2;
        int32_t *ids = realloc(e->ids, cap * sizeof *ids);
        if (!ids)
            return; /* not remembered: only slower */
        e->ids = ids;
        e->ids_cap = cap;
    }
    if (fg_bytes_map_put(&e->cache, word, n, h, (int32_t)e->ids_len, (int32_t)count) == 0) {
        memcpy(e->ids + e->ids_len, e->out, count * sizeof *e->ids);
        e->ids_len += count;
    }
}

static fg_status encode_word(fg_token_encoder *e, const char *word, size_t n, fg_token_buf *out,
                             fg_error *err)
{
    uint64_t h = fg_text_hash(word, n);
    const fg_bytes_entry *hit = fg_bytes_map_find(&e->cache, word, n, h);
    if (hit) {
        if (buf_reserve(out, (size_t)hit->v1) != 0)
            return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
        memcpy(out->ids + out->len, e->ids + hit->v0, (size_t)hit->v1 * sizeof *out->ids);
        out->len += (size_t)hit->v1;
        return FG_OK;
    }
    if (scratch_reserve(e, n) != 0 || buf_reserve(out, n) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
    size_t count = fg_bpe_encode_word(&e->t->model, (const unsigned char *)word, n, e->sym,
                                      e->rank, e->out);
    memcpy(out->ids + out->len, e->out, count * sizeof *out->ids);
    out->len += count;
    if (n <= 256)
        cache_put(e, word, n, h, count);
    return FG_OK;
}

/* The offset of the first byte that is not valid UTF-8, or len. */
static size_t first_invalid(const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = fg_utf8_sequence(s + i, len - i);
        if (!k)
            return i;
        i += k;
    }
    return len;
}

fg_status fg_token_encode(fg_token_encoder *e, const char *text, size_t len, fg_token_buf *out,
                          fg_error *err)
{
    size_t bad = first_invalid(text, len);
    if (bad < len)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: the text is not valid UTF-8 "
                            "at byte %zu (0x%02x): the tokenizer encodes Unicode text",
                            bad, (unsigned char)text[bad]);
    if (e->t->spm)
        return fg_spm_encode(e->t->spm, text, len, out, err);
    size_t at = 0, start = 0, end = 0;
    int rc = 0;
    fg_pretoken_scanner_reset(e->scan);
    fg_status st = FG_OK;
    while (st == FG_OK && (rc = fg_pretoken_next(e->scan, text, len, &at, &start, &end, err)) > 0)
        st = encode_word(e, text + start, end - start, out, err);
    return st == FG_OK && rc < 0 ? FG_INVALID_ARGUMENT : st;
}
