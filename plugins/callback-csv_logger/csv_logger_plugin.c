/* fulgur-callback-csv_logger.so: every event's metrics as one row of run_dir/metrics.csv.
 *
 *   [callback.csv_logger]
 *   filename = metrics.csv        ; under the run folder; an absolute path is used as is
 *   flush_every_n_events = 10     ; rows held in memory before they are written
 *   hparams = true                ; also write hparams.yaml beside it
 *
 * Columns: epoch, step (the global step), then every metric name seen so far, in order of
 * first appearance; a row leaves empty the cells of metrics its event did not carry. When
 * a new name appears the file is rewritten with the widened header (Lightning's CSVLogger
 * does the same), see csv_file.h.
 *
 * Flush policy, which bounds memory: rows wait in memory until flush_every_n_events of
 * them are pending, or until any event other than a training step arrives (epoch end,
 * validation, fit end, test, exception: a few per epoch), and at teardown. Only rank 0
 * writes; the file is created (truncated) at its first flush.
 *
 * hparams.yaml (next to the CSV file, as Lightning's CSVLogger) holds the run's resolved
 * configuration, read through host->config_entry and written by rank 0 at its first event
 * (hparams_yaml.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "callback_plugin.h"
#include "csv_file.h"
#include "csv_table.h"
#include "hparams_yaml.h"

#ifndef CSV_LOGGER_VERSION
#define CSV_LOGGER_VERSION "1.0.0"
#endif

typedef struct csv_logger {
    const char *section;  /* for messages */
    const char *filename; /* owned by the host */
    int64_t flush_every;  /* >= 1 */
    int have_path;        /* file.path was resolved against the run folder */
    int hparams;          /* write hparams.yaml */
    const fg_host *host;
    csv_table table;
    csv_file file;
} csv_logger;

static const fg_option csv_logger_options[] = {
    {.key = "filename", .type = FG_OPT_STRING, .default_value = "metrics.csv", .min = 1,
     .max = 0, .help = "the CSV file, under the run folder (absolute: used as is)"},
    {.key = "flush_every_n_events", .type = FG_OPT_INT, .default_value = "10", .min = 1,
     .max = 1e6, .help = "rows held in memory before writing; non-step events always flush"},
    {.key = "hparams", .type = FG_OPT_BOOL, .default_value = "true", .min = 1, .max = 0,
     .help = "write the resolved configuration to hparams.yaml beside the CSV file"},
};

static fg_status csv_logger_init(const fg_host *host, void **state, fg_error *err)
{
    const char *section = host->section ? host->section : "callback.csv_logger";
    const char *filename = NULL;
    int64_t every = 10;
    if (host->get_string(host, "filename", &filename) != FG_OK || filename == NULL ||
        filename[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] filename: missing or empty", section);
    if (host->get_int(host, "flush_every_n_events", &every) != FG_OK || every < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "[%s] flush_every_n_events = %lld: must be an integer >= 1", section,
                            (long long)every);
    int hparams = 1;
    fg_status st = fg_plugin_read_hparams(host, section, &hparams, err);
    if (st != FG_OK)
        return st;
    csv_logger *cl = calloc(1, sizeof *cl);
    if (cl == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", section);
    cl->section = section;
    cl->filename = filename;
    cl->flush_every = every;
    cl->hparams = hparams != 0;
    cl->host = host;
    *state = cl;
    return FG_OK;
}

static void csv_logger_deinit(void *state)
{
    csv_logger *cl = state;
    if (cl == NULL)
        return;
    /* Teardown has no error channel: a failure here loses at most the pending rows. */
    fg_error why;
    if (cl->have_path)
        csv_file_flush(&cl->file, &cl->table, &why);
    csv_table_free(&cl->table);
    csv_file_free(&cl->file);
    free(cl);
}

/* mkdir -p for the folder part of path. Returns 0 or an errno value. */
static int make_parent_dirs(const char *path)
{
    char dir[CSV_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (mkdir(dir, 0777) != 0 && !(errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
            return errno == EEXIST ? ENOTDIR : errno;
        *p = saved;
        if (saved == '\0')
            return 0;
    }
}

static fg_status resolve_path(csv_logger *cl, const char *run_dir, fg_error *err)
{
    int n = cl->filename[0] == '/'
                ? snprintf(cl->file.path, sizeof cl->file.path, "%s", cl->filename)
                : snprintf(cl->file.path, sizeof cl->file.path, "%s/%s", run_dir, cl->filename);
    if (n < 0 || (size_t)n >= sizeof cl->file.path)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] filename = %s: path too long",
                            cl->section, cl->filename);
    int e = make_parent_dirs(cl->file.path);
    if (e != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] filename = %s: cannot create the "
                            "folder of %s: %s", cl->section, cl->filename, cl->file.path,
                            strerror(e));
    cl->have_path = 1;
    if (!cl->hparams)
        return FG_OK;
    char yaml[CSV_PATH_MAX];
    snprintf(yaml, sizeof yaml, "%s", cl->file.path);
    char *slash = strrchr(yaml, '/');
    size_t dir = slash ? (size_t)(slash - yaml) + 1 : 0;
    if (dir + sizeof "hparams.yaml" > sizeof yaml)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] hparams.yaml: path too long", cl->section);
    memcpy(yaml + dir, "hparams.yaml", sizeof "hparams.yaml");
    fg_error why = {0};
    fg_status st = hparams_yaml_write(cl->host, yaml, &why);
    return st == FG_OK ? FG_OK : fg_error_set(err, st, "[%s] %s", cl->section, why.message);
}

static fg_status flush_rows(csv_logger *cl, fg_error *err)
{
    fg_error why = {0};
    fg_status st = csv_file_flush(&cl->file, &cl->table, &why);
    if (st != FG_OK)
        return fg_error_set(err, st, "[%s] %s", cl->section, why.message);
    csv_table_clear_rows(&cl->table);
    return FG_OK;
}

/* Thread rule (callback.h): called from the trainer's thread, on every rank, in order. */
static fg_status csv_logger_on_event(void *state, const fg_event *event,
                                     fg_callback_action *action, fg_error *err)
{
    csv_logger *cl = state;
    (void)action; /* never stops training nor asks for a checkpoint */
    fg_status st = FG_PLUGIN_EVENT_NEEDS(event, run_dir, cl->section, err);
    if (st != FG_OK || !event->is_rank_zero)
        return st;
    if (!cl->have_path &&
        (st = resolve_path(cl, event->run_dir ? event->run_dir : ".", err)) != FG_OK)
        return st;
    if (event->metric_count > 0 && event->metrics != NULL &&
        csv_table_add_row(&cl->table, event->epoch, event->global_step, event->metrics,
                          event->metric_count) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", cl->section);
    if (event->type != FG_EVENT_TRAIN_STEP_END || (int64_t)cl->table.row_count >= cl->flush_every)
        return flush_rows(cl, err);
    return FG_OK;
}

FG_CALLBACK_PLUGIN_DEFINE("csv_logger", CSV_LOGGER_VERSION,
                          "writes every event's metrics as a row of run_dir/metrics.csv",
                          FG_PLUGIN_OPTIONS(csv_logger_options), csv_logger_init, csv_logger_deinit,
                          csv_logger_on_event, NULL);
