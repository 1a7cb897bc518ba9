/* The tokenizer library (core/src/text) on small hand-made tokenizer.json files: ids by
 * merge rank, ignore_merges, a Split regex, added tokens, decoding, and each refusal's
 * message. The GPT-2 parity on a large corpus is parity_gpt2.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "byte_unicode.h"
#include "check.h"
#include "pretokenizer.h"
#include "tokenizer.h"

static char dir[4096];

/* The byte-level spelling of byte b, as a JSON string body. */
static void spell(unsigned b, char *out)
{
    unsigned cp = fg_byte_to_codepoint((unsigned char)b);
    if (cp == '"' || cp == '\\')
        sprintf(out, "\\%c", (char)cp);
    else
        sprintf(out, "\\u%04x", cp);
}

/* A tokenizer.json: every byte b as id b, then `extra` vocab entries, `merges`, and the
 * pre-tokenizer, normalizer and model flags as given. Returns its path. */
static const char *write_json(const char *name, const char *extra, const char *merges,
                              const char *pre, const char *more_model, const char *root_more)
{
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"added_tokens\": [{\"id\": 300, \"content\": \"<|endoftext|>\", \"special\": "
               "true}], %s\"pre_tokenizer\": %s, \"decoder\": {\"type\": \"ByteLevel\"}, "
               "\"model\": {\"type\": \"BPE\", %s\"vocab\": {", root_more, pre, more_model);
    for (unsigned b = 0; b < 256; b++) {
        char s[16];
        spell(b, s);
        fprintf(f, "\"%s\": %u, ", s, b);
    }
    fprintf(f, "%s}, \"merges\": [%s]}}", extra, merges);
    fclose(f);
    return path;
}

#define BYTE_LEVEL "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}"
#define ABC_VOCAB "\"ab\": 256, \"abc\": 257, \"\\u0120a\": 258"
#define ABC_MERGES "\"a b\", \"ab c\", \"\\u0120 a\""

static fg_tokenizer *load(const char *path)
{
    fg_tokenizer *t = NULL;
    fg_error err = {0};
    if (fg_tokenizer_load(path, &t, &err) != FG_OK)
        CHECK(0, "load %s: %s", path, err.message);
    return t;
}

/* ids of text into want-checked form: the count, ids into out. */
static size_t encode(fg_tokenizer *t, const char *text, int32_t *out)
{
    fg_token_encoder *e = NULL;
    fg_token_buf b = {0};
    fg_error err = {0};
    CHECK_EQ(fg_token_encoder_create(t, &e, &err), FG_OK);
    if (fg_token_encode(e, text, strlen(text), &b, &err) != FG_OK)
        CHECK(0, "encode \"%s\": %s", text, err.message);
    size_t n = b.len;
    memcpy(out, b.ids, n * sizeof *out);
    fg_token_buf_free(&b);
    fg_token_encoder_free(e);
    return n;
}

static void check_ids(fg_tokenizer *t, const char *text, const int32_t *want, size_t n)
{
    int32_t got[64];
    size_t k = encode(t, text, got);
    CHECK(k == n, "\"%s\": %zu ids, expected %zu", text, k, n);
    for (size_t i = 0; i < k && i < n; i++)
        CHECK(got[i] == want[i], "\"%s\": id %zu is %d, expected %d", text, i, got[i], want[i]);
}

static void test_alphabet(void)
{
    CHECK_EQ(fg_byte_to_codepoint('!'), 33u);
    CHECK_EQ(fg_byte_to_codepoint(0), 256u);
    CHECK_EQ(fg_byte_to_codepoint(' '), 0x120u); /* Ġ */
    CHECK_EQ(fg_byte_to_codepoint('\n'), 0x10au); /* Ċ */
    CHECK_EQ(fg_byte_to_codepoint(0xad), 0x143u);
    unsigned char out[8];
    CHECK_EQ(fg_byte_level_decode("\xc4\xa0hi\xc4\x8a", 6, out), 4L);
    CHECK(memcmp(out, " hi\n", 4) == 0);
    CHECK_EQ(fg_byte_level_decode("\xe2\x82\xac", 3, out), -1L); /* € is not in the alphabet */
}

