/* Reading a CSV file: the bytes, then row by row (split into fields in place), the header
 * resolving the target and feature columns by name, then every row's cells parsed. */
#define _POSIX_C_SOURCE 200809L

#include "csv_table.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CSV_MAX_CLASSES 65535
#define CSV_NAMES_IN_MESSAGE 200 /* bytes of the column list an unknown-name message shows */

typedef struct csv_reader {
    const csv_spec *spec;
    char *text;          /* the whole file, NUL-terminated; fields point into it */
    char *cursor;        /* start of the next line */
    int64_t line;        /* the line the current row is on (1-based) */
    char **fields;       /* the current row */
    int nfields;
    int cap;
    char **names;        /* (ncols) the header */
    int ncols;
    int *feature_cols;   /* (nfeat) column index of each feature */
    int nfeat;
    int target_col;
} csv_reader;

static void reader_free(csv_reader *r)
{
    free(r->text);
    free(r->fields);
    for (int i = 0; r->names && i < r->ncols; i++)
        free(r->names[i]);
    free(r->names);
    free(r->feature_cols);
}

static fg_status read_file(csv_reader *r, fg_error *err)
{
    const char *path = r->spec->path;
    struct stat sb; /* a FIFO would block fopen and a device never end: refused first */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: %s: not a regular file (a FIFO, "
                            "device or folder cannot be a data file)", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: %s: cannot open: %s", path,
                            strerror(errno));
    size_t cap = 1 << 16, size = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + size, 1, cap - size - 1, f)) > 0) {
        size += n;
        if (size + 1 == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger)
                free(buf);
            buf = bigger;
            cap *= 2;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (!buf)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "csv: %s: out of memory reading the file",
                            path);
    if (failed) {
        free(buf);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: %s: read error", path);
    }
    buf[size] = '\0';
    if (strlen(buf) != size) {
        free(buf);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: %s: holds a NUL byte: not a text "
                            "file", path);
    }
    r->text = buf;
    r->cursor = buf + (size >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0);
    return FG_OK;
}

/* ---- fields -------------------------------------------------------------------------- */

static int is_blank(char c, char delimiter)
{
    return c == ' ' || (c == '\t' && delimiter != '\t');
}

static fg_status push_field(csv_reader *r, char *field, fg_error *err)
{
    if (r->nfields == r->cap) {
        int cap = r->cap ? 2 * r->cap : 32;
        char **fields = realloc(r->fields, (size_t)cap * sizeof *fields);
        if (!fields)
            return fg_error_set(err, FG_OUT_OF_MEMORY, "csv: %s: out of memory", r->spec->path);
        r->fields = fields;
        r->cap = cap;
    }
    r->fields[r->nfields++] = field;
    return FG_OK;
}

/* A quoted field from p (at the opening quote): unescaped in place. *next is where the
 * text after the field starts. */
static fg_status quoted_field(csv_reader *r, char *p, char **field, char **next, fg_error *err)
{
    char *w = p, *start = p;
    p++;
    for (;;) {
        if (*p == '\0')
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "csv: %s:%lld: field %d: a quote is not closed (a field may "
                                "not span lines)", r->spec->path, (long long)r->line,
                                r->nfields + 1);
        if (*p == '"' && p[1] == '"') {
            *w++ = '"';
            p += 2;
        } else if (*p == '"') {
            p++;
            break;
        } else {
            *w++ = *p++;
        }
    }
    while (is_blank(*p, r->spec->delimiter))
        p++;
    if (*p != '\0' && *p != r->spec->delimiter)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "csv: %s:%lld: field %d: text after the closing quote",
                            r->spec->path, (long long)r->line, r->nfields + 1);
    *w = '\0'; /* w < p: nothing unread is overwritten */
    *field = start;
    *next = p;
    return FG_OK;
}

/* Splits the NUL-terminated line into r->fields, in place. */
static fg_status split_fields(csv_reader *r, char *p, fg_error *err)
{
    const char d = r->spec->delimiter;
    r->nfields = 0;
    for (;;) {
        while (is_blank(*p, d))
            p++;
        char *field = p, *next = p;
        fg_status st = FG_OK;
        int quoted = *p == '"';
        if (quoted) {
            st = quoted_field(r, p, &field, &next, err);
        } else {
            while (*next != '\0' && *next != d)
                next++;
        }
        if (st != FG_OK)
            return st;
        int more = *next == d; /* read before the terminator below may overwrite it */
        if (!quoted) {
            char *end = next;
            while (end > field && is_blank(end[-1], d))
                end--;
            *end = '\0';
        }
        if ((st = push_field(r, field, err)) != FG_OK)
            return st;
        if (!more)
            return FG_OK;
        p = next + 1;
    }
}

