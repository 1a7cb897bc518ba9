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
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC, fdopen (the config tests build this file alone) */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "config.h"
#include "core_util.h"
#include "grow_array.h"

/* A config is a page of text; anything near this size is a wrong file (or /dev/zero). */
#define FG_CONFIG_MAX_BYTES (16L * 1024 * 1024)

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

/* "FILE:LINE" in a fresh string. */
static char *make_file_origin(const char *path, int line)
{
    char suffix[16];
    snprintf(suffix, sizeof suffix, ":%d", line);
    return make_prefixed(path, suffix);
}

/* The item named `name` among `count` items of `size` bytes, each a struct whose first
 * member is its char * name (a section's name, an entry's key); NULL when none. */
static void *find_named(void *items, size_t count, size_t size, const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        char *item = (char *)items + i * size;
        if (strcmp(*(char **)item, name) == 0)
            return item;
    }
    return NULL;
}
_Static_assert(offsetof(fg_config_section, name) == 0, "find_named reads the name first");
_Static_assert(offsetof(fg_config_entry, key) == 0, "find_named reads the key first");

static fg_config_section *find_section(const fg_config *cfg, const char *name)
{
    return cfg ? find_named(cfg->sections, cfg->count, sizeof *cfg->sections, name) : NULL;
}

static fg_config_entry *find_entry(const fg_config_section *sec, const char *key)
{
    return sec ? find_named(sec->entries, sec->count, sizeof *sec->entries, key) : NULL;
}

/* Appends a section; takes ownership of `origin` (freed on failure). */
static fg_config_section *add_section(fg_config *cfg, const char *name, int line, char *origin)
{
    char *n = dup_string(name);
    if (!origin || !n ||
        fg_plugin_grow_array(&cfg->sections, &cfg->cap, cfg->count + 1, 8, sizeof *cfg->sections)) {
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
        fg_plugin_grow_array(&sec->entries, &sec->cap, sec->count + 1, 8, sizeof *sec->entries)) {
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
    const char *raw; /* the current line as written, for messages */
    int raw_len;
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
    /* Like inih, an inline comment ends the header: "[a ; b]" has no ']'. */
    const char *close = line + 1;
    while (*close && *close != ']' && !(*close == ';' && is_blank(close[-1])))
        close++;
    if (*close != ']') {
        p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT,
                                 "%s:%d: section header '%.*s' has no closing ']'", path,
                                 p->line, p->raw_len, p->raw);
        return;
    }
    const char *after = close + 1;
    while (is_blank(*after))
        after++;
    if (*after && !is_comment_char(*after)) {
        int at = (int)(after - line);
        p->status = fg_error_set(p->err, FG_INVALID_ARGUMENT,
                                 "%s:%d: unexpected text '%.*s' after the section header", path,
                                 p->line, p->raw_len - at, p->raw + at);
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
                             "%s:%d: expected 'key = value', '[section]' or a comment, found "
                             "'%.*s'", p->cfg->path, p->line, p->raw_len, p->raw);
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
    buf[visible] = '\0';
    p->raw = b; /* messages quote the line as written, without its trailing blanks */
    p->raw_len = (int)visible;
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

static int on_entry_impl(fg_ini_parse *p, const char *name, const char *value);

/* inih's own split of "key = value ; comment" (first '=' or ':', an inline comment starts
 * at ';' after a blank, both sides stripped), for a line longer than inih's fixed buffer. */
static void parse_long_assignment(fg_ini_parse *p, char *line)
{
    char *sep = line;
    while (*sep && *sep != '=' && *sep != ':')
        sep++;
    if (!*sep)
        return; /* check_assignment has already failed it */
    char *key_end = sep;
    while (key_end > line && is_blank(key_end[-1]))
        key_end--;
    *key_end = '\0';
    char *value = sep + 1;
    for (char *s = value; *s; s++)
        if (*s == ';' && s > value && is_blank(s[-1])) {
            *s = '\0';
            break;
        }
    while (is_blank(*value) || *value == '\n')
        value++;
    size_t n = strlen(value);
    while (n > 0 && (is_blank(value[n - 1]) || value[n - 1] == '\n'))
        value[--n] = '\0';
    on_entry_impl(p, line, value);
}

/* A line longer than inih's buffer is normalised and parsed here, and inih gets a blank
 * line in its place: a config fulgur wrote (long paths included) always reads back. */
static void read_long_line(fg_ini_parse *p, const char *b, const char *e)
{
    char *line = malloc((size_t)(e - b) + 2);
    if (!line) {
        parse_fail_oom(p);
        return;
    }
    prepare_line(p, line, b, e);
    if (p->status == FG_OK && line[0] != '[' && !is_comment_char(line[0]) && line[0] != '\n')
        parse_long_assignment(p, line);
    free(line);
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
        read_long_line(p, b, e);
        buf[0] = '\n';
        buf[1] = '\0';
        return p->status == FG_OK ? buf : NULL;
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

/* inih's section argument is ignored: inih truncates long names, the reader keeps them. */
#if INI_HANDLER_LINENO
static int on_entry(void *user, const char *section, const char *name, const char *value,
                    int lineno)
{
    (void)section;
    (void)lineno; /* the reader's count is the same, and also covers headers */
    return on_entry_impl(user, name, value);
}
#else
static int on_entry(void *user, const char *section, const char *name, const char *value)
{
    (void)section;
    return on_entry_impl(user, name, value);
}
#endif

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
    return FG_CREATED(st, cfg, out, fg_config_destroy);
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
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return fg_error_set(err, FG_NOT_FOUND, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: not a regular file (a FIFO, device or folder cannot be a config)",
                            path);
    }
    if (sb.st_size > FG_CONFIG_MAX_BYTES) {
        close(fd);
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: larger than 16 MB (%lld bytes): not a config file", path,
                            (long long)sb.st_size);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: cannot open: %s", path,
                            strerror(errno));
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int oom = buf == NULL;
    while (!oom) {
        if (cap - n < 2) {
            char *p = realloc(buf, cap * 2);
            if (!p) {
                oom = 1;
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0 || n > FG_CONFIG_MAX_BYTES)
            break; /* a file that grew after fstat is cut off and refused */
    }
    fg_status st = FG_OK;
    if (oom) {
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory while reading", path);
    } else if (n > FG_CONFIG_MAX_BYTES) {
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: larger than 16 MB: not a config file",
                          path);
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
        /* `section.key=value` keeps the value as written (the shell delimits it: a
         * prompt's leading space is text); `section.key = value`, blanks around '=' as a
         * config line spells it, drops them, and so does a value of blanks alone */
        val = trim_range(eq + 1, eq + 1 + strlen(eq + 1), &val_len);
        if (val_len && !(eq > assignment && isspace((unsigned char)eq[-1])))
            val = eq + 1, val_len = strlen(eq + 1);
        /* an empty value is the config file's `key =`: it clears a string key, and the
         * schema refuses it where the key's type has no empty value */
        problem = !sec_len ? "empty section" : !key_len ? "empty key" : NULL;
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

fg_status fg_config_set_from(fg_config *cfg, const char *section, const char *key,
                             const char *value, const char *origin, fg_error *err)
{
    if (!cfg || !section || !key || !value || !origin || !*section || !*key)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "fg_config_set_from: section, key, value and origin must be given");
    return set_value(cfg, section, key, value, dup_string(origin), err);
}

