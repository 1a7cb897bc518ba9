/* fulgur-callback-report.so: report.html in the run folder, one self-contained page (no
 * network, no external script or font) whose charts show the run's curves.
 *
 *   [callback.report]          ; runs without a section; `enabled = false` switches it off
 *   filename = report.html     ; under the run folder; an absolute path is used as is
 *   auto_refresh_s = 30        ; while the run goes on, the page reloads itself; 0: never
 *   title =                    ; empty: "fulgur report: NAME/version_N"
 *   data =                     ; render this data file instead of the run (fulgur runs --report)
 *
 * The page's data is the run's metrics as metrics.csv holds them (every event's metrics, a
 * row per event, report_table.h), the resolved configuration (host->config_entry) and the
 * run folder's status.json (state, plugins and versions, written by the core) when there
 * is one. The page's script draws loss and accuracy (or perplexity) against steps, the
 * learning rate, samples/s, the step time split per logging window, the memory per device,
 * the plugins, the configuration and the test metrics (report_page.html).
 *
 * The page is written at the fit's start, at each validation, at the end of an epoch that
 * had none, on an exception, and when the plugin is torn down (after the core recorded the
 * run's outcome in status.json): a browser reload during training shows the progress so
 * far. It is created whole, then kept in place: each write appends the rows logged since
 * the last one and rewrites the data block and the script after them (report_file.h), so
 * a write costs the new rows, not the run, and the plugin holds only those rows. Only rank
 * 0 writes.
 *
 * With `data` set the plugin is the renderer of `fulgur runs DIR --report OUT`: the file is
 * a report data document with several runs (the format in report_page.html), checked and
 * written into the page at the first event; the run's own events are not recorded. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fulgur/callback.h>

#include "callback_plugin.h"
#include "report_file.h"
#include "report_json.h"
#include "report_page.h"
#include "report_table.h"

#ifndef REPORT_VERSION
#define REPORT_VERSION "1.0.0"
#endif

#define PATH_CHARS 4200

typedef struct report {
    const fg_host *host;
    const char *section;
    const char *filename;  /* owned by the host */
    const char *title;     /* owned by the host; "": from the run folder */
    const char *data_path; /* owned by the host; "": this run's events */
    int64_t refresh_s;
    report_table table;
    char run_dir[PATH_CHARS];
    char path[PATH_CHARS]; /* the page; empty until the first rank-0 event */
    const char *state;     /* "running", "finished", "failed" */
    int64_t validated_epoch; /* the epoch whose validation wrote the page; -1: none */
    report_file file;      /* the page kept in place: a write costs its new rows */
} report;

static const fg_option report_options[] = {
    {.key = "filename", .type = FG_OPT_STRING, .default_value = "report.html", .min = 1, .max = 0,
     .help = "the page, under the run folder (absolute: used as is)"},
    {.key = "auto_refresh_s", .type = FG_OPT_INT, .default_value = "30", .min = 0, .max = 86400,
     .help = "while the run goes on, the page reloads itself every N seconds; 0: never"},
    {.key = "title", .type = FG_OPT_STRING, .default_value = "", .min = 1, .max = 0,
     .help = "the page's title; empty: fulgur report: NAME/version_N"},
    {.key = "data", .type = FG_OPT_STRING, .default_value = "", .min = 1, .max = 0,
     .help = "render this report data file (several runs) instead of the run's events; set by "
             "fulgur runs --report"},
};

static fg_status report_init(const fg_host *host, void **state, fg_error *err)
{
    const char *section = host->section ? host->section : "callback.report";
    const char *filename = NULL, *title = NULL, *data = NULL;
    int64_t refresh = 30;
    if (host->get_string(host, "filename", &filename) != FG_OK || !filename || !filename[0])
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] filename: missing or empty", section);
    if (host->get_int(host, "auto_refresh_s", &refresh) != FG_OK || refresh < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] auto_refresh_s = %lld: must be >= 0",
                            section, (long long)refresh);
    if (host->get_string(host, "title", &title) != FG_OK)
        title = "";
    if (host->get_string(host, "data", &data) != FG_OK)
        data = "";
    report *r = calloc(1, sizeof *r);
    if (r == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", section);
    r->host = host;
    r->section = section;
    r->filename = filename;
    r->title = title ? title : "";
    r->data_path = data ? data : "";
    r->refresh_s = refresh;
    r->state = "running";
    r->validated_epoch = -1;
    *state = r;
    return FG_OK;
}

