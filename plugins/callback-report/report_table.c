/* The metrics table of a run (report_table.h). */
#define _POSIX_C_SOURCE 200809L
#include "report_table.h"

#include <stdlib.h>
#include <string.h>

#include "grow_array.h"
#include "report_json.h"

/* The column of a metric name, added at the end when new; -1 when out of memory. */
static long column_of(report_table *t, const char *name)
{
    return fg_plugin_name_index(&t->columns, &t->column_count, &t->column_cap, 64, name);
}

static int append(report_table *t, const char *s, size_t n)
{
    if (fg_plugin_grow_array(&t->text, &t->text_cap, t->text_len + n, 64, 1) != 0)
        return -1;
    memcpy(t->text + t->text_len, s, n);
    t->text_len += n;
    return 0;
}

static int write_row(report_table *t, int64_t epoch, int64_t step, const fg_metric *m, uint32_t n,
                     const long *cols, size_t width);

int report_table_add(report_table *t, int64_t epoch, int64_t step, const fg_metric *m, uint32_t n)
{
    if (m == NULL || n == 0)
        return 0;
    long *cols = malloc(n * sizeof *cols); /* each metric's column; -2: no name, skipped */
    if (cols == NULL)
        return -1;
    size_t width = 0;
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        cols[i] = m[i].name != NULL ? column_of(t, m[i].name) : -2;
        if (cols[i] == -1)
            rc = -1;
        else if (cols[i] >= 0 && (size_t)cols[i] + 1 > width)
            width = (size_t)cols[i] + 1;
    }
    if (rc == 0)
        rc = write_row(t, epoch, step, m, n, cols, width);
    free(cols);
    return rc;
}

/* The row's text: "[epoch,step" and a value or null for each of the first `width` columns. */
static int write_row(report_table *t, int64_t epoch, int64_t step, const fg_metric *m, uint32_t n,
                     const long *cols, size_t width)
{
    if (fg_plugin_grow_array(&t->rows, &t->row_cap, t->row_count + 1, 64, sizeof *t->rows) != 0)
        return -1;
    report_row *r = &t->rows[t->row_count];
    r->offset = t->text_len;
    r->columns = width;
    char buf[64 + REPORT_NUMBER_CHARS];
    int len = snprintf(buf, sizeof buf, "[%lld,%lld", (long long)epoch, (long long)step);
    if (append(t, buf, (size_t)len) != 0)
        return -1;
    for (size_t c = 0; c < width; c++) {
        uint32_t i = 0;
        while (i < n && cols[i] != (long)c)
            i++;
        buf[0] = ',';
        size_t k = i < n ? 1 + report_json_number_text(buf + 1, m[i].value)
                         : (size_t)snprintf(buf, sizeof buf, ",null");
        if (append(t, buf, k) != 0)
            return -1;
    }
    r->length = t->text_len - r->offset;
    t->row_count++;
    return 0;
}

void report_table_write_columns(const report_table *t, FILE *out)
{
    fputs("\"columns\": [\"epoch\", \"step\"", out);
    for (size_t i = 0; i < t->column_count; i++) {
        fputs(", ", out);
        report_json_string(out, t->columns[i]);
    }
    fputs("]", out);
}

void report_table_write_rows(const report_table *t, FILE *out)
{
    for (size_t r = 0; r < t->row_count; r++) {
        const report_row *row = &t->rows[r];
        if (r)
            fputs(",\n", out);
        fwrite(t->text + row->offset, 1, row->length, out);
        fputc(']', out);
    }
}

void report_table_clear_rows(report_table *t)
{
    t->row_count = 0;
    t->text_len = 0;
}

void report_table_free(report_table *t)
{
    for (size_t i = 0; i < t->column_count; i++)
        free(t->columns[i]);
    free(t->columns);
    free(t->rows);
    free(t->text);
    memset(t, 0, sizeof *t);
}