void fg_config_move_section_last(fg_config *cfg, const char *section)
{
    fg_config_section *sec = find_section(cfg, section);
    if (!sec)
        return;
    fg_config_section keep = *sec;
    size_t at = (size_t)(sec - cfg->sections);
    memmove(&cfg->sections[at], &cfg->sections[at + 1],
            (cfg->count - at - 1) * sizeof *cfg->sections);
    cfg->sections[cfg->count - 1] = keep;
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

int fg_config_is_true(const fg_config *cfg, const char *section, const char *key)
{
    const char *v = fg_config_get(cfg, section, key);
    int b = 0;
    return v && fg_option_parse_bool(v, &b) == FG_OK && b;
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

/* ---- checking one value against its option -------------------------------------- */

/* Appends as much of `s` as fits; `buf` stays NUL-terminated. */
static void append_text(char *buf, size_t cap, size_t *len, const char *s)
{
    while (*s && *len + 1 < cap)
        buf[(*len)++] = *s++;
    buf[*len] = '\0';
}

/* Bounds in their shortest form: "[0, 1000000]", "[0, 0.5]", "[1, 1e+15]". */
static void format_number(char *buf, size_t cap, double x)
{
    snprintf(buf, cap, "%.15g", x);
}

static int has_range(const fg_option *opt)
{
    return opt->min <= opt->max;
}

static fg_status out_of_range(const fg_option *opt, const char *where, const char *value,
                              fg_error *err)
{
    char lo[48], hi[48];
    format_number(lo, sizeof lo, opt->min);
    format_number(hi, sizeof hi, opt->max);
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s = %s is out of range [%s, %s]", where,
                        value, lo, hi);
}

static fg_status check_int(const fg_option *opt, const char *where, const char *value,
                           fg_error *err)
{
    int64_t v = 0;
    int overflow = 0;
    if (parse_int(value, &v, &overflow) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            overflow ? "%s = '%s' is too large for a 64-bit integer"
                                     : "%s = '%s' is not an integer",
                            where, value);
    if (has_range(opt) && ((double)v < opt->min || (double)v > opt->max))
        return out_of_range(opt, where, value, err);
    return FG_OK;
}

static fg_status check_float(const fg_option *opt, const char *where, const char *value,
                             fg_error *err)
{
    double v = 0;
    if (fg_option_parse_float(value, &v) != FG_OK) {
        char *end = NULL;
        int parsed_whole = *value && (strtod(value, &end), end && *end == '\0');
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            parsed_whole ? "%s = '%s' is not a finite number"
                                         : "%s = '%s' is not a number",
                            where, value);
    }
    if (has_range(opt) && (v < opt->min || v > opt->max))
        return out_of_range(opt, where, value, err);
    return FG_OK;
}

