/* fulgur-callback-progress.so: training progress on stdout.
 *
 *   [callback.progress]
 *   refresh_every_n_steps = 50   ; logs only: steps between two plain lines
 *   leave = true                 ; keep each finished epoch's line
 *
 * On a terminal (stdout is a tty) one line is redrawn in place with "\r" at every step
 * event the trainer sends (one per log_every_n_steps):
 *   epoch 2/? [#######.............] 180/469  34.1 it/s  ETA 0:08  loss 0.4123 acc 0.86
 * The epoch's line is finished at its last step event (or at the epoch's end when the run
 * stopped early): drawn full with the time the epoch took and ended with a newline
 * (leave = true) or erased (leave = false). Finishing at the last step, before the epoch
 * end event, matters: the trainer prints its epoch summary in between, and it must start
 * on a line of its own.
 * Anywhere else (a log file, CI), plain lines without the bar, at most one per
 * refresh_every_n_steps steps, and the finished line when leave is set.
 *
 * it/s comes from the trainer's time/step_s metric when it sends one, else from the wall
 * clock between events; the ETA is the epoch's remaining steps over it/s. Only rank 0
 * prints. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "callback_plugin.h"
#include "progress_format.h"

#ifndef PROGRESS_VERSION
#define PROGRESS_VERSION "1.0.0"
#endif

#define LINE_CHARS 256

typedef struct progress {
    const char *section;
    int64_t refresh_every; /* >= 1; plain lines only */
    int leave;
    int tty;               /* stdout is a terminal: draw the bar in place */
    int bar_open;          /* a bar is on screen without its newline */
    double last_time;      /* monotonic seconds of the previous event */
    int64_t last_step;     /* global_step of the previous event */
    int64_t epoch;         /* the epoch epoch_start belongs to */
    double epoch_start;    /* monotonic seconds when this epoch's steps began */
    int64_t last_printed;  /* global_step of the last plain line */
    double it_per_s;       /* the last known speed; 0: unknown */
    int64_t finished_epoch; /* the epoch whose line was finished; -1: none yet */
} progress;

static const fg_option progress_options[] = {
    {.key = "refresh_every_n_steps", .type = FG_OPT_INT, .default_value = "50", .min = 1,
     .max = 1e9, .help = "when stdout is not a terminal: steps between two plain lines"},
    {.key = "leave", .type = FG_OPT_BOOL, .default_value = "true", .min = 1, .max = 0,
     .help = "keep each finished epoch's progress line"},
};

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static fg_status progress_init(const fg_host *host, void **state, fg_error *err)
{
    const char *section = host->section ? host->section : "callback.progress";
    int64_t every = 50;
    int leave = 1;
    if (host->get_int(host, "refresh_every_n_steps", &every) != FG_OK || every < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "[%s] refresh_every_n_steps = %lld: must be an integer >= 1",
                            section, (long long)every);
    if (host->get_bool(host, "leave", &leave) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] leave: not a boolean", section);
    progress *p = calloc(1, sizeof *p);
    if (p == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "[%s] out of memory", section);
    p->section = section;
    p->refresh_every = every;
    p->leave = leave != 0;
    p->tty = isatty(STDOUT_FILENO);
    p->last_time = p->epoch_start = monotonic_seconds();
    p->finished_epoch = -1;
    *state = p;
    return FG_OK;
}

static void progress_deinit(void *state)
{
    progress *p = state;
    if (p != NULL && p->bar_open) {
        fputc('\n', stdout); /* never leave the shell prompt on the bar's line */
        fflush(stdout);
    }
    free(p);
}

/* The value of a named metric, when the event carries it. */
static int find_metric(const fg_event *e, const char *name, double *out)
{
    for (uint32_t i = 0; e->metrics != NULL && i < e->metric_count; i++)
        if (e->metrics[i].name != NULL && strcmp(e->metrics[i].name, name) == 0) {
            *out = e->metrics[i].value;
            return 1;
        }
    return 0;
}

/* Speed over the steps since the previous event: the trainer's own mean step time when
 * it sends one (it excludes logging), else the wall clock. */
static void update_speed(progress *p, const fg_event *e, double now)
{
    double step_s;
    if (find_metric(e, "time/step_s", &step_s) && step_s > 0)
        p->it_per_s = 1 / step_s;
    else if (e->global_step > p->last_step && now > p->last_time)
        p->it_per_s = (double)(e->global_step - p->last_step) / (now - p->last_time);
}

