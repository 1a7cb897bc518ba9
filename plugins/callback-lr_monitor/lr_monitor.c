/* fulgur-callback-lr_monitor.so: records the learning rate in a CSV file.
 *
 *   [callback.lr_monitor]
 *   logging_interval = epoch   ; step: a row at every logged training step; epoch: at each epoch end
 *   filename = lr.csv          ; relative to the run folder unless absolute
 *
 * The file is written by rank 0 only, truncated when its first row is written, flushed
 * after every row; it reads
 *   step,epoch,lr
 *   469,0,0.01
 * with the global step, the 0-based epoch and the rate as the event gives it. The rate also
 * goes to the host's metrics sink as "lr". Nothing is printed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fulgur/callback.h>

#include "number_text.h"
#include "output_file.h"

#ifndef LR_MONITOR_VERSION
#define LR_MONITOR_VERSION "1.0.0"
#endif

typedef struct lr_monitor {
    const fg_host *host;
    uint32_t event;        /* FG_EVENT_TRAIN_STEP_END or FG_EVENT_EPOCH_END */
    const char *filename;  /* owned by the host */
    char path[4096];       /* run_dir joined with filename, set at the first row */
    FILE *file;            /* rank 0, from the first row on */
} lr_monitor;

static const fg_option lr_monitor_options[] = {
    {.key = "logging_interval", .type = FG_OPT_ENUM, .default_value = "epoch", .min = 1,
     .max = 0, .choices = "step|epoch",
     .help = "step: a row at every logged training step; epoch: a row at each epoch end"},
    {.key = "filename", .type = FG_OPT_STRING, .default_value = "lr.csv", .min = 1, .max = 0,
     .help = "CSV file (step,epoch,lr), relative to the run folder unless absolute"},
};

static fg_status lr_monitor_init(const fg_host *host, void **state, fg_error *err)
{
    const char *interval = NULL, *filename = NULL;
    if (host->get_string(host, "logging_interval", &interval) != FG_OK ||
        host->get_string(host, "filename", &filename) != FG_OK)
        return fg_error_set(err, FG_INTERNAL, "the host did not serve the declared options");
    if (strcmp(interval, "step") != 0 && strcmp(interval, "epoch") != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "logging_interval = '%s': expected step or epoch", interval);
    if (filename == NULL || filename[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "filename is empty; name the CSV file to write");
    lr_monitor *lm = calloc(1, sizeof *lm);
    if (lm == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    lm->host = host;
    lm->event = strcmp(interval, "step") == 0 ? FG_EVENT_TRAIN_STEP_END : FG_EVENT_EPOCH_END;
    lm->filename = filename;
    *state = lm;
    return FG_OK;
}

static void lr_monitor_deinit(void *state)
{
    lr_monitor *lm = state;
    if (lm != NULL && lm->file != NULL)
        fclose(lm->file);
    free(lm);
}

/* The run folder is known only from the events, so the file opens at the first row. */
static fg_status open_file(lr_monitor *lm, const char *run_dir, fg_error *err)
{
    int n = lm->filename[0] == '/' || run_dir == NULL || run_dir[0] == '\0'
                ? snprintf(lm->path, sizeof lm->path, "%s", lm->filename)
                : snprintf(lm->path, sizeof lm->path, "%s/%s", run_dir, lm->filename);
    if (n < 0 || (size_t)n >= sizeof lm->path)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "filename = %s: the path in run folder %s "
                            "is too long", lm->filename, run_dir ? run_dir : "");
    fg_error why = {0};
    fg_status st = fg_output_open(lm->path, "w", &lm->file, &why);
    if (st != FG_OK)
        return fg_error_set(err, st, "filename = %s: %s", lm->filename, why.message);
    fputs("step,epoch,lr\n", lm->file);
    return FG_OK;
}

/* Thread rule (callback.h): the trainer's thread, every rank, in event order. */
static fg_status lr_monitor_on_event(void *state, const fg_event *ev, fg_callback_action *action,
                                     fg_error *err)
{
    lr_monitor *lm = state;
    (void)action; /* never stops training nor asks for a checkpoint */
    if (!FG_HAS_FIELD(ev, fg_event, run_dir))
        return fg_error_set(err, FG_INCOMPATIBLE, "event struct of %u bytes from an older host "
                            "is too small", ev ? (unsigned)ev->struct_size : 0u);
    if (ev->type != lm->event || !ev->is_rank_zero)
        return FG_OK;
    if (lm->file == NULL) {
        fg_status st = open_file(lm, ev->run_dir, err);
        if (st != FG_OK)
            return st;
    }
    char rate[40];
    fg_plugin_format_double(rate, sizeof rate, ev->learning_rate);
    fprintf(lm->file, "%lld,%lld,%s\n", (long long)ev->global_step, (long long)ev->epoch, rate);
    /* Flushed per row: a crashed run keeps what it logged. */
    if (fflush(lm->file) != 0 || ferror(lm->file))
        return fg_error_set(err, FG_INTERNAL, "filename = %s: writing %s failed: %s", lm->filename,
                            lm->path, strerror(errno));
    if (lm->host->metric != NULL)
        lm->host->metric(lm->host, "lr", ev->learning_rate, ev->global_step);
    return FG_OK;
}

FG_CALLBACK_PLUGIN_DEFINE("lr_monitor", LR_MONITOR_VERSION,
                          "writes the learning rate per step or per epoch to a CSV file in the run "
                          "folder",
                          FG_PLUGIN_OPTIONS(lr_monitor_options), lr_monitor_init, lr_monitor_deinit,
                          lr_monitor_on_event, NULL);
