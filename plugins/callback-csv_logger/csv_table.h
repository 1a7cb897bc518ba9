/* The in-memory side of the CSV logger: the columns seen so far, in order of first
 * appearance, and the rows not yet written. Memory is bounded by the flush policy: the
 * plugin writes the pending rows out every flush_every_n_events rows, so at most that many
 * are held; columns grow with the number of distinct metric names. */
#ifndef CSV_TABLE_H
#define CSV_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include <fulgur/callback.h>

typedef struct csv_cell {
    size_t column; /* index into csv_table.columns */
    double value;
} csv_cell;

typedef struct csv_row {
    int64_t epoch;
    int64_t step;
    csv_cell *cells; /* owned */
    size_t cell_count;
} csv_row;

typedef struct csv_table {
    char **columns; /* metric names, owned copies; "epoch" and "step" are implicit */
    size_t column_count;
    size_t column_cap;
    csv_row *rows; /* pending, oldest first */
    size_t row_count;
    size_t row_cap;
} csv_table;

/* Appends one row of an event's metrics, registering names not seen before as new columns
 * at the end. Metrics with a NULL name are skipped. Returns 0, or -1 when out of memory
 * (the table is unchanged then, apart from columns already added). */
int csv_table_add_row(csv_table *t, int64_t epoch, int64_t step, const fg_metric *metrics,
                      uint32_t count);

/* Drops the pending rows (after they were written); columns stay. */
void csv_table_clear_rows(csv_table *t);

void csv_table_free(csv_table *t);

#endif