/* "\r", the line, and erase-to-end-of-line so a shorter line leaves no stale tail. */
static void draw_bar(progress *p, const char *line)
{
    fputc('\r', stdout);
    fputs(line, stdout);
    fputs("\033[K", stdout);
    fflush(stdout);
    p->bar_open = 1;
}

static void print_line(const char *line)
{
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

static void end_open_bar(progress *p)
{
    if (!p->bar_open)
        return;
    fputc('\n', stdout);
    fflush(stdout);
    p->bar_open = 0;
}

/* The epoch's last line: full, with the time the epoch took; kept or erased (leave). */
static void finish_epoch(progress *p, const fg_event *e, progress_view v, double now)
{
    v.finished = 1;
    v.elapsed_s = now - p->epoch_start;
    char line[LINE_CHARS];
    progress_format_line(line, sizeof line, &v, p->tty);
    if (p->tty && p->leave) {
        draw_bar(p, line);
        end_open_bar(p);
    } else if (p->tty) {
        fputs("\r\033[K", stdout); /* erase the bar: the next output starts clean */
        fflush(stdout);
        p->bar_open = 0;
    } else if (p->leave) {
        print_line(line);
    }
    p->last_printed = e->global_step;
    p->finished_epoch = e->epoch;
}

static void on_step(progress *p, const fg_event *e, double now)
{
    progress_view v = {.epoch = e->epoch + 1, .done = e->step_in_epoch,
                       .total = e->steps_per_epoch, .it_per_s = p->it_per_s};
    v.has_loss = find_metric(e, "train/step_loss", &v.loss);
    v.has_acc = find_metric(e, "train/step_acc", &v.acc);
    if (v.total > 0 && v.done >= v.total) {
        finish_epoch(p, e, v, now);
        return;
    }
    char line[LINE_CHARS];
    if (p->tty) {
        progress_format_line(line, sizeof line, &v, 1);
        draw_bar(p, line);
    } else if (e->global_step - p->last_printed >= p->refresh_every) {
        progress_format_line(line, sizeof line, &v, 0);
        print_line(line);
        p->last_printed = e->global_step;
    }
}

/* An epoch that ended before its last step (max_steps, a callback's stop) is finished
 * here, with the epoch's mean loss and accuracy. */
static void on_epoch_end(progress *p, const fg_event *e, double now)
{
    if (p->finished_epoch == e->epoch)
        return;
    progress_view v = {.epoch = e->epoch + 1, .done = e->step_in_epoch,
                       .total = e->steps_per_epoch, .it_per_s = p->it_per_s};
    v.has_loss = find_metric(e, "train/loss", &v.loss);
    v.has_acc = find_metric(e, "train/acc", &v.acc);
    finish_epoch(p, e, v, now);
}

/* Thread rule (callback.h): called from the trainer's thread, on every rank, in order. */
static fg_status progress_on_event(void *state, const fg_event *event,
                                   fg_callback_action *action, fg_error *err)
{
    progress *p = state;
    (void)action; /* never stops training nor asks for a checkpoint */
    fg_status st = FG_PLUGIN_EVENT_NEEDS(event, is_rank_zero, p->section, err);
    if (st != FG_OK || !event->is_rank_zero)
        return st;
    double now = monotonic_seconds();
    switch (event->type) {
    case FG_EVENT_FIT_START:
        p->last_printed = event->global_step;
        p->epoch_start = now;
        p->epoch = event->epoch;
        break;
    case FG_EVENT_TRAIN_STEP_END:
        /* A new epoch's clock starts when the trainer was done with the previous one's
         * events (its validation included); a validation inside an epoch does not reset it. */
        if (event->epoch != p->epoch) {
            p->epoch = event->epoch;
            p->epoch_start = p->last_time;
        }
        update_speed(p, event, now);
        on_step(p, event, now);
        break;
    case FG_EVENT_EPOCH_END:
        on_epoch_end(p, event, now);
        break;
    default:
        /* Validation, fit end, test, exception: whatever prints next gets its own line. */
        end_open_bar(p);
        break;
    }
    p->last_time = now;
    p->last_step = event->global_step;
    return FG_OK;
}

static const fg_callback_vtable progress_vtable = {
    .struct_size = sizeof(fg_callback_vtable),
    .on_event = progress_on_event,
};

FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
    FG_PLUGIN_HEADER(FG_KIND_CALLBACK, 0),
    .name = "progress",
    .version = PROGRESS_VERSION,
    .description = "a live progress bar on a terminal, plain periodic lines otherwise",
    FG_PLUGIN_OPTIONS(progress_options),
    .init = progress_init,
    .deinit = progress_deinit,
    .vtable = &progress_vtable,
};