/* The '|'-separated choices as separate strings; *storage and the array are freed by the
 * caller. NULL when out of memory. */
static const char **split_choices(const char *choices, char **storage, size_t *count)
{
    *storage = dup_string(choices);
    size_t n = 1;
    for (const char *s = choices; *s; s++)
        n += *s == '|';
    const char **items = *storage ? malloc(n * sizeof *items) : NULL;
    if (!items) {
        free(*storage);
        *storage = NULL;
        return NULL;
    }
    char *s = *storage;
    items[0] = s;
    size_t k = 1;
    for (; *s; s++)
        if (*s == '|') {
            *s = '\0';
            items[k++] = s + 1;
        }
    *count = n;
    return items;
}

static int is_choice(const char *choices, const char *value)
{
    size_t len = strlen(value);
    for (const char *s = choices;;) {
        const char *bar = strchr(s, '|');
        size_t n = bar ? (size_t)(bar - s) : strlen(s);
        if (n == len && strncmp(s, value, n) == 0)
            return 1;
        if (!bar)
            return 0;
        s = bar + 1;
    }
}

static fg_status check_enum(const fg_option *opt, const char *where, const char *value,
                            fg_error *err)
{
    if (!opt->choices || is_choice(opt->choices, value))
        return FG_OK; /* a schema without choices cannot be checked further */
    char *storage = NULL;
    size_t n = 0;
    const char **items = split_choices(opt->choices, &storage, &n);
    const char *near = items ? fg_nearest(value, items, n) : NULL;
    fg_status st;
    if (near)
        st = fg_error_set(err, FG_INVALID_ARGUMENT,
                          "%s = '%s' is not one of %s; did you mean '%s'?", where, value,
                          opt->choices, near);
    else
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s = '%s' is not one of %s", where, value,
                          opt->choices);
    free(items);
    free(storage);
    return st;
}

static fg_status check_list(const char *where, const char *value, fg_error *err)
{
    size_t n = 0;
    trim_range(value, value + strlen(value), &n);
    if (n == 0)
        return FG_OK; /* the empty list */
    size_t item = 1;
    for (const char *s = value;; item++) {
        const char *comma = strchr(s, ',');
        const char *e = comma ? comma : s + strlen(s);
        trim_range(s, e, &n);
        if (n == 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s = '%s' has an empty item at position %zu; expected "
                                "comma-separated values",
                                where, value, item);
        if (!comma)
            break;
        s = comma + 1;
    }
    return FG_OK;
}

fg_status fg_option_check(const fg_option *opt, const char *value, const char *origin,
                          const char *section, fg_error *err)
{
    if (!opt || !opt->key)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: option without a key",
                            origin ? origin : "?");
    if (!value)
        value = "";
    char where[FG_ERROR_MESSAGE_MAX];
    int w = section ? snprintf(where, sizeof where, "%s: [%s] %s", origin ? origin : "?",
                               section, opt->key)
                    : snprintf(where, sizeof where, "%s: %s", origin ? origin : "?", opt->key);
    if (w < 0)
        where[0] = '\0';
    int b = 0;
    switch (opt->type) {
    case FG_OPT_BOOL:
        if (fg_option_parse_bool(value, &b) != FG_OK)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s = '%s' is not a boolean (true|false|1|0|yes|no|on|off)",
                                where, value);
        return FG_OK;
    case FG_OPT_INT: return check_int(opt, where, value, err);
    case FG_OPT_FLOAT: return check_float(opt, where, value, err);
    case FG_OPT_ENUM: return check_enum(opt, where, value, err);
    case FG_OPT_LIST: return check_list(where, value, err);
    case FG_OPT_STRING: return FG_OK;
    }
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: the schema gives unknown type %u", where,
                        (unsigned)opt->type);
}

