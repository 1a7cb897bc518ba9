/* The ids and text of fulgur generate (generate_text.h). */
#include "generate_text.h"
#include "core_util.h"
#include "grow_array.h"

#include <stdlib.h>
#include <string.h>

static int reserve_ids(fg_gen_text *g, size_t more)
{
    return fg_plugin_grow_array(&g->ids, &g->cap, g->len + more, 256, sizeof *g->ids);
}

static int append_bytes(fg_gen_text *g, const unsigned char *b, size_t n)
{
    return fg_append_bytes(&g->bytes, &g->nbytes, &g->bytes_cap, b, n, 256);
}

static fg_status open_bytes(fg_gen_text *g, const char *prompt, int vocab, fg_error *err)
{
    if (vocab != 256)
        return fg_error_set(err, FG_UNAVAILABLE, "fulgur generate writes bytes: the model's "
                            "vocabulary has %d tokens, not 256; name its tokenizer with "
                            "[generate] tokenizer = PATH", vocab);
    size_t n = strlen(prompt);
    if (reserve_ids(g, n + 1) != 0 || append_bytes(g, (const unsigned char *)prompt, n) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur generate: out of memory");
    for (size_t i = 0; i < n; i++)
        g->ids[g->len++] = (unsigned char)prompt[i];
    return FG_OK;
}

static fg_status open_tokenizer(fg_gen_text *g, const char *path, const char *prompt, int vocab,
                                fg_error *err)
{
    fg_status st = fg_tokenizer_load(path, &g->tok, err);
    if (st != FG_OK)
        return st;
    int32_t ids = fg_tokenizer_vocab_size(g->tok);
    if (ids > vocab)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur generate: [generate] tokenizer "
                            "= %s has %d ids, more than the model's %d", path, ids, vocab);
    g->eot = fg_tokenizer_eot(g->tok);
    if (!(g->allowed = calloc((size_t)vocab, 1)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur generate: out of memory");
    size_t n = 0;
    for (int32_t i = 0; i < ids; i++)
        g->allowed[i] = fg_tokenizer_bytes(g->tok, i, &n) != NULL;
    fg_token_encoder *enc = NULL;
    fg_token_buf buf = {0};
    st = fg_token_encoder_create(g->tok, &enc, err);
    if (st == FG_OK)
        st = fg_token_encode(enc, prompt, strlen(prompt), &buf, err);
    if (st == FG_OK && (reserve_ids(g, buf.len + 1) != 0 ||
                        append_bytes(g, (const unsigned char *)prompt, strlen(prompt)) != 0))
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur generate: out of memory");
    int32_t bos = fg_tokenizer_bos(g->tok);
    if (st == FG_OK) {
        if (bos >= 0)
            g->ids[g->len++] = bos; /* a SentencePiece model's sequences start with it */
        if (buf.len)
            memcpy(g->ids + g->len, buf.ids, buf.len * sizeof *g->ids);
        g->len += buf.len;
        if (g->len == 0 && g->eot >= 0)
            g->ids[g->len++] = g->eot; /* nothing to continue: start after end-of-text */
    }
    fg_token_buf_free(&buf);
    fg_token_encoder_free(enc);
    return st;
}

fg_status fg_gen_text_open(fg_gen_text *g, const char *tokenizer, const char *prompt, int vocab,
                           fg_error *err)
{
    memset(g, 0, sizeof *g);
    g->eot = -1;
    fg_status st = tokenizer && tokenizer[0] ? open_tokenizer(g, tokenizer, prompt, vocab, err)
                                             : open_bytes(g, prompt, vocab, err);
    if (st != FG_OK)
        fg_gen_text_close(g);
    return st;
}

fg_status fg_gen_text_push(fg_gen_text *g, int32_t id, fg_error *err)
{
    size_t n = 1;
    unsigned char byte = (unsigned char)id;
    const unsigned char *b = g->tok ? fg_tokenizer_bytes(g->tok, id, &n) : &byte;
    if (!b)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur generate: sampled id %d, which "
                            "the tokenizer does not have", id);
    if (reserve_ids(g, 1) != 0 || append_bytes(g, b, n) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur generate: out of memory");
    g->ids[g->len++] = id;
    return FG_OK;
}

/* Appends text's ids (its bytes without a tokenizer) and its bytes. */
static fg_status append_text(fg_gen_text *g, const char *text, size_t n, fg_error *err)
{
    fg_token_encoder *enc = NULL;
    fg_token_buf buf = {0};
    fg_status st = FG_OK;
    if (g->tok) {
        st = fg_token_encoder_create(g->tok, &enc, err);
        if (st == FG_OK)
            st = fg_token_encode(enc, text, n, &buf, err);
    }
    size_t count = g->tok ? buf.len : n;
    if (st == FG_OK && (reserve_ids(g, count) != 0 ||
                        append_bytes(g, (const unsigned char *)text, n) != 0))
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur chat: out of memory");
    for (size_t i = 0; st == FG_OK && i < count; i++)
        g->ids[g->len++] = g->tok ? buf.ids[i] : (unsigned char)text[i];
    fg_token_buf_free(&buf);
    fg_token_encoder_free(enc);
    return st;
}

/* Appends ids rendered by the chat form, and text as their bytes (never printed: the turn
 * and the reply's end are not the reply). */
static fg_status append_ids(fg_gen_text *g, const fg_token_buf *b, const char *text,
                            fg_error *err)
{
    if (reserve_ids(g, b->len) != 0 ||
        append_bytes(g, (const unsigned char *)text, strlen(text)) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur chat: out of memory");
    if (b->len)
        memcpy(g->ids + g->len, b->ids, b->len * sizeof *b->ids);
    g->len += b->len;
    return FG_OK;
}

fg_status fg_gen_text_chat(fg_gen_text *g, const char *tokenizer, const char *choice,
                           const char *prompt, fg_error *err)
{
    fg_status st = fg_chat_template_open(tokenizer, g->tok, choice, &g->chat, err);
    if (st != FG_OK || g->chat.family == FG_CHAT_PLAIN)
        return st;
    const char *name = fg_chat_family_name(g->chat.family);
    if (!g->tok)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur chat: the %s chat form needs "
                            "[generate] tokenizer", name);
    if (prompt && prompt[0])
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur chat: [generate] prompt has no "
                            "place in the %s chat form (its turns come from stdin); leave it "
                            "empty", name);
    int32_t stop = fg_chat_stop_id(&g->chat, g->tok);
    if (stop < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur chat: the %s chat form ends a "
                            "reply with a token the tokenizer does not have", name);
    g->eot = stop;
    g->len = g->nbytes = 0; /* the form's start instead of the opening ids */
    fg_token_buf b = {0};
    st = fg_chat_render_start(&g->chat, g->tok, &b, err);
    if (st == FG_OK)
        st = append_ids(g, &b, "", err);
    fg_token_buf_free(&b);
    return st;
}

/* A turn or a reply's end in a family's form. */
static fg_status render_turn(fg_gen_text *g, const char *line, fg_error *err)
{
    fg_token_buf b = {0};
    fg_status st = line ? fg_chat_render_user(&g->chat, g->tok, line, &b, err)
                        : fg_chat_render_reply_end(&g->chat, g->tok, &b, err);
    if (st == FG_OK)
        st = append_ids(g, &b, line ? line : "", err);
    fg_token_buf_free(&b);
    return st;
}

fg_status fg_gen_text_turn(fg_gen_text *g, const char *line, fg_error *err)
{
    if (g->chat.family != FG_CHAT_PLAIN)
        return render_turn(g, line, err);
    static const char before[] = "User: ", after[] = "\nAssistant:";
    size_t n = strlen(line);
    char *text = malloc(sizeof before + n + sizeof after);
    if (!text)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur chat: out of memory");
    memcpy(text, before, sizeof before - 1);
    memcpy(text + sizeof before - 1, line, n);
    memcpy(text + sizeof before - 1 + n, after, sizeof after);
    fg_status st = append_text(g, text, strlen(text), err);
    free(text);
    return st;
}

fg_status fg_gen_text_end_reply(fg_gen_text *g, fg_error *err)
{
    if (g->chat.family != FG_CHAT_PLAIN)
        return render_turn(g, NULL, err);
    if (g->eot < 0)
        return append_text(g, "\n", 1, err);
    if (reserve_ids(g, 1) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur chat: out of memory");
    g->ids[g->len++] = g->eot; /* its bytes are not the reply's: not appended */
    return FG_OK;
}

void fg_gen_text_mask(const fg_gen_text *g, float *p, int vocab)
{
    for (int i = 0; g->allowed && i < vocab; i++)
        if (!g->allowed[i])
            p[i] = 0;
}

void fg_gen_text_close(fg_gen_text *g)
{
    fg_tokenizer_free(g->tok);
    free(g->ids);
    free(g->bytes);
    free(g->allowed);
    memset(g, 0, sizeof *g);
}
