/* fulgur-callback-metrics_json.so: writes each trainer event's metrics as one JSON line.
 *
 *   [callback.metrics_json]
 *   path = runs/metrics.jsonl   ; required; truncated when the run starts
 *   every_n_events = 1          ; write the 1st, (n+1)th, (2n+1)th ... event
 *
 * One line looks like
 *   {"event":"train_step_end","epoch":0,"global_step":50,"step_in_epoch":50,
 *    "steps_per_epoch":469,"lr":0.01,"metrics":{"train/loss":0.61,"train/acc":0.78}}
 * (on one line). Non-finite values are written as null, which JSON can represent.
 *
 * An out-of-tree plugin: it includes only the installed SDK header and exports only the
 * descriptor fulgur_plugin_v1. All state lives in the instance; the file is opened at the
 * first event written, because only then does the plugin know whether it runs on rank 0,
 * the one rank that writes files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <fulgur/sdk.h>

#include "json_line.h"

#ifndef METRICS_JSON_VERSION
#define METRICS_JSON_VERSION "1.0.0"
#endif

typedef struct metrics_json {
    const fg_host *host;
    const char *section;    /* config section, for messages */
    const char *path;       /* owned by the host, lives as long as the instance */
    int64_t every_n_events; /* >= 1 */
    int64_t events_seen;
    FILE *file;             /* NULL until the first line is written (rank 0 only) */
} metrics_json;

static const fg_option metrics_json_options[] = {
    {.key = "path", .type = FG_OPT_STRING, .default_value = FG_OPT_REQUIRED,
     .min = 1, .max = 0, .help = "file to write, one JSON object per event; truncated at start"},
    {.key = "every_n_events", .type = FG_OPT_INT, .default_value = "1",
     .min = 1, .max = 1e9, .help = "write every n-th event (1: all of them)"},
};

static const char *event_name(uint32_t type)
{
    switch (type) {
    case FG_EVENT_FIT_START: return "fit_start";
    case FG_EVENT_EPOCH_START: return "epoch_start";
    case FG_EVENT_TRAIN_STEP_END: return "train_step_end";
    case FG_EVENT_VALIDATION_END: return "validation_end";
    case FG_EVENT_EPOCH_END: return "epoch_end";
    case FG_EVENT_FIT_END: return "fit_end";
    case FG_EVENT_TEST_END: return "test_end";
    case FG_EVENT_EXCEPTION: return "exception";
    }
    return "unknown"; /* an event type from a newer host: still logged */
}

static fg_status metrics_json_init(const fg_host *host, void **state, fg_error *err)
{
    const char *section = host->section ? host->section : "callback.metrics_json";
    const char *path = NULL;
    int64_t every = 1;

    /* The host validated the section against the schema already; these checks keep the
     * plugin safe under a host that did not (a test driver, a future embedding). */
    if (host->get_string(host, "path", &path) != FG_OK || path == NULL || path[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "[%s] path: required key missing or empty (the file to write)", section);
    if (host->get_int(host, "every_n_events", &every) != FG_OK || every < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "[%s] every_n_events = %lld: must be an integer >= 1", section,
                            (long long)every);

    metrics_json *mj = calloc(1, sizeof *mj);
    if (mj == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", section);
    mj->host = host;
    mj->section = section;
    mj->path = path;
    mj->every_n_events = every;
    *state = mj;
    return FG_OK;
}

static void metrics_json_deinit(void *state)
{
    metrics_json *mj = state;
    if (mj == NULL)
        return;
    if (mj->file != NULL)
        fclose(mj->file);
    free(mj);
}

static fg_status open_output(metrics_json *mj, fg_error *err)
{
    mj->file = fopen(mj->path, "w");
    if (mj->file == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] path = %s: cannot open for writing: %s",
                            mj->section, mj->path, strerror(errno));
    return FG_OK;
}

static void write_metrics(FILE *f, const fg_event *event)
{
    fputc('{', f);
    for (uint32_t i = 0; i < event->metric_count; i++) {
        if (i > 0)
            fputc(',', f);
        json_line_write_string(f, event->metrics[i].name ? event->metrics[i].name : "");
        fputc(':', f);
        json_line_write_number(f, event->metrics[i].value);
    }
    fputc('}', f);
}

static void write_line(FILE *f, const fg_event *event)
{
    fputs("{\"event\":", f);
    json_line_write_string(f, event_name(event->type));
    fprintf(f, ",\"epoch\":%lld,\"global_step\":%lld,\"step_in_epoch\":%lld,\"steps_per_epoch\":%lld",
            (long long)event->epoch, (long long)event->global_step,
            (long long)event->step_in_epoch, (long long)event->steps_per_epoch);
    fputs(",\"lr\":", f);
    json_line_write_number(f, event->learning_rate);
    fputs(",\"metrics\":", f);
    write_metrics(f, event);
    fputs("}\n", f);
}

/* Thread rule (callback.h): called from the trainer's thread, in event order. */
static fg_status metrics_json_on_event(void *state, const fg_event *event,
                                       fg_callback_action *action, fg_error *err)
{
    metrics_json *mj = state;
    (void)action; /* this callback never stops training nor asks for a checkpoint */

    /* Read a field only when the host's struct has it (fields are only ever appended). */
    if (!FG_HAS_FIELD(event, fg_event, is_rank_zero))
        return fg_error_set(err, FG_INCOMPATIBLE, "[%s] event struct of %u bytes is too old",
                            mj->section, event ? (unsigned)event->struct_size : 0u);

    int64_t index = mj->events_seen++;
    if (index % mj->every_n_events != 0 || !event->is_rank_zero)
        return FG_OK;
    if (mj->file == NULL) {
        fg_status st = open_output(mj, err);
        if (st != FG_OK)
            return st;
    }
    write_line(mj->file, event);
    /* Flushed per line: a crashed run keeps every line it wrote, and `tail -f` sees it. */
    if (fflush(mj->file) != 0 || ferror(mj->file))
        return fg_error_set(err, FG_INTERNAL, "[%s] path = %s: write failed: %s", mj->section,
                            mj->path, strerror(errno));
    return FG_OK;
}

FG_CALLBACK_PLUGIN_DEFINE("metrics_json", METRICS_JSON_VERSION,
                          "writes each event's metrics as one JSON line (JSON Lines) to a file",
                          FG_PLUGIN_OPTIONS(metrics_json_options), metrics_json_init,
                          metrics_json_deinit, metrics_json_on_event, NULL);
