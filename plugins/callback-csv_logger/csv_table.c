/* Columns and pending rows of the CSV logger. */
#include "csv_table.h"

#include <stdlib.h>
#include <string.h>

#include "grow_array.h"

/* The column of name, added at the end when new; -1 when out of memory. */
static long column_of(csv_table *t, const char *name)
{
    return fg_plugin_name_index(&t->columns, &t->column_count, &t->column_cap, 16, name);
}

int csv_table_add_row(csv_table *t, int64_t epoch, int64_t step, const fg_metric *metrics,
                      uint32_t count)
{
    if (fg_plugin_grow_array(&t->rows, &t->row_cap, t->row_count + 1, 16, sizeof *t->rows) != 0)
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
