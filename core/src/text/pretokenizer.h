/* Pre-tokenization: the text split into words by a regular expression (PCRE2, UTF and UCP
 * so \p{L} and \p{N} are Unicode's letters and numbers), each match a word and each stretch
 * between matches one too (Hugging Face's Split, behavior Isolated; GPT-2's pattern leaves
 * none). \s and \S mean ECMAScript's white space (what the reference encoders, JavaScript's
 * gpt-3-encoder and the regex crates, match), spelled out before compiling: PCRE2's own \s
 * under UCP differs at U+0085 and U+FEFF. PCRE2 is reached from this file alone. */
#ifndef FG_PRETOKENIZER_H
#define FG_PRETOKENIZER_H

#include <stddef.h>

#include "fulgur/plugin.h"

/* GPT-2's pattern (encoder.py; tokenizer.json's ByteLevel pre-tokenizer with use_regex). */
#define FG_GPT2_PATTERN \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

typedef struct fg_pretokenizer fg_pretokenizer;
typedef struct fg_pretoken_scanner fg_pretoken_scanner;

/* `where` names the pattern's origin in messages (a file and key). */
fg_status fg_pretokenizer_compile(const char *pattern, const char *where, fg_pretokenizer **out,
                                  fg_error *err);
void fg_pretokenizer_free(fg_pretokenizer *p);

/* Per thread: match data and a JIT stack. */
fg_status fg_pretoken_scanner_create(const fg_pretokenizer *p, fg_pretoken_scanner **out,
                                     fg_error *err);
void fg_pretoken_scanner_free(fg_pretoken_scanner *s);

/* Forgets any word held back from the last text (before a new one). */
void fg_pretoken_scanner_reset(fg_pretoken_scanner *s);

/* The next word of text (len bytes, valid UTF-8) at or after *at: [*start, *end), and *at
 * moved past it. 1 a word, 0 the end, -1 a matching failure (message in err). */
int fg_pretoken_next(fg_pretoken_scanner *s, const char *text, size_t len, size_t *at,
                     size_t *start, size_t *end, fg_error *err);

#endif