static void test_ranks(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    fg_tokenizer *t = load(write_json("ranks.json", ABC_VOCAB, ABC_MERGES, BYTE_LEVEL, "", ""));
    if (!t)
        return;
    /* "abc": a b (rank 0), then ab c; " ab": a b (rank 0) before Ġ a (rank 2) */
    check_ids(t, "abc ab", (const int32_t[]){257, ' ', 256}, 3);
    check_ids(t, " a", (const int32_t[]){258}, 1);
    /* the special token's spelling is ordinary text; it is still the end-of-text token */
    check_ids(t, "<|endoftext|>", (const int32_t[]){'<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e',
                                                   'x', 't', '|', '>'}, 13);
    CHECK_EQ(fg_tokenizer_eot(t), 300);
    CHECK_EQ(fg_tokenizer_vocab_size(t), 301);
    size_t n = 0;
    const unsigned char *b = fg_tokenizer_bytes(t, 257, &n);
    CHECK(b && n == 3 && memcmp(b, "abc", 3) == 0);
    b = fg_tokenizer_bytes(t, 300, &n);
    CHECK(b && n == 13 && memcmp(b, "<|endoftext|>", 13) == 0);
    CHECK(fg_tokenizer_bytes(t, 299, &n) == NULL); /* a hole in the ids */
    fg_tokenizer_free(t);
}

static void test_ignore_merges(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    fg_tokenizer *plain = load(write_json("plain.json", ABC_VOCAB, "\"a b\"", BYTE_LEVEL, "", ""));
    fg_tokenizer *ignore = load(write_json("ignore.json", ABC_VOCAB, "\"a b\"", BYTE_LEVEL,
                                           "\"ignore_merges\": true, ", ""));
    if (plain)
        check_ids(plain, "abc", (const int32_t[]){256, 'c'}, 2);
    if (ignore)
        check_ids(ignore, "abc", (const int32_t[]){257}, 1);
    fg_tokenizer_free(plain);
    fg_tokenizer_free(ignore);
}

static void test_split_regex(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    const char *pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
                      "\"pattern\": {\"Regex\": \"\\\\p{N}{1,3}|\\\\s+\"}, \"behavior\": "
                      "\"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                      "\"add_prefix_space\": false, \"use_regex\": false}]}";
    fg_tokenizer *t = load(write_json("split.json", "\"12\": 260, \"123\": 261, \"45\": 262, \"34\": 263",
                                      "\"3 4\", \"1 2\", \"12 3\", \"4 5\"", pre, "", ""));
    /* digits in threes: "123" "45", never the better-ranked "34"; "ab", between matches, is
     * one word */
    if (t)
        check_ids(t, "12345ab", (const int32_t[]){261, 262, 'a', 'b'}, 4);
    fg_tokenizer_free(t);
}

/* Llama 3's pattern (its tokenizer.json's Split) compiles and splits as the regex says:
 * case-insensitive contractions, a letter run with one leading non-letter, digits by three,
 * newline runs. */
static void test_llama3_pattern(void)
{
    static const char *const pattern =
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    static const char *const want[] = {"I", "'M", " ", "123", "45", " h\xc3\xa9llo", "\n\n", "x"};
    const char *text = "I'M 12345 h\xc3\xa9llo\n\nx";
    fg_pretokenizer *p = NULL;
    fg_pretoken_scanner *sc = NULL;
    fg_error err = {0};
    CHECK_EQ(fg_pretokenizer_compile(pattern, "llama3", &p, &err), FG_OK);
    CHECK_EQ(fg_pretoken_scanner_create(p, &sc, &err), FG_OK);
    size_t at = 0, start, end, k = 0, len = strlen(text);
    while (sc && fg_pretoken_next(sc, text, len, &at, &start, &end, &err) == 1 && k < 8) {
        CHECK(end - start == strlen(want[k]) && memcmp(text + start, want[k], end - start) == 0,
              "piece %zu is \"%.*s\", expected \"%s\"", k, (int)(end - start), text + start,
              want[k]);
        k++;
    }
    CHECK_EQ(k, (size_t)8);
    fg_pretoken_scanner_free(sc);
    fg_pretokenizer_free(p);
}

