/* fulgur chat's forms (core/src/text/chat_template.c through verbs/generate_text.c) on a
 * hand-made byte-level tokenizer.json (byte b is id b, the markers added tokens from 300) and
 * a tokenizer_config.json holding a family's real Jinja template: a two-turn conversation
 * ("hi", the reply "ok", "yo") must render to exactly the ids Hugging Face's template gives
 * with add_generation_prompt, the reply must stop at the family's token, a user's typed
 * marker stays text, and an unknown template or a config disagreeing with the tokenizer
 * fails naming the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "byte_unicode.h"
#include "check.h"
#include "generate_text.h"

static char dir[4096];

enum { IM_START = 300, IM_END, BOT, SHS, SHE, EOT_ID, BOS, EOS, ENDOFTEXT };

static void write_tokenizer(void)
{
    static const char *const added[] = {"<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
                                        "<|start_header_id|>", "<|end_header_id|>",
                                        "<|eot_id|>", "<s>", "</s>", "<|endoftext|>"};
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"added_tokens\": [");
    for (int i = 0; i < 9; i++)
        fprintf(f, "%s{\"id\": %d, \"content\": \"%s\", \"special\": true}", i ? ", " : "",
                300 + i, added[i]);
    fprintf(f, "], \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, "
               "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", "
               "\"vocab\": {");
    for (unsigned b = 0; b < 256; b++) {
        unsigned cp = fg_byte_to_codepoint((unsigned char)b);
        if (cp == '"' || cp == '\\')
            fprintf(f, "\"\\%c\": %u, ", (char)cp, b);
        else
            fprintf(f, "\"\\u%04x\": %u%s", cp, b, b < 255 ? ", " : "");
    }
    fprintf(f, "}, \"merges\": []}}");
    fclose(f);
}

/* tokenizer_config.json with this Jinja text (a JSON string body) and these tokens. */
static void write_config(const char *jinja, const char *bos, const char *eos, const char *more)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"bos_token\": %s, \"eos_token\": %s, %s\"chat_template\": \"%s\"}", bos, eos,
            more, jinja);
    fclose(f);
}

/* Hugging Face's templates as their tokenizer_config.json files hold them (abridged to the
 * part that holds the markers). */
#define CHATML_JINJA "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\\\n' " \
    "+ message['content'] + '<|im_end|>' + '\\\\n'}}{% endfor %}{% if add_generation_prompt %}" \
    "{{ '<|im_start|>assistant\\\\n' }}{% endif %}"
#define LLAMA3_JINJA "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + " \
    "message['role'] + '<|end_header_id|>\\\\n\\\\n' + message['content'] | trim + " \
    "'<|eot_id|>' }}{% endfor %}"
#define LLAMA2_JINJA "{% for message in messages %}{% if message['role'] == 'user' %}{{ " \
    "bos_token + '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ ' ' + " \
    "message['content'] + ' ' + eos_token }}{% endif %}{% endfor %}"
#define ZEPHYR_JINJA "{% for message in messages %}{% if message['role'] == 'user' %}{{ " \
    "'<|user|>\\\\n' + message['content'] + eos_token }}{% endif %}{% endfor %}"

/* ids of "t" appended (bytes are ids) */
static size_t text(int32_t *w, size_t n, const char *t)
{
    while (*t)
        w[n++] = (unsigned char)*t++;
    return n;
}

/* The conversation "hi" -> "ok" -> "yo" under choice; its ids must be want. */
static void converse(const char *choice, const int32_t *want, size_t n, int32_t stop)
{
    fg_gen_text g;
    fg_error err = {0};
    CHECK_OK(fg_gen_text_open(&g, dir, "", 512, &err), &err);
    CHECK_OK(fg_gen_text_chat(&g, dir, choice, "", &err), &err);
    CHECK_OK(fg_gen_text_turn(&g, "hi", &err), &err);
    CHECK_OK(fg_gen_text_push(&g, 'o', &err), &err);
    CHECK_OK(fg_gen_text_push(&g, 'k', &err), &err);
    CHECK_OK(fg_gen_text_end_reply(&g, &err), &err);
    CHECK_OK(fg_gen_text_turn(&g, "yo", &err), &err);
    CHECK(g.len == n, "%s: %zu ids, expected %zu", choice, g.len, n);
    for (size_t i = 0; i < g.len && i < n; i++)
        CHECK(g.ids[i] == want[i], "%s: id %zu is %d, expected %d", choice, i, g.ids[i], want[i]);
    CHECK(g.eot == stop, "%s: a reply stops at %d, expected %d", choice, g.eot, stop);
    fg_gen_text_close(&g);
}

static void test_chatml(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    write_tokenizer();
    write_config(CHATML_JINJA, "null", "\"<|im_end|>\"", "");
    int32_t w[128];
    size_t n = 0;
    for (int turn = 0; turn < 2; turn++) {
        w[n++] = IM_START;
        n = text(w, n, turn ? "user\nyo" : "user\nhi");
        w[n++] = IM_END;
        n = text(w, n, "\n");
        w[n++] = IM_START;
        n = text(w, n, "assistant\n");
        if (!turn) {
            n = text(w, n, "ok");
            w[n++] = IM_END;
            n = text(w, n, "\n");
        }
    }
    converse("auto", w, n, IM_END);
    converse("chatml", w, n, IM_END);
}

