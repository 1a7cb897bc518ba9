/* The metrics table of a run (report_table.h). */
#define _POSIX_C_SOURCE 200809L
#include "report_table.h"

#include <stdlib.h>
#include <string.h>

#include "report_json.h"

static int grow(void **items, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *p = realloc(*items, n * size);
    if (p == NULL)
        return -1;
    *items = p;
    *cap = n;
    return 0;
}

/* The column of a metric name, added at the end when new; -1 when out of memory. */
static long column_of(report_table *t, const char *name)
{
    for (size_t i = 0; i < t->column_count; i++)
        if (strcmp(t->columns[i], name) == 0)
            return (long)i;
    if (grow((void **)&t->columns, &t->column_cap, t->column_count + 1, sizeof *t->columns) != 0)
        return -1;
    char *copy = strdup(name);
    if (copy == NULL)
        return -1;
    t->columns[t->column_count] = copy;
    return (long)t->column_count++;
}

int report_table_add(report_table *t, int64_t epoch, int64_t step, const fg_metric *m, uint32_t n)
{
    if (m == NULL || n == 0)
        return 0;
    if (grow((void **)&t->rows, &t->row_cap, t->row_count + 1, sizeof *t->rows) != 0 ||
        grow((void **)&t->cells, &t->cell_cap, t->cell_count + n, sizeof *t->cells) != 0)
        return -1;
    report_row *r = &t->rows[t->row_count];
    r->epoch = epoch;
    r->step = step;
    r->first = t->cell_count;
    r->count = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (m[i].name == NULL)
            continue;
        long c = column_of(t, m[i].name);
        if (c < 0)
            return -1;
        t->cells[t->cell_count++] = (report_cell){(uint32_t)c, m[i].value};
        r->count++;
    }
    t->row_count++;
    return 0;
}

void report_table_write_json(const report_table *t, FILE *out)
{
    fputs("\"columns\": [\"epoch\", \"step\"", out);
    for (size_t i = 0; i < t->column_count; i++) {
        fputs(", ", out);
        report_json_string(out, t->columns[i]);
    }
    fputs("],\n\"rows\": [", out);
    for (size_t r = 0; r < t->row_count; r++) {
        const report_row *row = &t->rows[r];
        fprintf(out, "%s\n[%lld,%lld", r ? "," : "", (long long)row->epoch, (long long)row->step);
        /* cells in column order; an event names each metric once */
        for (size_t c = 0; c < t->column_count; c++) {
            const report_cell *cell = NULL;
            for (uint32_t k = 0; k < row->count && cell == NULL; k++)
                if (t->cells[row->first + k].column == c)
                    cell = &t->cells[row->first + k];
            fputc(',', out);
            if (cell != NULL)
                report_json_number(out, cell->value);
            else
                fputs("null", out);
        }
        fputc(']', out);
    }
    fputs("]", out);
}

void report_table_free(report_table *t)
{
    for (size_t i = 0; i < t->column_count; i++)
        free(t->columns[i]);
    free(t->columns);
    free(t->rows);
    free(t->cells);
    memset(t, 0, sizeof *t);
}
