/* The run's metrics as metrics.csv holds them: columns epoch, step, then every metric name
 * in order of first appearance; one row per event that carried metrics, with a value for
 * the metrics of that event only. */
#ifndef REPORT_TABLE_H
#define REPORT_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <fulgur/callback.h>

typedef struct report_cell {
    uint32_t column; /* index into columns */
    double value;
} report_cell;

typedef struct report_row {
    int64_t epoch, step;
    size_t first;  /* its cells: cells[first .. first + count) */
    uint32_t count;
} report_row;

typedef struct report_table {
    char **columns;   /* metric names, owned */
    size_t column_count, column_cap;
    report_row *rows;
    size_t row_count, row_cap;
    report_cell *cells;
    size_t cell_count, cell_cap;
} report_table;

/* Appends the event's metrics as a row (none: nothing). 0, or -1 when out of memory. */
int report_table_add(report_table *t, int64_t epoch, int64_t step, const fg_metric *m, uint32_t n);
/* "columns": [...], "rows": [[epoch, step, value|null, ...], ...] (no braces). */
void report_table_write_json(const report_table *t, FILE *out);
void report_table_free(report_table *t);

#endif
