/* The run's metrics as metrics.csv holds them: columns epoch, step, then every metric name
 * in order of first appearance; one row per event that carried metrics, with a value for
 * the metrics of that event only.
 *
 * Each row is turned into its JSON text once, when it is added: "[epoch,step,v,null,..."
 * up to the columns known then (a new metric name only ever adds a column at the end; a
 * reader pads a shorter row with nulls). The table holds the rows not yet written to the
 * page: the page keeps the others (report_file.h), so memory does not grow with the run. */
#ifndef REPORT_TABLE_H
#define REPORT_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <fulgur/callback.h>

typedef struct report_row {
    size_t offset, length; /* its text in report_table.text */
    size_t columns;        /* metric columns it was written with */
} report_row;

typedef struct report_table {
    char **columns;   /* metric names, owned */
    size_t column_count, column_cap;
    report_row *rows;
    size_t row_count, row_cap;
    char *text;       /* every row's JSON text, back to back */
    size_t text_len, text_cap;
} report_table;

/* Appends the event's metrics as a row (none: nothing). 0, or -1 when out of memory. */
int report_table_add(report_table *t, int64_t epoch, int64_t step, const fg_metric *m, uint32_t n);
/* "columns": ["epoch", "step", names...] (no braces). */
void report_table_write_columns(const report_table *t, FILE *out);
/* The rows held, "[epoch,step,...],\n[...]" (no enclosing brackets), each as wide as the
 * columns were when it was added. */
void report_table_write_rows(const report_table *t, FILE *out);
/* Forgets the rows (written to the page); the columns stay. */
void report_table_clear_rows(report_table *t);
void report_table_free(report_table *t);

#endif
