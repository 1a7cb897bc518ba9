/* fulgur-callback-tensorboard.so: writes the trainer's metrics as TensorBoard scalars.
 *
 *   [callback.tensorboard]
 *   subdir = tb     ; under the run folder; an absolute path is used as is
 *   hparams = true  ; write the resolved config as the HParams dashboard's data
 *
 * Rank 0 creates run_dir/tb/events.out.tfevents.<unix_time>.<hostname> at the first event:
 * a file_version record ("brain.Event:2"), then one Event per trainer event that carries
 * metrics, at step = global_step, with one simple_value per metric (tag = the metric's
 * name, so train/... and val/... group as TensorBoard sections). Each record is flushed,
 * so `tensorboard --logdir runs` follows a live run.
 *
 * With hparams = true, fit start also writes the HParams plugin's experiment and
 * session_start_info summaries (every resolved config entry, read through
 * host->config_entry, as a hyperparameter "section.key"), and fit end (or an exception)
 * its session_end_info with the status: see tb_hparams.h for the encoding. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "callback_plugin.h"
#include "tb_event.h"
#include "tb_hparams.h"
#include "tb_paths.h"
#include "tfrecord.h"

#ifndef TENSORBOARD_VERSION
#define TENSORBOARD_VERSION "1.0.0"
#endif

#define TB_PATH_MAX 4096

typedef struct tensorboard {
    const char *section; /* for messages */
    const char *subdir;  /* owned by the host */
    const fg_host *host;
    int hparams;         /* write the HParams summaries */
    int session_open;    /* session_start_info written, session_end_info not yet */
    tfrecord_crc crc;
    tb_bytes record; /* reused for every event */
    FILE *file;      /* NULL until rank 0's first event */
    char path[TB_PATH_MAX];
} tensorboard;

static const fg_option tensorboard_options[] = {
    {.key = "subdir", .type = FG_OPT_STRING, .default_value = "tb", .min = 1, .max = 0,
     .help = "folder of the event files, under the run folder (absolute: used as is)"},
    {.key = "hparams", .type = FG_OPT_BOOL, .default_value = "true", .min = 1, .max = 0,
     .help = "write the resolved configuration for TensorBoard's HParams dashboard"},
};

static fg_status tensorboard_init(const fg_host *host, void **state, fg_error *err)
{
    const char *section = host->section ? host->section : "callback.tensorboard";
    const char *subdir = NULL;
    if (host->get_string(host, "subdir", &subdir) != FG_OK || subdir == NULL || subdir[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "[%s] subdir: missing or empty (the folder of the event files)",
                            section);
    int hparams = 1;
    fg_status st = fg_plugin_read_hparams(host, section, &hparams, err);
    if (st != FG_OK)
        return st;
    tensorboard *tb = calloc(1, sizeof *tb);
    if (tb == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", section);
    *tb = (tensorboard){.section = section, .subdir = subdir, .host = host,
                        .hparams = hparams != 0};
    tfrecord_crc_init(&tb->crc);
    *state = tb;
    return FG_OK;
}

static void tensorboard_deinit(void *state)
{
    tensorboard *tb = state;
    if (tb == NULL)
        return;
    tb_bytes_free(&tb->record);
    if (tb->file != NULL)
        fclose(tb->file);
    free(tb);
}

static double wall_seconds(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static fg_status write_record(tensorboard *tb, fg_error *err)
{
    if (tfrecord_write(tb->file, &tb->crc, tb->record.data, tb->record.len) != 0 ||
        fflush(tb->file) != 0)
        return fg_error_set(err, FG_INTERNAL, "[%s] %s: write failed: %s", tb->section, tb->path,
                            strerror(errno));
    return FG_OK;
}

/* Creates the folder and the file, and writes the file_version record TensorBoard
 * expects first. */
static fg_status open_event_file(tensorboard *tb, const char *run_dir, fg_error *err)
{
    char dir[TB_PATH_MAX];
    int n = tb->subdir[0] == '/' ? snprintf(dir, sizeof dir, "%s", tb->subdir)
                                 : snprintf(dir, sizeof dir, "%s/%s", run_dir, tb->subdir);
    if (n < 0 || (size_t)n >= sizeof dir)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] subdir = %s: path too long",
                            tb->section, tb->subdir);
    char failed[TB_PATH_MAX];
    int e = tb_make_dirs(dir, failed, sizeof failed);
    if (e != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] subdir = %s: cannot create %s: %s",
                            tb->section, tb->subdir, failed, strerror(e));
    double now = wall_seconds();
    tb->file = tb_create_event_file(dir, (time_t)now, tb->path, sizeof tb->path);
    if (tb->file == NULL)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] cannot create an event file in %s: %s",
                            tb->section, dir, strerror(errno));
    if (tb_encode_file_version(&tb->record, now, "brain.Event:2") != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", tb->section);
    return write_record(tb, err);
}

/* The HParams summaries: experiment and session start at fit start, the session's end
 * (success or failure) at fit end or an exception. */
static fg_status write_hparams(tensorboard *tb, uint32_t type, fg_error *err)
{
    int rc = 0;
    double now = wall_seconds();
    if (!tb->hparams)
        return FG_OK;
    if (type == FG_EVENT_FIT_START && !tb->session_open) {
        rc = tb_encode_hparams_experiment(&tb->record, now, tb->host);
        fg_status st = rc == 0 ? write_record(tb, err) : FG_OK;
        if (rc == 0 && st != FG_OK)
            return st;
        if (rc == 0)
            rc = tb_encode_hparams_session_start(&tb->record, now, tb->host);
        tb->session_open = rc == 0;
    } else if ((type == FG_EVENT_FIT_END || type == FG_EVENT_EXCEPTION) && tb->session_open) {
        rc = tb_encode_hparams_session_end(&tb->record, now, type == FG_EVENT_FIT_END
                                           ? TB_STATUS_SUCCESS : TB_STATUS_FAILURE);
        tb->session_open = 0;
    } else {
        return FG_OK;
    }
    if (rc != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", tb->section);
    return write_record(tb, err);
}

/* Thread rule (callback.h): called from the trainer's thread, on every rank, in order. */
static fg_status tensorboard_on_event(void *state, const fg_event *event,
                                      fg_callback_action *action, fg_error *err)
{
    tensorboard *tb = state;
    (void)action; /* never stops training nor asks for a checkpoint */
    fg_status st = FG_PLUGIN_EVENT_NEEDS(event, run_dir, tb->section, err);
    if (st != FG_OK || !event->is_rank_zero)
        return st;
    if (tb->file == NULL) {
        st = open_event_file(tb, event->run_dir ? event->run_dir : ".", err);
        if (st != FG_OK)
            return st;
    }
    st = write_hparams(tb, event->type, err);
    if (st != FG_OK || event->metric_count == 0 || event->metrics == NULL)
        return st;
    if (tb_encode_scalars(&tb->record, wall_seconds(), event->global_step, event->metrics,
                          event->metric_count) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", tb->section);
    return write_record(tb, err);
}

FG_CALLBACK_PLUGIN_DEFINE("tensorboard", TENSORBOARD_VERSION,
                          "writes metrics as TensorBoard scalars "
                          "(run_dir/tb/events.out.tfevents.*)",
                          FG_PLUGIN_OPTIONS(tensorboard_options), tensorboard_init,
                          tensorboard_deinit, tensorboard_on_event, NULL);