/* ---- validating a section against schemas --------------------------------------- */

/* Option i of a schema, read with the schema's own stride. Fields beyond the layout the
 * plugin was built with read as "absent": no range, no choices, not required. */
static int read_option(const fg_schema *s, size_t i, fg_option *out)
{
    const char *p = (const char *)s->options + i * s->option_size;
    size_t have = s->option_size < sizeof *out ? s->option_size : sizeof *out;
    memset(out, 0, sizeof *out);
    memcpy(out, p, have);
#define FG_OPTION_HAS(field) (offsetof(fg_option, field) + sizeof out->field <= s->option_size)
    if (!FG_OPTION_HAS(key))
        out->key = NULL;
    if (!FG_OPTION_HAS(type))
        out->type = 0;
    if (!FG_OPTION_HAS(default_value))
        out->default_value = ""; /* too old a layout to say "required" */
    if (!FG_OPTION_HAS(min) || !FG_OPTION_HAS(max)) {
        out->min = 1;
        out->max = 0;
    }
    if (!FG_OPTION_HAS(choices))
        out->choices = NULL;
    if (!FG_OPTION_HAS(help))
        out->help = NULL;
#undef FG_OPTION_HAS
    return out->key != NULL;
}

static int find_option(const fg_schema *schemas, size_t n, const char *key, fg_option *out)
{
    for (size_t s = 0; s < n; s++)
        for (size_t i = 0; i < schemas[s].count; i++)
            if (read_option(&schemas[s], i, out) && strcmp(out->key, key) == 0)
                return 1;
    return 0;
}

static fg_status check_schemas(const char *section, const fg_schema *schemas, size_t n,
                               fg_error *err)
{
    if (n && !schemas)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s]: schema list is NULL", section);
    for (size_t s = 0; s < n; s++)
        if (schemas[s].count &&
            (!schemas[s].options || schemas[s].option_size < sizeof(const char *)))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "[%s]: the option schema of %s is malformed (option_size %zu)",
                                section, schemas[s].owner ? schemas[s].owner : "?",
                                schemas[s].option_size);
    return FG_OK;
}

static fg_status unknown_key(const char *origin, const char *section, const char *key,
                             const fg_schema *schemas, size_t n, fg_error *err)
{
    size_t total = 0;
    for (size_t s = 0; s < n; s++)
        total += schemas[s].count;
    const char **keys = total ? malloc(total * sizeof *keys) : NULL;
    size_t k = 0;
    fg_option opt;
    for (size_t s = 0; keys && s < n; s++)
        for (size_t i = 0; i < schemas[s].count; i++)
            if (read_option(&schemas[s], i, &opt))
                keys[k++] = opt.key;
    const char *near = keys ? fg_nearest(key, keys, k) : NULL;
    fg_status st;
    if (total && !keys) { /* out of memory: no suggestion, but still the right error */
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: unknown key '%s' in [%s]", origin, key,
                          section);
    } else if (near) {
        st = fg_error_set(err, FG_INVALID_ARGUMENT,
                          "%s: unknown key '%s' in [%s]; did you mean '%s'?", origin, key,
                          section, near);
    } else if (k == 0) {
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: unknown key '%s' in [%s]; [%s] takes no keys",
                          origin, key, section, section);
    } else {
        char list[320];
        size_t len = 0, shown = 0;
        list[0] = '\0';
        for (size_t i = 0; i < k && shown < 12; i++) {
            int seen = 0;
            for (size_t j = 0; j < i && !seen; j++)
                seen = strcmp(keys[j], keys[i]) == 0;
            if (seen)
                continue;
            if (shown++)
                append_text(list, sizeof list, &len, ", ");
            append_text(list, sizeof list, &len, keys[i]);
        }
        if (shown < k)
            append_text(list, sizeof list, &len, ", ...");
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: unknown key '%s' in [%s]; valid keys: %s",
                          origin, key, section, list);
    }
    free(keys);
    return st;
}

