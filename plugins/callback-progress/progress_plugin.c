/* fulgur-callback-progress.so: training progress on stdout.
 *
 *   [callback.progress]
 *   refresh_every_n_steps = 50   ; logs only: steps between two plain lines
 *   leave = true                 ; keep the bar in each epoch's summary line
 *
 * The trainer runs this callback without a section when stdout is a terminal and no MPI
 * launcher started the process (unless [trainer] enable_progress_bar = false); a config
 * may also name it.
 *
 * On a terminal (stdout is a tty) one line is redrawn in place ("\r", the line, erase to
 * the end of the line) at every step and validation event the trainer sends:
 *   epoch 2/3 [#######.............] 180/469  34.1 it/s  ETA 0:08  loss 0.4123 acc 0.86
 * At the epoch's end event (after its validation) the line becomes the epoch's summary and
 * stays: the epoch's mean training loss and accuracy, the validation metrics, the time the
 * epoch took, ended with a newline; with leave = false the summary is written without the
 * bar. The line is fitted to the terminal's width (progress_format.h), read at every draw,
 * so a narrow or resized terminal never wraps it. The bar's done part is coloured unless
 * NO_COLOR is set (to anything but an empty string) or TERM is "dumb".
 *
 * The terminal is shared: while a bar is drawn the trainer prints no per-step, epoch or
 * validation lines of its own, erases the bar's line before each event's callbacks run and
 * calls this callback last, so whatever other callbacks print lands on a clean line and
 * the bar is drawn again below it.
 *
 * Anywhere else (a log file, CI), plain lines without the bar, at most one per
 * refresh_every_n_steps steps, and the finished line of each epoch at its last step when
 * leave is set (the trainer prints its own epoch summary after it).
 *
 * it/s comes from the trainer's time/step_s metric when it sends one, else from the wall
 * clock between events; the ETA is the epoch's remaining steps over it/s. Only rank 0
 * prints. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "callback_plugin.h"
#include "progress_format.h"

#ifndef PROGRESS_VERSION
#define PROGRESS_VERSION "1.1.0"
#endif

#define LINE_CHARS 640

typedef struct progress {
    const char *section;
    int64_t refresh_every; /* >= 1; plain lines only */
    int leave;
    int tty;               /* stdout is a terminal: draw the bar in place */
    int color;             /* colour the bar (a terminal without NO_COLOR) */
    int bar_open;          /* a bar is on screen without its newline */
    double last_time;      /* monotonic seconds of the previous event */
    int64_t last_step;     /* global_step of the previous event */
    int64_t epoch;         /* the epoch epoch_start belongs to */
    double epoch_start;    /* monotonic seconds when this epoch's steps began */
    int64_t last_printed;  /* global_step of the last plain line */
    double it_per_s;       /* the last known speed; 0: unknown */
    int64_t finished_epoch; /* the epoch whose line was finished; -1: none yet */
    progress_view view;    /* the latest state of the epoch on screen (terminals) */
} progress;