/* The next non-blank line split into fields; *more = 0 at the end of the file. */
static fg_status next_row(csv_reader *r, int *more, fg_error *err)
{
    while (*r->cursor != '\0') {
        char *line = r->cursor, *end = strchr(line, '\n');
        r->cursor = end ? end + 1 : line + strlen(line);
        if (end)
            *end = '\0';
        r->line++;
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\r')
            line[--n] = '\0';
        const char *q = line;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q == '\0')
            continue;
        *more = 1;
        return split_fields(r, line, err);
    }
    *more = 0;
    return FG_OK;
}

/* ---- the header ---------------------------------------------------------------------- */

static int column_of(const csv_reader *r, const char *name)
{
    for (int i = 0; i < r->ncols; i++)
        if (strcmp(r->names[i], name) == 0)
            return i;
    return -1;
}

/* "a, b, c" of the header, shortened to fit a message. */
static void column_list(const csv_reader *r, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->ncols && used + 4 < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", r->names[i]);
        if (n < 0 || (size_t)n >= size - used) {
            snprintf(buf + (size > 4 ? size - 4 : 0), size > 4 ? 4 : size, "...");
            return;
        }
        used += (size_t)n;
    }
}

static fg_status unknown_column(const csv_reader *r, const char *what, const char *name,
                                fg_error *err)
{
    char columns[CSV_NAMES_IN_MESSAGE];
    column_list(r, columns, sizeof columns);
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "csv: %s:%lld: no column named \"%s\" (the %s); the header has: %s",
                        r->spec->path, (long long)r->line, name, what, columns);
}

static fg_status read_header(csv_reader *r, fg_error *err)
{
    int more = 0;
    fg_status st = next_row(r, &more, err);
    if (st != FG_OK)
        return st;
    if (!more)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: %s: empty file: no header row",
                            r->spec->path);
    r->names = calloc((size_t)r->nfields, sizeof *r->names);
    if (!r->names)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "csv: %s: out of memory", r->spec->path);
    for (int i = 0; i < r->nfields; i++) {
        if (!(r->names[i] = strdup(r->fields[i])))
            return fg_error_set(err, FG_OUT_OF_MEMORY, "csv: %s: out of memory", r->spec->path);
        r->ncols = i + 1;
        if (column_of(r, r->names[i]) != i)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "csv: %s:%lld: the header names column \"%s\" twice (columns %d "
                                "and %d)", r->spec->path, (long long)r->line, r->names[i],
                                column_of(r, r->names[i]) + 1, i + 1);
    }
    return FG_OK;
}

static fg_status add_feature(csv_reader *r, int col, fg_error *err)
{
    if (col == r->target_col)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "csv: %s: column \"%s\" is the target and cannot be a feature too",
                            r->spec->path, r->names[col]);
    for (int j = 0; j < r->nfeat; j++)
        if (r->feature_cols[j] == col)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "csv: %s: feature column \"%s\" is listed twice", r->spec->path,
                                r->names[col]);
    r->feature_cols[r->nfeat++] = col;
    return FG_OK;
}

/* The features option's names, or every column but the target. */
static fg_status resolve_columns(csv_reader *r, fg_error *err)
{
    r->target_col = column_of(r, r->spec->target);
    if (r->target_col < 0)
        return unknown_column(r, "target", r->spec->target, err);
    r->feature_cols = calloc((size_t)r->ncols, sizeof *r->feature_cols);
    if (!r->feature_cols)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "csv: %s: out of memory", r->spec->path);
    fg_status st = FG_OK;
    const char *p = r->spec->features;
    while (st == FG_OK && *p) {
        char name[512];
        size_t n = strcspn(p, ",");
        while (n > 0 && (*p == ' ' || *p == '\t'))
            p++, n--;
        size_t m = n;
        while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\t'))
            m--;
        snprintf(name, sizeof name, "%.*s", (int)m, p);
        p += n + (p[n] == ',');
        if (m == 0)
            continue;
        int col = column_of(r, name);
        if (col < 0)
            return unknown_column(r, "feature", name, err);
        st = add_feature(r, col, err);
    }
    for (int col = 0; st == FG_OK && r->spec->features[0] == '\0' && col < r->ncols; col++)
        if (col != r->target_col)
            st = add_feature(r, col, err);
    if (st == FG_OK && r->nfeat == 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "csv: %s: no feature columns (the header "
                          "has only the target \"%s\")", r->spec->path, r->spec->target);
    return st;
}

/* ---- rows ---------------------------------------------------------------------------- */

