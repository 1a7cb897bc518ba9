/* Writing, appending and widening metrics.csv. */
#define _POSIX_C_SOURCE 200809L
#include "csv_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "number_text.h"

static int fail(csv_failure *why, const char *what, const char *path)
{
    why->errnum = errno ? errno : EIO;
    why->what = what;
    snprintf(why->path, sizeof why->path, "%s", path);
    return -1;
}

/* RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled. */
static void write_field(FILE *out, const char *s)
{
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == '"')
            fputc('"', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

/* The shortest of %.15g / %.17g that reads back as the same double: 0.1 stays "0.1". */
static void write_number(FILE *out, double v)
{
    if (isnan(v)) {
        fputs("nan", out);
        return;
    }
    if (isinf(v)) {
        fputs(v > 0 ? "inf" : "-inf", out);
        return;
    }
    char buf[40];
    fg_plugin_format_double(buf, sizeof buf, v);
    fputs(buf, out);
}

static void write_header(FILE *out, const csv_table *t)
{
    fputs("epoch,step", out);
    for (size_t i = 0; i < t->column_count; i++) {
        fputc(',', out);
        write_field(out, t->columns[i]);
    }
    fputc('\n', out);
}

static int reserve_scratch(csv_file *f, size_t n)
{
    if (n <= f->scratch_cap)
        return 0;
    double *v = realloc(f->values, n * sizeof *v);
    if (v == NULL)
        return -1;
    f->values = v;
    unsigned char *p = realloc(f->present, n);
    if (p == NULL)
        return -1;
    f->present = p;
    f->scratch_cap = n;
    return 0;
}

/* Rows are laid out dense so a metric logged twice in one event keeps its last value. */
static void write_rows(csv_file *f, FILE *out, const csv_table *t)
{
    for (size_t r = 0; r < t->row_count; r++) {
        const csv_row *row = &t->rows[r];
        memset(f->present, 0, t->column_count);
        for (size_t c = 0; c < row->cell_count; c++) {
            f->values[row->cells[c].column] = row->cells[c].value;
            f->present[row->cells[c].column] = 1;
        }
        fprintf(out, "%lld,%lld", (long long)row->epoch, (long long)row->step);
        for (size_t c = 0; c < t->column_count; c++) {
            fputc(',', out);
            if (f->present[c])
                write_number(out, f->values[c]);
        }
        fputc('\n', out);
    }
}

static int close_checked(FILE *out, csv_failure *why, const char *path)
{
    int bad = ferror(out);
    if (fclose(out) != 0 || bad)
        return fail(why, "cannot write", path);
    return 0;
}

static int write_fresh(csv_file *f, const csv_table *t, csv_failure *why)
{
    FILE *out = fopen(f->path, "w");
    if (out == NULL)
        return fail(why, "cannot create", f->path);
    write_header(out, t);
    f->header_bytes = ftell(out);
    write_rows(f, out, t);
    if (close_checked(out, why, f->path) != 0)
        return -1;
    f->created = 1;
    f->header_columns = t->column_count;
    return 0;
}

static int append_rows(csv_file *f, const csv_table *t, csv_failure *why)
{
    FILE *out = fopen(f->path, "a");
    if (out == NULL)
        return fail(why, "cannot open", f->path);
    write_rows(f, out, t);
    return close_checked(out, why, f->path);
}

/* Copies the old rows after the old header, each padded with `pad` empty cells. */
static int copy_padded(FILE *in, FILE *out, size_t pad)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, in)) > 0) {
        if (line[n - 1] == '\n')
            line[--n] = '\0';
        fputs(line, out);
        for (size_t i = 0; i < pad; i++)
            fputc(',', out);
        fputc('\n', out);
    }
    free(line);
    return ferror(in) ? -1 : 0;
}

static int widen(csv_file *f, const csv_table *t, csv_failure *why)
{
    char tmp[CSV_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", f->path);
    FILE *in = fopen(f->path, "r");
    if (in == NULL)
        return fail(why, "cannot reopen", f->path);
    if (fseek(in, f->header_bytes, SEEK_SET) != 0) {
        fclose(in);
        return fail(why, "cannot read", f->path);
    }
    FILE *out = fopen(tmp, "w");
    if (out == NULL) {
        fclose(in);
        return fail(why, "cannot create", tmp);
    }
    write_header(out, t);
    long header_bytes = ftell(out);
    int copied = copy_padded(in, out, t->column_count - f->header_columns);
    fclose(in);
    write_rows(f, out, t);
    if (copied != 0) {
        fclose(out);
        remove(tmp);
        return fail(why, "cannot read", f->path);
    }
    if (close_checked(out, why, tmp) != 0) {
        remove(tmp);
        return -1;
    }
    if (rename(tmp, f->path) != 0) {
        fail(why, "cannot rename into place", tmp);
        remove(tmp);
        return -1;
    }
    f->header_bytes = header_bytes;
    f->header_columns = t->column_count;
    return 0;
}

int csv_file_flush(csv_file *f, const csv_table *t, csv_failure *why)
{
    if (t->row_count == 0)
        return 0;
    errno = 0;
    if (reserve_scratch(f, t->column_count ? t->column_count : 1) != 0) {
        errno = ENOMEM;
        return fail(why, "out of memory writing", f->path);
    }
    if (!f->created)
        return write_fresh(f, t, why);
    if (t->column_count > f->header_columns)
        return widen(f, t, why);
    return append_rows(f, t, why);
}

void csv_file_free(csv_file *f)
{
    free(f->values);
    free(f->present);
    f->values = NULL;
    f->present = NULL;
    f->scratch_cap = 0;
}