static void test_llama3(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    write_tokenizer();
    write_config(LLAMA3_JINJA, "\"<|begin_of_text|>\"", "{\"content\": \"<|eot_id|>\"}", "");
    int32_t w[128];
    size_t n = 0;
    w[n++] = BOT;
    for (int turn = 0; turn < 2; turn++) {
        w[n++] = SHS;
        n = text(w, n, "user");
        w[n++] = SHE;
        n = text(w, n, turn ? "\n\nyo" : "\n\nhi");
        w[n++] = EOT_ID;
        w[n++] = SHS;
        n = text(w, n, "assistant");
        w[n++] = SHE;
        n = text(w, n, "\n\n");
        if (!turn) {
            n = text(w, n, "ok");
            w[n++] = EOT_ID;
        }
    }
    converse("auto", w, n, EOT_ID);
}

static void test_llama2(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    write_tokenizer();
    write_config(LLAMA2_JINJA, "\"<s>\"", "\"</s>\"", "");
    int32_t w[128];
    size_t n = 0;
    w[n++] = BOS;
    n = text(w, n, "[INST] hi [/INST]ok");
    w[n++] = EOS;
    w[n++] = BOS;
    n = text(w, n, "[INST] yo [/INST]");
    converse("auto", w, n, EOS);
}

static void test_zephyr(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    write_tokenizer();
    write_config(ZEPHYR_JINJA, "\"<s>\"", "\"</s>\"", "");
    int32_t w[128];
    size_t n = 0;
    n = text(w, n, "<|user|>\nhi");
    w[n++] = EOS;
    n = text(w, n, "\n<|assistant|>\nok");
    w[n++] = EOS;
    n = text(w, n, "\n<|user|>\nyo");
    w[n++] = EOS;
    n = text(w, n, "\n<|assistant|>\n");
    converse("auto", w, n, EOS);
}

/* A user's "<|im_end|>" is text, not the token. */
static void test_typed_marker(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    write_tokenizer();
    write_config(CHATML_JINJA, "null", "\"<|im_end|>\"", "");
    fg_gen_text g;
    fg_error err = {0};
    CHECK_OK(fg_gen_text_open(&g, dir, "", 512, &err), &err);
    CHECK_OK(fg_gen_text_chat(&g, dir, "auto", "", &err), &err);
    CHECK_OK(fg_gen_text_turn(&g, "<|im_end|>", &err), &err);
    int32_t w[64];
    size_t n = 0;
    w[n++] = IM_START;
    n = text(w, n, "user\n<|im_end|>");
    w[n++] = IM_END;
    CHECK(g.len > n, "%zu ids", g.len);
    for (size_t i = 0; i < n && i < g.len; i++)
        CHECK(g.ids[i] == w[i], "id %zu is %d, expected %d", i, g.ids[i], w[i]);
    fg_gen_text_close(&g);
}

static const char *chat_error(const char *choice, const char *prompt)
{
    static char msg[sizeof ((fg_error *)0)->message];
    fg_gen_text g;
    fg_error err = {0};
    msg[0] = '\0';
    if (fg_gen_text_open(&g, dir, "", 512, &err) != FG_OK ||
        fg_gen_text_chat(&g, dir, choice, prompt, &err) != FG_OK)
        snprintf(msg, sizeof msg, "%s", err.message);
    fg_gen_text_close(&g);
    return msg;
}

static void test_refusals(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    write_tokenizer();
    char want[8192];
    write_config("{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}{% endfor %}",
                 "null", "null", "");
    snprintf(want, sizeof want, "%s/tokenizer_config.json: its chat_template is of no family "
             "fulgur knows (ChatML <|im_start|>, Llama 3 <|start_header_id|>, Llama 2 / "
             "Mistral [INST], Zephyr <|user|>); fulgur does not run Jinja: pick the form with "
             "--chat-template (auto|plain|chatml|llama3|llama2|zephyr)", dir);
    CHECK_STR(chat_error("auto", ""), want);
    CHECK_STR(chat_error("chatml", ""), ""); /* a named form needs no recognisable template */
    CHECK_STR(chat_error("chatml", "a system line"),
              "fulgur chat: [generate] prompt has no place in the chatml chat form (its turns "
              "come from stdin); leave it empty");
    write_config(CHATML_JINJA, "null", "\"<|im_end|>\"",
                 "\"added_tokens_decoder\": {\"300\": {\"content\": \"<|im_end|>\"}}, ");
    snprintf(want, sizeof want, "%s/tokenizer_config.json: added_tokens_decoder declares "
             "\"<|im_end|>\" as id 300, but the tokenizer gives it another id", dir);
    CHECK_STR(chat_error("auto", ""), want);
    write_config(CHATML_JINJA, "null", "\"<|im_stop|>\"", "");
    snprintf(want, sizeof want, "%s/tokenizer_config.json: \"eos_token\" is \"<|im_stop|>\", "
             "which the tokenizer does not have as a token", dir);
    CHECK_STR(chat_error("auto", ""), want);
    CHECK_EQ(fg_chat_family_detect(CHATML_JINJA), (int)FG_CHAT_CHATML);
    CHECK_EQ(fg_chat_family_detect("{{ '[INST]' }}"), (int)FG_CHAT_LLAMA2);
    CHECK_EQ(fg_chat_family_detect("{{ 'Human: ' }}"), -1);
}

int main(int argc, char **argv)
{
    static const fg_test_case cases[] = {
        {"chatml", NULL, test_chatml},       {"llama3", NULL, test_llama3},
        {"llama2", NULL, test_llama2},       {"zephyr", NULL, test_zephyr},
        {"typed_marker", NULL, test_typed_marker}, {"refusals", NULL, test_refusals},
    };
    return fg_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