static fg_status missing_required(const fg_config *cfg, const char *section,
                                  const fg_config_section *sec, const fg_schema *schemas,
                                  size_t n, fg_error *err)
{
    fg_option opt;
    for (size_t s = 0; s < n; s++)
        for (size_t i = 0; i < schemas[s].count; i++) {
            if (!read_option(&schemas[s], i, &opt) || opt.default_value ||
                find_entry(sec, opt.key))
                continue;
            if (sec && sec->line > 0)
                return fg_error_set(err, FG_INVALID_ARGUMENT,
                                    "%s:%d: [%s] is missing required key '%s'", cfg->path,
                                    sec->line, section, opt.key);
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: [%s] is missing required key '%s'", cfg->path, section,
                                opt.key);
        }
    return FG_OK;
}

fg_status fg_config_validate_section(const fg_config *cfg, const char *section,
                                     const fg_schema *schemas, size_t schema_count,
                                     fg_error *err)
{
    if (!cfg || !section)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "fg_config_validate_section: config or section is NULL");
    fg_status st = check_schemas(section, schemas, schema_count, err);
    if (st != FG_OK)
        return st;
    const fg_config_section *sec = find_section(cfg, section);
    for (size_t i = 0; sec && i < sec->count; i++) {
        const fg_config_entry *e = &sec->entries[i];
        fg_option opt;
        if (!find_option(schemas, schema_count, e->key, &opt))
            return unknown_key(e->origin, section, e->key, schemas, schema_count, err);
        st = fg_option_check(&opt, e->value, e->origin, section, err);
        if (st != FG_OK)
            return st;
    }
    return missing_required(cfg, section, sec, schemas, schema_count, err);
}

/* ---- section names ---------------------------------------------------------------- */

/* Appends "[NAME" + close for each non-NULL name to the list, ", " between them. */
static void append_section_names(char *list, size_t cap, size_t *len, const char *const *names,
                                 size_t count, const char *close)
{
    for (size_t i = 0; i < count; i++) {
        if (!names[i])
            continue;
        append_text(list, cap, len, *len ? ", [" : "[");
        append_text(list, cap, len, names[i]);
        append_text(list, cap, len, close);
    }
}

static fg_status unknown_section(const fg_config_section *sec, const char *const *known,
                                 size_t known_count, const char *const *prefixes,
                                 size_t prefix_count, fg_error *err)
{
    const char *near = fg_nearest(sec->name, known, known_count);
    if (near)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: unknown section [%s]; did you mean [%s]?", sec->origin,
                            sec->name, near);
    /* "layr.fc1": compare the part up to the first '.' with the prefixes. */
    const char *dot = strchr(sec->name, '.');
    char *head = dot ? dup_range(sec->name, (size_t)(dot - sec->name) + 1) : NULL;
    const char *near_prefix = head ? fg_nearest(head, prefixes, prefix_count) : NULL;
    free(head);
    if (near_prefix)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: unknown section [%s]; did you mean [%s%s]?", sec->origin,
                            sec->name, near_prefix, dot + 1);
    char list[320];
    size_t len = 0;
    list[0] = '\0';
    append_section_names(list, sizeof list, &len, known, known_count, "]");
    append_section_names(list, sizeof list, &len, prefixes, prefix_count, "NAME]");
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: unknown section [%s]; known sections: %s",
                        sec->origin, sec->name, len ? list : "(none)");
}

fg_status fg_config_check_sections(const fg_config *cfg, const char *const *known,
                                   size_t known_count, const char *const *prefixes,
                                   size_t prefix_count, fg_error *err)
{
    if (!cfg || (known_count && !known) || (prefix_count && !prefixes))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fg_config_check_sections: NULL argument");
    for (size_t s = 0; s < cfg->count; s++) {
        const fg_config_section *sec = &cfg->sections[s];
        int ok = 0;
        for (size_t i = 0; i < known_count && !ok; i++)
            ok = known[i] && strcmp(sec->name, known[i]) == 0;
        for (size_t i = 0; i < prefix_count && !ok; i++) {
            size_t n = prefixes[i] ? strlen(prefixes[i]) : 0;
            if (n == 0 || strncmp(sec->name, prefixes[i], n) != 0)
                continue;
            if (sec->name[n] == '\0')
                return fg_error_set(err, FG_INVALID_ARGUMENT,
                                    "%s: section [%s] needs a name after '%s', as in [%sNAME]",
                                    sec->origin, sec->name, prefixes[i], prefixes[i]);
            ok = 1;
        }
        if (!ok)
            return unknown_section(sec, known, known_count, prefixes, prefix_count, err);
    }
    return FG_OK;
}