/* ---- the data block ------------------------------------------------------------------ */

static void iso_now(char *buf, size_t cap)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "NAME/version_N": the run folder's last two parts. */
static const char *run_label(const char *dir)
{
    const char *end = dir + strlen(dir), *p = end;
    while (p > dir && p[-1] == '/')
        p--;
    int slashes = 0;
    while (p > dir) {
        if (p[-1] == '/' && ++slashes == 2)
            break;
        p--;
    }
    return p;
}

static json_t *read_status(const report *r)
{
    char path[PATH_CHARS + 16];
    snprintf(path, sizeof path, "%s/status.json", r->run_dir);
    json_t *doc = json_load_file(path, 0, NULL);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

static void write_config(const report *r, FILE *out)
{
    fputs("[", out);
    const fg_host *h = r->host;
    if (FG_HAS_FIELD(h, fg_host, config_entry) && h->config_entry) {
        const char *s, *k, *v;
        for (size_t i = 0; h->config_entry(h, i, &s, &k, &v) == FG_OK; i++) {
            fputs(i ? ",\n[" : "\n[", out);
            report_json_string(out, s);
            fputc(',', out);
            report_json_string(out, k);
            fputc(',', out);
            report_json_string(out, v);
            fputc(']', out);
        }
    }
    fputs("]", out);
}

static void write_status(json_t *status, FILE *out)
{
    char *text = status ? json_dumps(status, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (text == NULL) {
        fputs("null", out);
        return;
    }
    report_json_raw(out, text);
    free(text);
}

typedef struct run_data {
    const report *r;
    json_t *status;
    const char *state;
} run_data;

static void write_run_doc(FILE *out, void *user)
{
    const run_data *d = user;
    char when[32];
    iso_now(when, sizeof when);
    fputs("{\"format\": \"fulgur-report\", \"version\": 1, \"generated\": ", out);
    report_json_string(out, when);
    fputs(",\n\"runs\": [{\"label\": ", out);
    report_json_string(out, run_label(d->r->run_dir));
    fputs(", \"dir\": ", out);
    report_json_string(out, d->r->run_dir);
    fputs(", \"state\": ", out);
    report_json_string(out, d->state);
    fputs(", \"notes\": [", out);
    if (d->r->file.restarted)
        report_json_string(out, "report.html was replaced or changed by another program during "
                                "the run: the rows before that are not on this page (metrics.csv "
                                "has them when [callback.csv_logger] runs)");
    fputs("],\n\"config\": ", out);
    write_config(d->r, out);
    fputs(",\n\"status\": ", out);
    write_status(d->status, out);
    fputs(",\n", out);
    report_table_write_columns(&d->r->table, out);
    fputs(",\n\"rows\": [], \"row_blocks\": true}]}", out); /* rows: report_file.h */
}

static void write_new_rows(FILE *out, void *user)
{
    const run_data *d = user;
    report_table_write_rows(&d->r->table, out);
}

/* The page written, or its failure with the section in front. */
static fg_status page_written(const report *r, fg_status st, const fg_error *why, fg_error *err)
{
    return st == FG_OK ? FG_OK : fg_error_set(err, st, "[%s] %s", r->section, why->message);
}

/* The run's page: its new rows and the tail (report_file.h); `final`: the core has
 * recorded the outcome in status.json. */
static fg_status write_run_page(report *r, int final, fg_error *err)
{
    run_data d = {r, read_status(r), r->state};
    json_t *st = d.status ? json_object_get(d.status, "status") : NULL;
    if (final && json_is_string(st))
        d.state = json_string_value(st);
    char head[96] = "", title[PATH_CHARS + 32];
    int running = strcmp(d.state, "running") == 0;
    if (running && r->refresh_s > 0)
        snprintf(head, sizeof head, "<meta http-equiv=\"refresh\" content=\"%lld\">\n",
                 (long long)r->refresh_s);
    if (r->title[0])
        snprintf(title, sizeof title, "%s", r->title);
    else
        snprintf(title, sizeof title, "fulgur report: %s", run_label(r->run_dir));
    report_file_parts parts = {.head = head, .title = title,
                               .has_rows = r->table.row_count > 0, .rows = write_new_rows,
                               .doc = write_run_doc, .user = &d, .ended = !running};
    fg_error why = {0};
    fg_status rc = report_file_write(&r->file, r->path, &parts, &why);
    if (rc == FG_OK)
        report_table_clear_rows(&r->table); /* on the page now */
    json_decref(d.status);
    return page_written(r, rc, &why, err);
}

/* ---- a given data file (fulgur runs --report) -------------------------------------- */

static void write_given_doc(FILE *out, void *user)
{
    report_json_raw(out, user);
}

static fg_status write_given_page(report *r, fg_error *err)
{
    json_error_t je;
    json_t *doc = json_load_file(r->data_path, 0, &je);
    if (doc == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] data = %s: line %d: %s", r->section,
                            r->data_path, je.line, je.text);
    json_t *format = json_object_get(doc, "format");
    if (!json_is_string(format) || strcmp(json_string_value(format), "fulgur-report") != 0 ||
        !json_is_array(json_object_get(doc, "runs"))) {
        json_decref(doc);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] data = %s: not a report data "
                            "document (format \"fulgur-report\" with a runs array)", r->section,
                            r->data_path);
    }
    json_t *t = json_object_get(doc, "title");
    char title[PATH_CHARS];
    snprintf(title, sizeof title, "%s", r->title[0] ? r->title
                                        : json_is_string(t) ? json_string_value(t) : "fulgur runs");
    char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (text == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", r->section);
    fg_error why = {0};
    fg_status rc = report_page_write(r->path, "", title, write_given_doc, text, &why);
    free(text);
    return page_written(r, rc, &why, err);
}

