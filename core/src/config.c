/* INI configuration: parsing (inih), command-line overrides, schema validation.
 *
 * inih splits `key = value` lines; everything it does not report is done by our line
 * reader, which feeds inih one physical line at a time and so always knows the line
 * number: section headers (inih reports no event for them, so empty and duplicate
 * sections would be invisible), lines that are neither comment, header nor assignment,
 * and over-long lines. The reader also normalises each line so inih's configurable
 * behaviour cannot surprise a user:
 *   - leading whitespace is dropped, so an indented key is a key and never a Python-style
 *     continuation of the previous value (multi-line values are not supported);
 *   - '#' after whitespace is turned into ';', so both start an inline comment, exactly as
 *     both start a whole-line comment;
 *   - a UTF-8 byte order mark on line 1 is skipped.
 * inih's global knobs (ini_max_line, ...) are never written: they are process-wide. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "config.h"

/* ---- storage --------------------------------------------------------------------- */

typedef struct fg_config_entry {
    char *key;
    char *value;
    char *origin; /* "FILE:LINE", "command line: ARG" or "default" */
} fg_config_entry;

typedef struct fg_config_section {
    char *name;
    char *origin;
    int line; /* 0 when created by an override or from code */
    fg_config_entry *entries;
    size_t count, cap;
} fg_config_section;

struct fg_config {
    char *path;
    fg_config_section *sections;
    size_t count, cap;
};

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static char *dup_range(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* "FILE:LINE" in a fresh string. */
static char *make_file_origin(const char *path, int line)
{
    int n = snprintf(NULL, 0, "%s:%d", path, line);
    char *s = n < 0 ? NULL : malloc((size_t)n + 1);
    if (s)
        snprintf(s, (size_t)n + 1, "%s:%d", path, line);
    return s;
}

static char *make_prefixed(const char *prefix, const char *text)
{
    size_t a = strlen(prefix), b = strlen(text);
    char *s = malloc(a + b + 1);
    if (s) {
        memcpy(s, prefix, a);
        memcpy(s + a, text, b + 1);
    }
    return s;
}

static int grow(void **items, size_t *cap, size_t count, size_t item_size)
{
    if (count < *cap)
        return 1;
    size_t next = *cap ? *cap * 2 : 8;
    void *p = realloc(*items, next * item_size);
    if (!p)
        return 0;
    *items = p;
    *cap = next;
    return 1;
}

static fg_config_section *find_section(const fg_config *cfg, const char *name)
{
    if (!cfg || !name)
        return NULL;
    for (size_t i = 0; i < cfg->count; i++)
        if (strcmp(cfg->sections[i].name, name) == 0)
            return &cfg->sections[i];
    return NULL;
}

static fg_config_entry *find_entry(const fg_config_section *sec, const char *key)
{
    if (!sec || !key)
        return NULL;
    for (size_t i = 0; i < sec->count; i++)
        if (strcmp(sec->entries[i].key, key) == 0)
            return &sec->entries[i];
    return NULL;
}

/* Appends a section; takes ownership of `origin` (freed on failure). */
static fg_config_section *add_section(fg_config *cfg, const char *name, int line, char *origin)
{
    char *n = dup_string(name);
    if (!origin || !n ||
        !grow((void **)&cfg->sections, &cfg->cap, cfg->count, sizeof *cfg->sections)) {
        free(origin);
        free(n);
        return NULL;
    }
    fg_config_section *sec = &cfg->sections[cfg->count++];
    memset(sec, 0, sizeof *sec);
    sec->name = n;
    sec->origin = origin;
    sec->line = line;
    return sec;
}

/* Appends an entry; takes ownership of `origin` (freed on failure). */
static int add_entry(fg_config_section *sec, const char *key, const char *value, char *origin)
{
    char *k = dup_string(key), *v = dup_string(value);
    if (!origin || !k || !v ||
        !grow((void **)&sec->entries, &sec->cap, sec->count, sizeof *sec->entries)) {
        free(origin);
        free(k);
        free(v);
        return 0;
    }
    sec->entries[sec->count++] = (fg_config_entry){ .key = k, .value = v, .origin = origin };
    return 1;
}

/* Replaces an entry's value and origin; takes ownership of `origin` (freed on failure). */
static int replace_entry(fg_config_entry *e, const char *value, char *origin)
{
    char *v = dup_string(value);
    if (!origin || !v) {
        free(origin);
        free(v);
        return 0;
    }
    free(e->value);
    free(e->origin);
    e->value = v;
    e->origin = origin;
    return 1;
}

static fg_config *config_create(const char *path)
{
    fg_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return NULL;
    cfg->path = dup_string(path);
    if (!cfg->path) {
        free(cfg);
        return NULL;
    }
    return cfg;
}

void fg_config_destroy(fg_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->count; i++) {
        fg_config_section *sec = &cfg->sections[i];
        for (size_t j = 0; j < sec->count; j++) {
            free(sec->entries[j].key);
            free(sec->entries[j].value);
            free(sec->entries[j].origin);
        }
        free(sec->entries);
        free(sec->name);
        free(sec->origin);
    }
    free(cfg->sections);
    free(cfg->path);
    free(cfg);
}

