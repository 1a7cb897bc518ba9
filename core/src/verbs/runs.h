/* `fulgur runs DIR`: the runs under a folder, and one report overlaying their curves.
 * runs.c finds and lists them, runs_read.c reads one run folder, runs_report.c writes the
 * comparison page through the report callback plugin. */
#ifndef FG_RUNS_H
#define FG_RUNS_H

#include <jansson.h>
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
    json_t *notes;       /* array of strings */
    json_t *status;      /* status.json, or NULL */
    json_t *config;      /* [[section, key, value], ...] */
    json_t *columns;     /* ["epoch", "step", metric names...] */
    json_t *rows;        /* [[epoch, step, value|null|"nan", ...], ...] */
    char source[32];     /* where the metrics came from: report.html, metrics.csv, "" */
} fg_run_info;

/* Reads dir (status.json, config.ini, report.html's data or metrics.csv). Never fails on
 * what it reads: a missing, malformed or half-written file becomes a note. Returns
 * FG_OUT_OF_MEMORY only. */
fg_status fg_run_read(const char *dir, fg_run_info *run, fg_error *err);
void fg_run_free(fg_run_info *run);

/* Parses the text of a metrics.csv (header "epoch,step,..."): columns and rows as the
 * report holds them, skipping rows that cannot be read (a line cut short by a killed
 * writer, a wrong field count, a value that is not a number) with a note each kind. */
void fg_run_parse_metrics_csv(const char *text, size_t len, fg_run_info *run);

/* The report data block of a report.html's text: its first run's columns, rows and
 * config; a note when the block is missing or cannot be parsed. 1 when read. */
int fg_run_parse_report_html(const char *text, size_t len, fg_run_info *run);

/* The comparison page of runs at out_path, through the report callback plugin (found in
 * rt's plugin search path). */
fg_status fg_runs_write_report(fg_runtime *rt, fg_run_info *const *runs, int count,
                               const char *title, const char *out_path, fg_error *err);

#endif
