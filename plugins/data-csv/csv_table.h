/* One CSV file read into memory as a table of float features and one target per row,
 * validated at the border: every message names the file, the line and the column.
 *
 * Format: a header row of column names, then one row per sample, fields separated by one
 * delimiter character; a field may be double-quoted ("" inside is a quote) but may not span
 * lines; spaces around fields are ignored; blank lines are skipped; \r\n line ends and a
 * UTF-8 byte order mark are accepted. Feature cells must be finite numbers (strtod, C
 * locale); classification targets integers >= 0 (2 and 2.0 alike), regression targets
 * finite numbers. Missing cells, non-numbers and rows with more or fewer fields than the
 * header are errors, never guessed at. */
#ifndef FG_CSV_TABLE_H
#define FG_CSV_TABLE_H

#include <stdint.h>

#include "fulgur/plugin.h"

typedef struct csv_spec {
    const char *path;
    char delimiter;
    const char *target;    /* the target column's name */
    const char *features;  /* comma-separated column names; "": every column but the target */
    int regression;        /* 1: float targets; 0: integer classes */
} csv_spec;

typedef struct csv_table {
    int64_t rows;
    int32_t features;    /* F */
    float *x;            /* (rows, F) */
    int32_t *classes;    /* (rows) when classification, else NULL */
    float *targets;      /* (rows) when regression, else NULL */
    int64_t *lines;      /* (rows) the file line of each row, for later messages */
    int32_t max_class;   /* the largest class (classification; -1 without rows) */
} csv_table;

fg_status csv_table_read(const csv_spec *spec, csv_table *out, fg_error *err);
void csv_table_free(csv_table *t);

#endif