/* ---- parsing --------------------------------------------------------------------- */

typedef struct fg_ini_parse {
    fg_config *cfg;
    fg_error *err;
    fg_status status; /* FG_OK until the first error; parsing stops there */
    const char *pos, *end;
    int line;
    long current; /* index of the current section, -1 before the first header */
} fg_ini_parse;

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static int is_comment_char(char c)
{
    return c == ';' || c == '#';
}

static void parse_fail_oom(fg_ini_parse *p)
{
    p->status = fg_error_set(p->err, FG_OUT_OF_MEMORY, "%s:%d: out of memory", p->cfg->path,
                             p->line);
}

/* "[name]": records the section, or fails on a broken or repeated header. */
static void parse_section_header(fg_ini_parse *p, const char *line)
{
    const char *path = p->cfg->path;
    const char *close = strchr(line, ']');
    if (!close) {
        p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT,
                                 "%s:%d: section header '%s' has no closing ']'", path, p->line,
                                 line);
        return;
    }
    const char *after = close + 1;
    while (is_blank(*after))
        after++;
    if (*after && !is_comment_char(*after)) {
        p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT,
                                 "%s:%d: unexpected text '%s' after the section header", path,
                                 p->line, after);
        return;
    }
    const char *b = line + 1, *e = close;
    while (b < e && is_blank(*b))
        b++;
    while (e > b && is_blank(e[-1]))
        e--;
    if (b == e) {
        p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT, "%s:%d: empty section name []",
                                 path, p->line);
        return;
    }
    char *name = dup_range(b, (size_t)(e - b));
    if (!name) {
        parse_fail_oom(p);
        return;
    }
    const fg_config_section *first = find_section(p->cfg, name);
    if (first) {
        p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT,
                                 "%s:%d: duplicate section [%s] (first at %s)", path, p->line,
                                 name, first->origin);
    } else if (!add_section(p->cfg, name, p->line, make_file_origin(path, p->line))) {
        parse_fail_oom(p);
    } else {
        p->current = (long)p->cfg->count - 1;
    }
    free(name);
}

/* A line that is not a header or comment must be an assignment; inih would only report
 * its number, so the reader names the problem itself. */
static void check_assignment(fg_ini_parse *p, const char *line)
{
    for (const char *s = line; *s; s++) {
        if (*s == '=' || *s == ':')
            return;
        if (*s == ';' && s > line && is_blank(s[-1]))
            break;
    }
    p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT,
                             "%s:%d: expected 'key = value', '[section]' or a comment, found '%s'",
                             p->cfg->path, p->line, line);
}