static const fg_option progress_options[] = {
    {.key = "refresh_every_n_steps", .type = FG_OPT_INT, .default_value = "50", .min = 1,
     .max = 1e9, .help = "when stdout is not a terminal: steps between two plain lines"},
    {.key = "leave", .type = FG_OPT_BOOL, .default_value = "true", .min = 1, .max = 0,
     .help = "keep the bar in each epoch's summary line (logs: keep each finished line)"},
};

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* https://no-color.org: present and not empty switches colour off. */
static int color_wanted(void)
{
    const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
    return !(no != NULL && no[0] != '\0') && !(term != NULL && strcmp(term, "dumb") == 0);
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
    p->color = p->tty && color_wanted();
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

/* Columns a line may use: one less than the terminal's, so the cursor never wraps. */
static int line_width(void)
{
    struct winsize ws;
    int cols = 0;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
        cols = ws.ws_col;
    if (cols <= 0) {
        const char *env = getenv("COLUMNS");
        cols = env != NULL ? atoi(env) : 0;
    }
    if (cols <= 0)
        cols = 80;
    return cols > 1 ? cols - 1 : 1;
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

static void draw_bar(progress *p, const progress_view *v)
{
    char line[LINE_CHARS];
    progress_style style = {1, line_width(), p->color};
    progress_format_line(line, sizeof line, v, &style);
    fputc('\r', stdout);
    fputs(line, stdout);
    fputs("\033[K", stdout); /* a shorter line leaves no stale tail */
    fflush(stdout);
    p->bar_open = 1;
}

static void print_line(const char *line)
{
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* The bar as last drawn, kept with a newline: what prints next gets its own line. Drawn
 * again first, as the trainer may have erased it before this event. */
static void end_open_bar(progress *p)
{
    if (!p->bar_open)
        return;
    if (p->tty && p->view.epoch > 0)
        draw_bar(p, &p->view);
    fputc('\n', stdout);
    fflush(stdout);
    p->bar_open = 0;
}

static progress_view epoch_view(const progress *p, const fg_event *e)
{
    progress_view v = {.epoch = e->epoch + 1, .done = e->step_in_epoch,
                       .total = e->steps_per_epoch, .it_per_s = p->it_per_s};
    if (FG_HAS_FIELD(e, fg_event, max_epochs))
        v.max_epochs = e->max_epochs;
    return v;
}

/* ---- terminals: one line redrawn in place, a summary line left per epoch ------------- */

/* The bar's view of e: its train metrics (loss, acc, ppl: their names), and the epoch's
 * validation metrics kept from the bar on screen. */
static progress_view tty_view(const progress *p, const fg_event *e, const char *loss,
                              const char *acc, const char *ppl)
{
    progress_view v = epoch_view(p, e);
    if (p->view.epoch == v.epoch) {
        v.has_val_loss = p->view.has_val_loss;
        v.val_loss = p->view.val_loss;
        v.has_val_acc = p->view.has_val_acc;
        v.val_acc = p->view.val_acc;
        v.has_val_ppl = p->view.has_val_ppl;
        v.val_ppl = p->view.val_ppl;
    }
    v.has_loss = find_metric(e, loss, &v.loss);
    v.has_acc = find_metric(e, acc, &v.acc);
    v.has_ppl = find_metric(e, ppl, &v.ppl);
    return v;
}

static void tty_step(progress *p, const fg_event *e)
{
    p->view = tty_view(p, e, "train/step_loss", "train/step_acc", "train/step_ppl");
    draw_bar(p, &p->view);
}

static void tty_validation(progress *p, const fg_event *e)
{
    if (p->view.epoch != e->epoch + 1 || p->finished_epoch == e->epoch)
        return; /* no bar of this epoch on screen (e.g. `fulgur validate`) */
    p->view.has_val_loss = find_metric(e, "val/loss", &p->view.val_loss);
    p->view.has_val_acc = find_metric(e, "val/acc", &p->view.val_acc);
    p->view.has_val_ppl = find_metric(e, "val/ppl", &p->view.val_ppl);
    draw_bar(p, &p->view);
}

static void tty_epoch_end(progress *p, const fg_event *e, double now)
{
    progress_view v = tty_view(p, e, "train/loss", "train/acc", "train/ppl");
    v.finished = 1;
    v.elapsed_s = now - p->epoch_start;
    char line[LINE_CHARS];
    progress_style style = {p->leave, line_width(), p->color};
    progress_format_line(line, sizeof line, &v, &style);
    fputc('\r', stdout);
    fputs(line, stdout);
    fputs("\033[K\n", stdout);
    fflush(stdout);
    p->bar_open = 0;
    p->finished_epoch = e->epoch;
    memset(&p->view, 0, sizeof p->view);
}

/* ---- logs: plain periodic lines -------------------------------------------------------- */

/* The epoch's last line: full, with the time the epoch took; kept when leave is set. */
static void plain_finish(progress *p, const fg_event *e, progress_view v, double now)
{
    v.finished = 1;
    v.elapsed_s = now - p->epoch_start;
    if (p->leave) {
        char line[LINE_CHARS];
        progress_style style = {0, 0, 0};
        progress_format_line(line, sizeof line, &v, &style);
        print_line(line);
    }
    p->last_printed = e->global_step;
    p->finished_epoch = e->epoch;
}

/* The epoch's line is finished at its last step event, before the trainer prints its own
 * epoch summary, or at the epoch's end when the run stopped early. */
static void plain_step(progress *p, const fg_event *e, double now)
{
    progress_view v = epoch_view(p, e);
    v.has_loss = find_metric(e, "train/step_loss", &v.loss);
    v.has_acc = find_metric(e, "train/step_acc", &v.acc);
    v.has_ppl = find_metric(e, "train/step_ppl", &v.ppl);
    if (v.total > 0 && v.done >= v.total) {
        plain_finish(p, e, v, now);
        return;
    }
    if (e->global_step - p->last_printed >= p->refresh_every) {
        char line[LINE_CHARS];
        progress_style style = {0, 0, 0};
        progress_format_line(line, sizeof line, &v, &style);
        print_line(line);
        p->last_printed = e->global_step;
    }
}

/* An epoch that ended before its last step (max_steps, a callback's stop), with the
 * epoch's mean loss and accuracy. */
static void plain_epoch_end(progress *p, const fg_event *e, double now)
{
    if (p->finished_epoch == e->epoch)
        return;
    progress_view v = epoch_view(p, e);
    v.has_loss = find_metric(e, "train/loss", &v.loss);
    v.has_acc = find_metric(e, "train/acc", &v.acc);
    v.has_ppl = find_metric(e, "train/ppl", &v.ppl);
    plain_finish(p, e, v, now);
}

static void on_step(progress *p, const fg_event *e, double now)
{
    /* A new epoch's clock starts when the trainer was done with the previous one's events
     * (its validation included); a validation inside an epoch does not reset it. */
    if (e->epoch != p->epoch) {
        p->epoch = e->epoch;
        p->epoch_start = p->last_time;
    }
    update_speed(p, e, now);
    if (p->tty)
        tty_step(p, e);
    else
        plain_step(p, e, now);
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
        on_step(p, event, now);
        break;
    case FG_EVENT_VALIDATION_END:
        if (p->tty)
            tty_validation(p, event);
        break;
    case FG_EVENT_EPOCH_END:
        if (p->tty)
            tty_epoch_end(p, event, now);
        else
            plain_epoch_end(p, event, now);
        break;
    default:
        /* Fit end, test, exception: the bar, if one is open, stays as it was. */
        end_open_bar(p);
        break;
    }
    p->last_time = now;
    p->last_step = event->global_step;
    return FG_OK;
}

FG_CALLBACK_PLUGIN_DEFINE("progress", PROGRESS_VERSION,
                          "a live progress bar on a terminal, plain periodic lines otherwise",
                          FG_PLUGIN_OPTIONS(progress_options), progress_init, progress_deinit,
                          progress_on_event, NULL);
