/* Writing, appending and widening metrics.csv. */
#define _POSIX_C_SOURCE 200809L
#include "csv_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "number_text.h"
#include "output_file.h"

static fg_status fail(fg_error *err, const char *what, const char *path)
{
    int e = errno ? errno : EIO;
    return fg_error_set(err, fg_output_errno_status(e), "%s %s: %s", what, path, strerror(e));
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

static fg_status close_checked(FILE *out, fg_error *err, const char *path)
{
    errno = 0;
    int bad = fflush(out) != 0 || ferror(out);
    int e = errno;
    if (fclose(out) != 0 || bad) {
        errno = e ? e : errno;
        return fail(err, "cannot write", path);
    }
    return FG_OK;
}

/* The table's rows written out: a fresh file with its header (the file is then created), or
 * appended under the header already there. */
static fg_status write_table(csv_file *f, const csv_table *t, int fresh, fg_error *err)
{
    FILE *out;
    fg_status st = fg_output_open(f->path, fresh ? "w" : "a", &out, err);
    if (st != FG_OK)
        return st;
    if (fresh) {
        write_header(out, t);
        f->header_bytes = ftell(out);
    }
    write_rows(f, out, t);
    if ((st = close_checked(out, err, f->path)) != FG_OK || !fresh)
        return st;
    f->created = 1;
    f->header_columns = t->column_count;
    return FG_OK;
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

typedef struct widen_job {
    csv_file *f;
    const csv_table *t;
    FILE *in;
    long header_bytes;
} widen_job;

static int write_widened(FILE *out, void *user)
{
    widen_job *w = user;
    write_header(out, w->t);
    w->header_bytes = ftell(out);
    int copied = copy_padded(w->in, out, w->t->column_count - w->f->header_columns);
    write_rows(w->f, out, w->t);
    return copied != 0 || ferror(out) ? -1 : 0;
}

static fg_status widen(csv_file *f, const csv_table *t, fg_error *err)
{
    widen_job w = {f, t, NULL, 0};
    FILE *in;
    fg_status st = fg_output_open(f->path, "a", &in, err); /* checks it is a regular file */
    if (st != FG_OK)
        return st;
    fclose(in);
    if (!(w.in = fopen(f->path, "r")))
        return fail(err, "cannot reopen", f->path);
    if (fseek(w.in, f->header_bytes, SEEK_SET) != 0) {
        fclose(w.in);
        return fail(err, "cannot read", f->path);
    }
    st = fg_output_write_atomic(f->path, write_widened, &w, err);
    fclose(w.in);
    if (st != FG_OK)
        return st;
    f->header_bytes = w.header_bytes;
    f->header_columns = t->column_count;
    return FG_OK;
}

fg_status csv_file_flush(csv_file *f, const csv_table *t, fg_error *err)
{
    if (t->row_count == 0)
        return FG_OK;
    if (reserve_scratch(f, t->column_count ? t->column_count : 1) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory writing %s", f->path);
    if (f->created && t->column_count > f->header_columns)
        return widen(f, t, err);
    return write_table(f, t, !f->created, err);
}

void csv_file_free(csv_file *f)
{
    free(f->values);
    free(f->present);
    f->values = NULL;
    f->present = NULL;
    f->scratch_cap = 0;
}