/* Normalises one line into buf (see the top of the file) and inspects it. */
static void prepare_line(fg_ini_parse *p, char *buf, const char *b, const char *e)
{
    if (p->line == 1 && e - b >= 3 && (unsigned char)b[0] == 0xEF &&
        (unsigned char)b[1] == 0xBB && (unsigned char)b[2] == 0xBF)
        b += 3;
    while (b < e && (is_blank(*b)))
        b++;
    size_t n = 0;
    for (const char *s = b; s < e; s++, n++)
        buf[n] = (*s == '#' && n > 0 && is_blank(buf[n - 1])) ? ';' : *s;
    buf[n] = '\0';
    size_t visible = n;
    while (visible > 0 && is_blank(buf[visible - 1]))
        visible--;
    char saved = buf[visible];
    buf[visible] = '\0'; /* messages quote the line without its trailing blanks */
    if (visible == 0 || is_comment_char(buf[0]))
        ; /* blank or comment */
    else if (buf[0] == '[')
        parse_section_header(p, buf);
    else
        check_assignment(p, buf);
    buf[visible] = saved;
    buf[n] = '\n';
    buf[n + 1] = '\0';
}

/* ini_reader: one physical line per call; NULL at the end or after the first error. */
static char *read_line(char *buf, int size, void *stream)
{
    fg_ini_parse *p = stream;
    if (p->status != FG_OK || p->pos >= p->end || size < 3)
        return NULL;
    const char *b = p->pos;
    const char *nl = memchr(b, '\n', (size_t)(p->end - b));
    const char *e = nl ? nl : p->end;
    p->pos = nl ? nl + 1 : p->end;
    p->line++;
    const char *first = b;
    while (first < e && is_blank(*first))
        first++;
    /* Room for the line, its '\n' and the NUL; inih would cut a longer line in two. */
    if (e - first > (long)size - 2) {
        p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT,
                                 "%s:%d: line is longer than %d characters", p->cfg->path,
                                 p->line, size - 2);
        return NULL;
    }
    prepare_line(p, buf, b, e);
    return p->status == FG_OK ? buf : NULL;
}

static int on_entry_impl(fg_ini_parse *p, const char *name, const char *value)
{
    const char *path = p->cfg->path;
    if (p->status != FG_OK)
        return 0;
    if (!*name) {
        p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT, "%s:%d: missing key before '='",
                                 path, p->line);
        return 0;
    }
    if (p->current < 0) {
        p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT,
                                 "%s:%d: key '%s' is outside any section; put it under a "
                                 "[section] header", path, p->line, name);
        return 0;
    }
    fg_config_section *sec = &p->cfg->sections[p->current];
    const fg_config_entry *first = find_entry(sec, name);
    if (first) {
        p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT,
                                 "%s:%d: duplicate key '%s' in [%s] (first set at %s)", path,
                                 p->line, name, sec->name, first->origin);
        return 0;
    }
    if (!add_entry(sec, name, value ? value : "", make_file_origin(path, p->line))) {
        parse_fail_oom(p);
        return 0;
    }
    return 1;
}