/* ---- events -------------------------------------------------------------------------- */

static fg_status resolve_path(report *r, const char *run_dir, fg_error *err)
{
    snprintf(r->run_dir, sizeof r->run_dir, "%s", run_dir && run_dir[0] ? run_dir : ".");
    int n = r->filename[0] == '/' ? snprintf(r->path, sizeof r->path, "%s", r->filename)
                                  : snprintf(r->path, sizeof r->path, "%s/%s", r->run_dir, r->filename);
    if (n < 0 || (size_t)n >= sizeof r->path) {
        r->path[0] = '\0';
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] filename = %s: path too long",
                            r->section, r->filename);
    }
    return FG_OK;
}

static fg_status on_run_event(report *r, const fg_event *e, fg_error *err)
{
    if (report_table_add(&r->table, e->epoch, e->global_step, e->metrics, e->metric_count) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", r->section);
    switch (e->type) {
    case FG_EVENT_FIT_START:
        r->state = "running";
        return write_run_page(r, 0, err);
    case FG_EVENT_VALIDATION_END:
        r->validated_epoch = e->epoch;
        return write_run_page(r, 0, err);
    case FG_EVENT_EPOCH_END:
        return r->validated_epoch == e->epoch ? FG_OK : write_run_page(r, 0, err);
    case FG_EVENT_FIT_END:
        r->state = "finished";
        return FG_OK;
    case FG_EVENT_EXCEPTION:
        r->state = "failed";
        return write_run_page(r, 0, err);
    default:
        return FG_OK;
    }
}

/* Thread rule (callback.h): called from the trainer's thread, on every rank, in order. */
static fg_status report_on_event(void *state, const fg_event *event, fg_callback_action *action,
                                 fg_error *err)
{
    report *r = state;
    (void)action; /* never stops training nor asks for a checkpoint */
    fg_status st = FG_PLUGIN_EVENT_NEEDS(event, run_dir, r->section, err);
    if (st != FG_OK || !event->is_rank_zero)
        return st;
    int first = r->path[0] == '\0';
    if (first && (st = resolve_path(r, event->run_dir, err)) != FG_OK)
        return st;
    if (r->data_path[0])
        return first ? write_given_page(r, err) : FG_OK;
    return on_run_event(r, event, err);
}

/* The last page, with the outcome the core wrote to status.json after the verb. */
static void report_deinit(void *state)
{
    report *r = state;
    if (r == NULL)
        return;
    if (r->path[0] && !r->data_path[0]) {
        fg_error err = {0};
        if (write_run_page(r, 1, &err) != FG_OK && r->host->log)
            r->host->log(r->host, FG_LOG_WARN, "%s", err.message);
    }
    report_table_free(&r->table);
    free(r);
}

FG_CALLBACK_PLUGIN_DEFINE("report", REPORT_VERSION,
                          "report.html in the run folder: the run's curves, throughput, memory, "
                          "plugins and configuration on one self-contained page",
                          FG_PLUGIN_OPTIONS(report_options), report_init, report_deinit,
                          report_on_event, NULL);
