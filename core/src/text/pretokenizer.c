/* The regular-expression pre-tokenizer (pretokenizer.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pretokenizer.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

/* ECMAScript's WhiteSpace and LineTerminator, as class items. */
#define JS_SPACE "\\t\\n\\x0b\\f\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}" \
                 "\\x{202f}\\x{205f}\\x{3000}\\x{feff}"
#define JIT_STACK_MAX (8u << 20)

struct fg_pretokenizer {
    pcre2_code *code;
    int jit;
};

struct fg_pretoken_scanner {
    const fg_pretokenizer *p;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *stack;
    size_t pending_end; /* a match found after a gap, to return next; 0: none */
    size_t pending_start;
};

static int append(char *out, size_t *n, size_t cap, const char *s)
{
    size_t k = strlen(s);
    if (*n + k >= cap)
        return -1;
    memcpy(out + *n, s, k);
    *n += k;
    return 0;
}

/* pattern with \s and \S spelled out; NULL on \S inside a class or out of memory. */
static char *spell_out_space(const char *pattern)
{
    size_t cap = strlen(pattern) * 24 + 64, n = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    int in_class = 0;
    int ok = 0;
    for (const char *p = pattern; *p && ok == 0; p++) {
        char piece[3] = {p[0], 0, 0};
        if (p[0] == '\\' && (p[1] == 's' || p[1] == 'S')) {
            if (in_class && p[1] == 'S')
                ok = -1;
            else
                ok = append(out, &n, cap, in_class ? JS_SPACE
                                                : p[1] == 's' ? "[" JS_SPACE "]" : "[^" JS_SPACE "]");
            p++;
            continue;
        }
        if (p[0] == '\\' && p[1]) {
            piece[1] = *++p;
        } else if (p[0] == '[' && !in_class) {
            in_class = 1;
            if (p[1] == '^')
                piece[1] = *++p;
            if (p[1] == ']') /* a leading ] is a literal */
                piece[piece[1] ? 2 : 1] = *++p;
        } else if (p[0] == ']' && in_class) {
            in_class = 0;
        }
        ok = append(out, &n, cap, piece);
    }
    if (ok != 0) {
        free(out);
        return NULL;
    }
    out[n] = '\0';
    return out;
}

fg_status fg_pretokenizer_compile(const char *pattern, const char *where, fg_pretokenizer **out,
                                  fg_error *err)
{
    *out = NULL;
    char *spelled = spell_out_space(pattern);
    if (!spelled)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: the pre-tokenizer pattern uses \\S "
                            "inside a character class, which is not supported", where);
    int code_err = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)spelled, PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP, &code_err, &offset, NULL);
    free(spelled);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code_err, msg, sizeof msg);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: the pre-tokenizer pattern does not "
                            "compile (PCRE2: %s); pattern: %s", where, (const char *)msg, pattern);
    }
    fg_pretokenizer *p = calloc(1, sizeof *p);
    if (!p) {
        pcre2_code_free(code);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    p->code = code;
    p->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    *out = p;
    return FG_OK;
}

void fg_pretokenizer_free(fg_pretokenizer *p)
{
    if (!p)
        return;
    pcre2_code_free(p->code);
    free(p);
}

fg_status fg_pretoken_scanner_create(const fg_pretokenizer *p, fg_pretoken_scanner **out,
                                     fg_error *err)
{
    fg_pretoken_scanner *s = calloc(1, sizeof *s);
    *out = NULL;
    if (s) {
        s->p = p;
        s->md = pcre2_match_data_create_from_pattern(p->code, NULL);
        s->mctx = pcre2_match_context_create(NULL);
        s->stack = p->jit ? pcre2_jit_stack_create(32u << 10, JIT_STACK_MAX, NULL) : NULL;
    }
    if (!s || !s->md || !s->mctx || (p->jit && !s->stack)) {
        fg_pretoken_scanner_free(s);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    if (s->stack)
        pcre2_jit_stack_assign(s->mctx, NULL, s->stack);
    *out = s;
    return FG_OK;
}

void fg_pretoken_scanner_free(fg_pretoken_scanner *s)
{
    if (!s)
        return;
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->stack);
    free(s);
}

void fg_pretoken_scanner_reset(fg_pretoken_scanner *s)
{
    s->pending_end = 0;
}

/* The next match at or after at: 1 with [*ms, *me), 0 none, -1 an error. */
static int find_match(fg_pretoken_scanner *s, const char *text, size_t len, size_t at,
                      size_t *ms, size_t *me, fg_error *err)
{
    for (;;) {
        int rc = s->p->jit ? pcre2_jit_match(s->p->code, (PCRE2_SPTR)text, len, at, 0, s->md,
                                             s->mctx)
                           : pcre2_match(s->p->code, (PCRE2_SPTR)text, len, at,
                                         PCRE2_NO_UTF_CHECK, s->md, s->mctx);
        if (rc == PCRE2_ERROR_NOMATCH)
            return 0;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            fg_error_set(err, FG_INVALID_ARGUMENT, "tokenizer: the pre-tokenizer pattern failed "
                         "at byte %zu of a text: %s", at, (const char *)msg);
            return -1;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        if (ov[1] > ov[0]) {
            *ms = ov[0];
            *me = ov[1];
            return 1;
        }
        /* an empty match: look again one character on */
        if (ov[0] >= len)
            return 0;
        at = ov[0] + 1;
        while (at < len && ((unsigned char)text[at] & 0xc0) == 0x80)
            at++;
    }
}

int fg_pretoken_next(fg_pretoken_scanner *s, const char *text, size_t len, size_t *at,
                     size_t *start, size_t *end, fg_error *err)
{
    if (s->pending_end) {
        *start = s->pending_start;
        *end = *at = s->pending_end;
        s->pending_end = 0;
        return 1;
    }
    if (*at >= len)
        return 0;
    size_t ms = len, me = len;
    int rc = find_match(s, text, len, *at, &ms, &me, err);
    if (rc < 0)
        return -1;
    if (rc == 0) { /* the rest is a stretch no match covers */
        *start = *at;
        *end = *at = len;
        return 1;
    }
    if (ms > *at) { /* the stretch before the match first, the match next */
        *start = *at;
        *end = *at = ms;
        s->pending_start = ms;
        s->pending_end = me;
        return 1;
    }
    *start = ms;
    *end = *at = me;
    return 1;
}