#if INI_HANDLER_LINENO
static int on_entry(void *user, const char *section, const char *name, const char *value,
                    int lineno)
{
    (void)lineno; /* the reader's count is the same, and also covers headers */
#else
static int on_entry(void *user, const char *section, const char *name, const char *value)
{
#endif
    (void)section; /* inih truncates section names; the reader tracks the full one */
    return on_entry_impl(user, name, value);
}

static fg_status parse_text(const char *text, size_t len, const char *name, fg_config **out,
                            fg_error *err)
{
    *out = NULL;
    fg_config *cfg = config_create(name);
    if (!cfg)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", name);
    fg_ini_parse p = { .cfg = cfg, .err = err, .status = FG_OK, .pos = text,
                       .end = text + len, .line = 0, .current = -1 };
    int rc = ini_parse_stream(read_line, &p, on_entry, &p);
    fg_status st = p.status;
    if (st == FG_OK && rc > 0) /* a case the reader does not foresee: still name the line */
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: syntax error", name, rc);
    else if (st == FG_OK && rc < 0)
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory while parsing", name);
    if (st != FG_OK) {
        fg_config_destroy(cfg);
        return st;
    }
    *out = cfg;
    return FG_OK;
}

fg_status fg_config_parse_string(const char *text, const char *name, fg_config **out,
                                 fg_error *err)
{
    if (!out)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fg_config_parse_string: out is NULL");
    *out = NULL;
    if (!name)
        name = "<string>";
    if (!text)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: no text to parse", name);
    return parse_text(text, strlen(text), name, out, err);
}

/* The whole file in memory, NUL-terminated; a NUL byte inside is an error. */
static fg_status read_file(const char *path, char **text, size_t *len, fg_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fg_error_set(err, FG_NOT_FOUND, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    fg_status st = FG_OK;
    while (buf) {
        if (cap - n < 2) {
            char *p = realloc(buf, cap * 2);
            if (!p)
                break;
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (!buf || cap - n < 1) {
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory while reading", path);
    } else if (ferror(f)) {
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: read error: %s", path, strerror(errno));
    } else {
        buf[n] = '\0';
        const char *nul = memchr(buf, '\0', n);
        if (nul) {
            int line = 1;
            for (const char *s = buf; s < nul; s++)
                line += *s == '\n';
            st = fg_error_set(err, FG_INVALID_ARGUMENT,
                              "%s:%d: contains a NUL byte (not a text file?)", path, line);
        }
    }
    fclose(f);
    if (st != FG_OK) {
        free(buf);
        return st;
    }
    *text = buf;
    *len = n;
    return FG_OK;
}

fg_status fg_config_load(const char *path, fg_config **out, fg_error *err)
{
    if (!out || !path)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fg_config_load: path or out is NULL");
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    fg_status st = read_file(path, &text, &len, err);
    if (st != FG_OK)
        return st;
    st = parse_text(text, len, path, out, err);
    free(text);
    return st;
}

/* ---- setting values -------------------------------------------------------------- */

/* Sets section.key = value with `origin` (owned; freed on failure). A new section gets
 * the same origin and line 0. */
static fg_status set_value(fg_config *cfg, const char *section, const char *key,
                           const char *value, char *origin, fg_error *err)
{
    fg_config_section *sec = find_section(cfg, section);
    if (!sec) {
        char *sec_origin = origin ? dup_string(origin) : NULL;
        sec = add_section(cfg, section, 0, sec_origin);
        if (!sec) {
            free(origin);
            return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", cfg->path);
        }
    }
    fg_config_entry *e = find_entry(sec, key);
    int ok = e ? replace_entry(e, value, origin) : add_entry(sec, key, value, origin);
    if (!ok)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", cfg->path);
    return FG_OK;
}

static const char *trim_range(const char *b, const char *e, size_t *len)
{
    while (b < e && isspace((unsigned char)*b))
        b++;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    *len = (size_t)(e - b);
    return b;
}

fg_status fg_config_override(fg_config *cfg, const char *assignment, fg_error *err)
{
    if (!cfg || !assignment)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fg_config_override: NULL argument");
    const char *eq = strchr(assignment, '=');
    const char *problem = NULL;
    const char *dot = NULL;
    if (!eq) {
        problem = "missing '='";
    } else {
        for (const char *s = assignment; s < eq; s++)
            if (*s == '.')
                dot = s;
        if (!dot)
            problem = "missing '.' between section and key";
    }
    size_t sec_len = 0, key_len = 0, val_len = 0;
    const char *sec = NULL, *key = NULL, *val = NULL;
    if (!problem) {
        sec = trim_range(assignment, dot, &sec_len);
        key = trim_range(dot + 1, eq, &key_len);
        val = trim_range(eq + 1, eq + 1 + strlen(eq + 1), &val_len);
        problem = !sec_len ? "empty section" : !key_len ? "empty key" : !val_len ? "empty value"
                                                                                 : NULL;
    }
    if (problem)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "invalid override '%s': %s; expected the form section.key=value",
                            assignment, problem);

    char *s = dup_range(sec, sec_len), *k = dup_range(key, key_len), *v = dup_range(val, val_len);
    char *origin = make_prefixed("command line: ", assignment);
    fg_status st;
    if (!s || !k || !v || !origin) {
        free(origin);
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for override '%s'", assignment);
    } else {
        st = set_value(cfg, s, k, v, origin, err);
    }
    free(s);
    free(k);
    free(v);
    return st;
}

fg_status fg_config_set(fg_config *cfg, const char *section, const char *key,
                        const char *value, fg_error *err)
{
    if (!cfg || !section || !key || !value || !*section || !*key)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "fg_config_set: section, key and value must be given");
    return set_value(cfg, section, key, value, dup_string("default"), err);
}

/* ---- reading --------------------------------------------------------------------- */

const char *fg_config_path(const fg_config *cfg)
{
    return cfg ? cfg->path : NULL;
}

size_t fg_config_section_count(const fg_config *cfg)
{
    return cfg ? cfg->count : 0;
}

const char *fg_config_section_name(const fg_config *cfg, size_t i)
{
    return cfg && i < cfg->count ? cfg->sections[i].name : NULL;
}

int fg_config_has_section(const fg_config *cfg, const char *section)
{
    return find_section(cfg, section) != NULL;
}

int fg_config_section_line(const fg_config *cfg, const char *section)
{
    const fg_config_section *sec = find_section(cfg, section);
    return sec ? sec->line : 0;
}

size_t fg_config_entry_count(const fg_config *cfg, const char *section)
{
    const fg_config_section *sec = find_section(cfg, section);
    return sec ? sec->count : 0;
}

const char *fg_config_entry_key(const fg_config *cfg, const char *section, size_t i)
{
    const fg_config_section *sec = find_section(cfg, section);
    return sec && i < sec->count ? sec->entries[i].key : NULL;
}

const char *fg_config_get(const fg_config *cfg, const char *section, const char *key)
{
    const fg_config_entry *e = find_entry(find_section(cfg, section), key);
    return e ? e->value : NULL;
}

const char *fg_config_origin(const fg_config *cfg, const char *section, const char *key)
{
    const fg_config_section *sec = find_section(cfg, section);
    if (!sec)
        return NULL;
    if (!key)
        return sec->origin;
    const fg_config_entry *e = find_entry(sec, key);
    return e ? e->origin : NULL;
}

/* ---- typed values ---------------------------------------------------------------- */

static int equals_ignore_case(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
    return *a == *b;
}

fg_status fg_option_parse_bool(const char *value, int *out)
{
    static const char *const truths[] = { "true", "1", "yes", "on" };
    static const char *const lies[] = { "false", "0", "no", "off" };
    if (!value || !out)
        return FG_INVALID_ARGUMENT;
    for (size_t i = 0; i < 4; i++) {
        if (equals_ignore_case(value, truths[i])) {
            *out = 1;
            return FG_OK;
        }
        if (equals_ignore_case(value, lies[i])) {
            *out = 0;
            return FG_OK;
        }
    }
    return FG_INVALID_ARGUMENT;
}

/* Full-string base-10 integer; *overflow tells "too large" from "not a number". */
static fg_status parse_int(const char *value, int64_t *out, int *overflow)
{
    *overflow = 0;
    if (!value || !out || !*value || isspace((unsigned char)*value))
        return FG_INVALID_ARGUMENT;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (end == value || *end != '\0')
        return FG_INVALID_ARGUMENT;
    if (errno == ERANGE) {
        *overflow = 1;
        return FG_INVALID_ARGUMENT;
    }
    *out = (int64_t)v;
    return FG_OK;
}

fg_status fg_option_parse_int(const char *value, int64_t *out)
{
    int overflow;
    return parse_int(value, out, &overflow);
}

fg_status fg_option_parse_float(const char *value, double *out)
{
    if (!value || !out || !*value || isspace((unsigned char)*value))
        return FG_INVALID_ARGUMENT;
    char *end = NULL;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || *end != '\0' || !isfinite(v))
        return FG_INVALID_ARGUMENT;
    *out = v;
    return FG_OK;
}