/* The cell of column col as a finite number, or an error naming file, line and column. */
static fg_status parse_cell(const csv_reader *r, int col, double *v, fg_error *err)
{
    const char *s = r->fields[col];
    if (*s == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "csv: %s:%lld: column \"%s\" (column %d) is empty: a missing value",
                            r->spec->path, (long long)r->line, r->names[col], col + 1);
    /* strtod also reads C's hexadecimal forms (0x10, 0x1p3); pandas and Python's float() read
     * them as text, so they are refused here too rather than taken as other values. */
    if (strpbrk(s, "xX"))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "csv: %s:%lld: column \"%s\" (column %d): \"%.64s\" is not a number "
                            "(hexadecimal is not read, as pandas does not)", r->spec->path,
                            (long long)r->line, r->names[col], col + 1, s);
    char *end = NULL;
    *v = strtod(s, &end);
    if (end == s || *end != '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "csv: %s:%lld: column \"%s\" (column %d): \"%.64s\" is not a number",
                            r->spec->path, (long long)r->line, r->names[col], col + 1, s);
    if (!isfinite(*v))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "csv: %s:%lld: column \"%s\" (column %d): \"%.64s\" is not a finite "
                            "number", r->spec->path, (long long)r->line, r->names[col], col + 1,
                            s);
    return FG_OK;
}

static fg_status parse_class(const csv_reader *r, double v, int32_t *out, fg_error *err)
{
    if (v != floor(v) || v < 0 || v >= CSV_MAX_CLASSES)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "csv: %s:%lld: target column \"%s\": \"%s\" is not a class (an "
                            "integer in [0, %d); for float targets set task = regression)",
                            r->spec->path, (long long)r->line, r->names[r->target_col],
                            r->fields[r->target_col], CSV_MAX_CLASSES);
    *out = (int32_t)v;
    return FG_OK;
}

static fg_status grow(csv_reader *r, csv_table *t, int64_t *cap, fg_error *err)
{
    int64_t c = *cap ? 2 * *cap : 1024;
    float *x = realloc(t->x, (size_t)c * (size_t)t->features * sizeof *x);
    if (x)
        t->x = x;
    int64_t *lines = realloc(t->lines, (size_t)c * sizeof *lines);
    if (lines)
        t->lines = lines;
    void *y = r->spec->regression ? realloc(t->targets, (size_t)c * sizeof(float))
                                  : realloc(t->classes, (size_t)c * sizeof(int32_t));
    if (y && r->spec->regression)
        t->targets = y;
    else if (y)
        t->classes = y;
    if (!x || !lines || !y)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "csv: %s: out of memory at line %lld",
                            r->spec->path, (long long)r->line);
    *cap = c;
    return FG_OK;
}

static fg_status read_row(csv_reader *r, csv_table *t, fg_error *err)
{
    if (r->nfields != r->ncols)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "csv: %s:%lld: %d field%s, the header has %d (a ragged row)",
                            r->spec->path, (long long)r->line, r->nfields,
                            r->nfields == 1 ? "" : "s", r->ncols);
    float *x = t->x + (size_t)t->rows * (size_t)t->features;
    double v = 0;
    fg_status st = FG_OK;
    for (int j = 0; st == FG_OK && j < r->nfeat; j++)
        if ((st = parse_cell(r, r->feature_cols[j], &v, err)) == FG_OK)
            x[j] = (float)v;
    if (st == FG_OK)
        st = parse_cell(r, r->target_col, &v, err);
    if (st == FG_OK && r->spec->regression)
        t->targets[t->rows] = (float)v;
    else if (st == FG_OK)
        st = parse_class(r, v, &t->classes[t->rows], err);
    if (st != FG_OK)
        return st;
    if (!r->spec->regression && t->classes[t->rows] > t->max_class)
        t->max_class = t->classes[t->rows];
    t->lines[t->rows++] = r->line;
    return FG_OK;
}

fg_status csv_table_read(const csv_spec *spec, csv_table *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    out->max_class = -1;
    csv_reader r;
    memset(&r, 0, sizeof r);
    r.spec = spec;
    fg_status st = read_file(&r, err);
    if (st == FG_OK)
        st = read_header(&r, err);
    if (st == FG_OK)
        st = resolve_columns(&r, err);
    out->features = r.nfeat;
    int64_t cap = 0;
    int more = 1;
    while (st == FG_OK && (st = next_row(&r, &more, err)) == FG_OK && more) {
        if (out->rows == cap && (st = grow(&r, out, &cap, err)) != FG_OK)
            break;
        st = read_row(&r, out, err);
    }
    if (st == FG_OK && out->rows == 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "csv: %s: no data rows after the header",
                          spec->path);
    reader_free(&r);
    if (st != FG_OK)
        csv_table_free(out);
    return st;
}

void csv_table_free(csv_table *t)
{
    free(t->x);
    free(t->classes);
    free(t->targets);
    free(t->lines);
    memset(t, 0, sizeof *t);
    t->max_class = -1;
}
