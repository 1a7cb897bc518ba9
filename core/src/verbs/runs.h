/* `fulgur runs DIR`: the runs under a folder, and one report overlaying their curves.
 * runs.c finds and lists them, runs_read.c reads one run folder, runs_report.c writes the
 * comparison page through the report callback plugin. */
#ifndef FG_RUNS_H
#define FG_RUNS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

/* One run folder as read: what could be read, and a note for what could not. */
typedef struct fg_run_info {
    char dir[4096];
    char name[256];      /* the family: the folder above version_N */
    char version[256];   /* version_N */
    char state[16];      /* running, finished, failed, interrupted, unknown */
    int64_t steps;       /* -1: unknown */
    double wall_s;       /* < 0: unknown */
    char monitor[128];   /* the metric ranked (checkpoint or early stopping monitor) */
    int monitor_max;     /* mode = max */
    int has_best;
    double best;
    int64_t best_step;
    int64_t last_step;   /* the last step with metrics; -1: none */
    json_t *notes;       /* array of strings */
    json_t *status;      /* status.json, or NULL */
    json_t *config;      /* [[section, key, value], ...] */
    json_t *columns;     /* ["epoch", "step", metric names...] */
    json_t *rows;        /* [[epoch, step, value|null|"nan", ...], ...] */
    char source[32];     /* where the metrics came from: report.html, metrics.csv, "" */
} fg_run_info;

/* Reads dir (status.json, config.ini, report.html's data or metrics.csv). Never fails on
 * what it reads: a missing, malformed or half-written file becomes a note. The metrics are
 * streamed a row at a time (runs_rows.h): memory does not grow with the run's length; rows
 * holds at most keep_rows rows of each kind (0: none, the listing needs only the summary).
 * Returns FG_OUT_OF_MEMORY only. */
fg_status fg_run_read(const char *dir, fg_run_info *run, size_t keep_rows, fg_error *err);
void fg_run_free(fg_run_info *run);

/* The comparison page of runs at out_path, through the report callback plugin (found in
 * rt's plugin search path). */
fg_status fg_runs_write_report(fg_runtime *rt, fg_run_info *const *runs, int count,
                               const char *title, const char *out_path, fg_error *err);

#endif
