/* A run's metric rows as they are read (runs_rows.h). */
#include "runs_rows.h"

#include <stdlib.h>
#include <string.h>

static size_t column_named(const json_t *columns, const char *name)
{
    size_t i;
    const json_t *c;
    json_array_foreach(columns, i, c)
        if (i >= 2 && json_is_string(c) && strcmp(json_string_value(c), name) == 0) return i;
    return 0;
}

int fg_run_rows_begin(fg_run_rows *rr, fg_run_info *run, size_t keep)
{
    memset(rr, 0, sizeof *rr);
    rr->run = run;
    rr->columns = json_array_size(run->columns);
    rr->keep = keep;
    if (!run->monitor[0]) /* no callback ranks: val/loss, else the training loss */
        snprintf(run->monitor, sizeof run->monitor, "%s",
                 column_named(run->columns, "val/loss") ? "val/loss" : "train/loss");
    rr->mcol = column_named(run->columns, run->monitor);
    run->last_step = -1;
    if (keep && rr->columns > 2) {
        rr->groups = calloc(rr->columns, sizeof *rr->groups);
        if (!rr->groups) return -1;
    }
    return 0;
}

static int shape_ok(const json_t *row, size_t columns)
{
    size_t n = json_array_size(row);
    if (!json_is_array(row) || n < 2 || n > columns || !json_is_integer(json_array_get(row, 0)) ||
        !json_is_integer(json_array_get(row, 1)))
        return 0;
    for (size_t j = 2; j < n; j++) {
        const json_t *v = json_array_get(row, j);
        if (!json_is_number(v) && !json_is_null(v) && !json_is_string(v)) return 0;
    }
    return 1;
}

static void summarise_row(fg_run_rows *rr, const json_t *row)
{
    fg_run_info *run = rr->run;
    int64_t step = json_integer_value(json_array_get(row, 1));
    if (step > run->last_step) run->last_step = step;
    const json_t *v = rr->mcol ? json_array_get(row, rr->mcol) : NULL;
    if (!json_is_number(v)) return;
    double x = json_number_value(v);
    if (!run->has_best || (run->monitor_max ? x > run->best : x < run->best)) {
        run->has_best = 1;
        run->best = x;
        run->best_step = step;
    }
}

/* Every other kept row dropped, the stride doubled: the group keeps every 2k-th row. */
static void thin(fg_row_group *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->count; i++) {
        if (i % 2 == 0) g->rows[n++] = g->rows[i];
        else json_decref(g->rows[i].row);
    }
    g->count = n;
    g->stride *= 2;
}

static int keep_row(fg_run_rows *rr, json_t *row)
{
    size_t first = 0; /* the group: the first metric with a value (0: none) */
    for (size_t j = 2; j < json_array_size(row) && !first; j++)
        if (!json_is_null(json_array_get(row, j))) first = j;
    fg_row_group *g = &rr->groups[first];
    if (!g->rows) {
        g->rows = malloc(rr->keep * sizeof *g->rows);
        if (!g->rows) return -1;
        g->stride = 1;
    }
    if (g->seen++ % g->stride != 0) return 0;
    if (g->count == rr->keep) {
        thin(g);
        if ((g->seen - 1) % g->stride != 0) return 0;
    }
    g->rows[g->count++] = (fg_kept_row){rr->total, json_incref(row)};
    return 0;
}

int fg_run_rows_add(fg_run_rows *rr, json_t *row)
{
    if (!shape_ok(row, rr->columns)) {
        rr->bad++;
        return -1;
    }
    while (json_array_size(row) < rr->columns) json_array_append_new(row, json_null());
    summarise_row(rr, row);
    int rc = rr->groups ? keep_row(rr, row) : 0;
    rr->total++;
    return rc;
}

static int by_index(const void *a, const void *b)
{
    size_t x = ((const fg_kept_row *)a)->index, y = ((const fg_kept_row *)b)->index;
    return x < y ? -1 : x > y;
}

void fg_run_rows_end(fg_run_rows *rr)
{
    size_t kept = 0, k = 0;
    for (size_t g = 0; rr->groups && g < rr->columns; g++) kept += rr->groups[g].count;
    fg_kept_row *all = kept ? malloc(kept * sizeof *all) : NULL;
    for (size_t g = 0; rr->groups && g < rr->columns; g++) {
        fg_row_group *grp = &rr->groups[g];
        for (size_t i = 0; i < grp->count; i++) {
            if (all) all[k++] = grp->rows[i];
            else json_decref(grp->rows[i].row);
        }
        free(grp->rows);
    }
    free(rr->groups);
    rr->groups = NULL;
    if (!all) return;
    qsort(all, k, sizeof *all, by_index);
    json_t *rows = json_array();
    for (size_t i = 0; i < k; i++)
        if (rows) json_array_append_new(rows, all[i].row);
        else json_decref(all[i].row);
    free(all);
    if (!rows) return;
    json_decref(rr->run->rows);
    rr->run->rows = rows;
    if (k < rr->total)
        json_array_append_new(rr->run->notes, json_sprintf("%zu of %zu metric rows on the page "
                              "(every k-th row of each kind, at most %zu of a kind)", k,
                              rr->total, rr->keep));
}
