/* A run's metric rows for `fulgur runs`, taken one at a time as the reader streams them
 * (runs_read.c): each row updates the listing's summary (the last step logged, the best
 * value of the monitored metric and its step), and, for `--report`, a bounded sample is
 * kept. Rows are grouped by their first metric column that has a value (step rows,
 * validation rows, epoch rows...); each group keeps at most `keep` rows, every k-th one,
 * k doubling whenever the group is full, so a run of 10^6 rows costs the same memory as
 * one of 10^4 and a sparse curve is never thinned by a dense one. */
#ifndef FG_RUNS_ROWS_H
#define FG_RUNS_ROWS_H

#include <jansson.h>
#include <stddef.h>

#include "runs.h"

typedef struct fg_kept_row {
    size_t index; /* the row's place in the run, to merge the groups back in order */
    json_t *row;
} fg_kept_row;

typedef struct fg_row_group {
    fg_kept_row *rows;
    size_t count, seen, stride;
} fg_row_group;

typedef struct fg_run_rows {
    fg_run_info *run;
    size_t columns;     /* the run's columns: a shorter row is padded with nulls */
    size_t mcol;        /* the monitored metric's column; 0: the run has none */
    size_t keep;        /* rows kept per group; 0: none (the listing needs only the summary) */
    size_t total, bad;
    fg_row_group *groups; /* one per metric column */
} fg_run_rows;

/* Starts on run->columns (set), choosing the monitored metric when the config named none:
 * val/loss when the run has it, else train/loss. 0, or -1 when out of memory. */
int fg_run_rows_begin(fg_run_rows *rr, fg_run_info *run, size_t keep);
/* One row (a reference is taken when it is kept): [int epoch, int step, number|null|string
 * ...], at most as wide as the columns. 0, or -1 when its shape is not that (counted in bad). */
int fg_run_rows_add(fg_run_rows *rr, json_t *row);
/* run->rows: the kept rows in run order; a note when the run's rows were sampled. */
void fg_run_rows_end(fg_run_rows *rr);

#endif
