/* Columns and pending rows of the CSV logger. */
#include "csv_table.h"

#include <stdlib.h>
#include <string.h>

static int grow(void **items, size_t *cap, size_t need, size_t item_size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(*items, n * item_size);
    if (p == NULL)
        return -1;
    *items = p;
    *cap = n;
    return 0;
}

/* The column of name, added at the end when new; -1 when out of memory. A linear scan:
 * a run logs tens of distinct names, not thousands. */
static long column_of(csv_table *t, const char *name)
{
    for (size_t i = 0; i < t->column_count; i++)
        if (strcmp(t->columns[i], name) == 0)
            return (long)i;
    if (grow((void **)&t->columns, &t->column_cap, t->column_count + 1, sizeof *t->columns) != 0)
        return -1;
    size_t n = strlen(name) + 1;
    char *copy = malloc(n);
    if (copy == NULL)
        return -1;
    memcpy(copy, name, n);
    t->columns[t->column_count] = copy;
    return (long)t->column_count++;
}

int csv_table_add_row(csv_table *t, int64_t epoch, int64_t step, const fg_metric *metrics,
                      uint32_t count)
{
    if (grow((void **)&t->rows, &t->row_cap, t->row_count + 1, sizeof *t->rows) != 0)
        return -1;
    csv_row row = {.epoch = epoch, .step = step};
    if (count > 0) {
        row.cells = malloc(count * sizeof *row.cells);
        if (row.cells == NULL)
            return -1;
    }
    for (uint32_t i = 0; i < count; i++) {
        if (metrics[i].name == NULL)
            continue;
        long col = column_of(t, metrics[i].name);
        if (col < 0) {
            free(row.cells);
            return -1;
        }
        row.cells[row.cell_count].column = (size_t)col;
        row.cells[row.cell_count].value = metrics[i].value;
        row.cell_count++;
    }
    t->rows[t->row_count++] = row;
    return 0;
}

void csv_table_clear_rows(csv_table *t)
{
    for (size_t i = 0; i < t->row_count; i++)
        free(t->rows[i].cells);
    t->row_count = 0;
}

void csv_table_free(csv_table *t)
{
    csv_table_clear_rows(t);
    free(t->rows);
    for (size_t i = 0; i < t->column_count; i++)
        free(t->columns[i]);
    free(t->columns);
    memset(t, 0, sizeof *t);
}