static void check_refused(const char *path, const char *want)
{
    fg_tokenizer *t = NULL;
    fg_error err = {0};
    CHECK(fg_tokenizer_load(path, &t, &err) != FG_OK, "%s loaded", path);
    CHECK(strstr(err.message, want) != NULL, "message \"%s\" lacks \"%s\"", err.message, want);
    fg_tokenizer_free(t);
}

static void test_refusals(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    check_refused(write_json("norm.json", ABC_VOCAB, ABC_MERGES, BYTE_LEVEL, "",
                             "\"normalizer\": {\"type\": \"NFC\"}, "),
                  "a normalizer is not supported");
    check_refused(write_json("prefix.json", ABC_VOCAB, ABC_MERGES,
                             "{\"type\": \"ByteLevel\", \"add_prefix_space\": true}", "", ""),
                  "add_prefix_space = true");
    check_refused(write_json("merge.json", ABC_VOCAB, "\"a b\", \"x yz\"", BYTE_LEVEL, "", ""),
                  "model.merges[1]: merge \"x yz\" names a token that is not in the vocabulary");
    check_refused(write_json("dup.json", "\"ab\": 97", "", BYTE_LEVEL, "", ""),
                  "id 97 is given to two tokens");
    check_refused(write_json("wp.json", ABC_VOCAB, ABC_MERGES, BYTE_LEVEL,
                             "\"continuing_subword_prefix\": \"##\", ", ""),
                  "model.continuing_subword_prefix is not supported");
    check_refused("/nonexistent/tok", "no such file or folder");
    /* a vocabulary that lacks a byte: one entry short of 256 */
    char path[4200];
    snprintf(path, sizeof path, "%s/short.json", tmp);
    FILE *f = fopen(path, "w");
    fputs("{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", "
          "\"vocab\": {\"a\": 0}, \"merges\": []}}", f);
    fclose(f);
    check_refused(path, "no token stands for byte 0x00");
}

/* A .model that is not a SentencePiece model (garbage, empty) is refused with a message
 * naming it, never a crash; without libsentencepiece every .model is, saying so. */
static void test_spm_refusals(const char *tmp)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/garbage.model", tmp);
    FILE *f = fopen(path, "w");
    fputs("this is not a protobuf \x01\x02\xff", f);
    fclose(f);
#ifdef FULGUR_TEST_HAVE_SENTENCEPIECE
    check_refused(path, "garbage.model: not a SentencePiece model SentencePiece can load");
    snprintf(path, sizeof path, "%s/empty.model", tmp);
    fclose(fopen(path, "w"));
    check_refused(path, "empty.model: not a SentencePiece model");
#else
    check_refused(path, "this fulgur was built without SentencePiece");
#endif
    check_refused("/nonexistent/x.model", "no such file or folder");
}

static void test_bad_utf8(const char *tmp)
{
    snprintf(dir, sizeof dir, "%s", tmp);
    fg_tokenizer *t = load(write_json("utf8.json", ABC_VOCAB, ABC_MERGES, BYTE_LEVEL, "", ""));
    if (!t)
        return;
    fg_token_encoder *e = NULL;
    fg_token_buf b = {0};
    fg_error err = {0};
    CHECK_EQ(fg_token_encoder_create(t, &e, &err), FG_OK);
    CHECK_EQ(fg_token_encode(e, "abc\xff", 4, &b, &err), FG_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "not valid UTF-8 at byte 3 (0xff)") != NULL, "%s", err.message);
    CHECK_EQ(fg_token_encode(e, "ab\xed\xa0\x80", 5, &b, &err), FG_INVALID_ARGUMENT); /* a surrogate */
    fg_token_buf_free(&b);
    fg_token_encoder_free(e);
    fg_tokenizer_free(t);
}

int main(int argc, char **argv)
{
    static const fg_test_case cases[] = {
        {"alphabet", test_alphabet, NULL},
        {"ranks", NULL, test_ranks},
        {"ignore_merges", NULL, test_ignore_merges},
        {"split_regex", NULL, test_split_regex},
        {"llama3_pattern", test_llama3_pattern, NULL},
        {"refusals", NULL, test_refusals},
        {"bad_utf8", NULL, test_bad_utf8},
        {"spm_refusals", NULL, test_spm_refusals},
    };
    return fg_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
