/* callback2.progress.*: the progress callback's plain lines when stdout is a file (exact
 * text), and, case tty_driver, a scripted run on a real terminal that progress_tmux.sh
 * starts inside tmux and reads back from the screen. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_test.h"

#define NAME "progress"

static const fg_plugin *plugin(void)
{
    return fg_test_need_plugin(FG_TEST_PLUGIN, FG_KIND_CALLBACK, NAME);
}

/* One scripted event: a step event carries step time, loss and accuracy; an epoch end
 * the epoch's means; a validation end its loss and accuracy. */
typedef struct scripted {
    uint32_t type;
    int64_t epoch, global_step, step_in_epoch;
    double step_s, loss, acc;
} scripted;

static int erase_before_events; /* as the trainer does while a bar is drawn (tty_driver) */

static void play(const fg_plugin *p, void *s, const scripted *ev, int n, int64_t steps_per_epoch,
                 int rank0)
{
    for (int i = 0; i < n; i++) {
        if (erase_before_events) {
            fputs("\r\033[K", stdout);
            fflush(stdout);
        }
        fg_event e = cb_event(ev[i].type, ev[i].epoch, ev[i].global_step, ".");
        e.step_in_epoch = ev[i].step_in_epoch;
        e.steps_per_epoch = steps_per_epoch;
        e.is_rank_zero = rank0;
        fg_metric m[3];
        uint32_t count = 0;
        if (ev[i].type == FG_EVENT_TRAIN_STEP_END) {
            m[count++] = (fg_metric){"train/step_loss", ev[i].loss};
            m[count++] = (fg_metric){"train/step_acc", ev[i].acc};
            m[count++] = (fg_metric){"time/step_s", ev[i].step_s};
        } else if (ev[i].type == FG_EVENT_EPOCH_END) {
            m[count++] = (fg_metric){"train/loss", ev[i].loss};
            m[count++] = (fg_metric){"train/acc", ev[i].acc};
        } else if (ev[i].type == FG_EVENT_VALIDATION_END) {
            m[count++] = (fg_metric){"val/loss", ev[i].loss};
            m[count++] = (fg_metric){"val/acc", ev[i].acc};
        }
        cb_event_metrics(&e, m, count);
        fg_error err = {0};
        CHECK(cb_send(p, s, &e, &err) == FG_OK, "event %d: %s", i, err.message);
    }
}

/* The elapsed time of a finished epoch comes from the wall clock: "time 0:00" reads as
 * "time T" so the comparison does not depend on the machine's speed. */
static void mask_times(char *text)
{
    for (char *p = strstr(text, "time "); p != NULL; p = strstr(p, "time ")) {
        p += 5;
        char *q = p;
        while (isdigit((unsigned char)*q) || *q == ':')
            q++;
        if (q == p)
            continue;
        *p = 'T';
        memmove(p + 1, q, strlen(q) + 1);
    }
}

/* Two epochs of 200 steps, a step event every 50 steps at 20 ms a step (50 it/s). */
static const scripted two_epochs[] = {
    {FG_EVENT_FIT_START, 0, 0, 0, 0, 0, 0},
    {FG_EVENT_TRAIN_STEP_END, 0, 50, 50, 0.02, 0.9, 0.25},
    {FG_EVENT_TRAIN_STEP_END, 0, 100, 100, 0.02, 0.6, 0.5},
    {FG_EVENT_TRAIN_STEP_END, 0, 150, 150, 0.02, 0.5, 0.625},
    {FG_EVENT_TRAIN_STEP_END, 0, 200, 200, 0.02, 0.4123, 0.86},
    {FG_EVENT_EPOCH_END, 0, 200, 200, 0, 0.45, 0.8},
    {FG_EVENT_VALIDATION_END, 0, 200, 200, 0, 0, 0},
    {FG_EVENT_TRAIN_STEP_END, 1, 250, 50, 0.025, 0.35, 0.875},
    {FG_EVENT_TRAIN_STEP_END, 1, 300, 100, 0.025, 0.3, 0.9},
    {FG_EVENT_EPOCH_END, 1, 300, 100, 0, 0.32, 0.89}, /* stopped early (max_steps) */
    {FG_EVENT_FIT_END, 1, 300, 100, 0, 0, 0},
};

static char *run_plain(const char *base, const char *name, fg_fake_host *h, int rank0)
{
    char dir[4096], out[4200];
    cb_scratch(dir, sizeof dir, base, name);
    snprintf(out, sizeof out, "%s/stdout.txt", dir);
    const fg_plugin *p = h->plugin;
    cb_capture_begin(out); /* before init: the plugin asks isatty(1) there */
    void *s = NULL;
    fg_error err = {0};
    fg_status st = p->init(&h->host, &s, &err);
    CHECK(st == FG_OK, "init: %s", err.message);
    if (st == FG_OK) {
        play(p, s, two_epochs, (int)(sizeof two_epochs / sizeof two_epochs[0]), 200, rank0);
        p->deinit(s);
    }
    char *text = cb_capture_end();
    mask_times(text);
    return text;
}

/* Not a terminal: plain lines, at most one per refresh_every_n_steps (100 here, so every
 * other step event); an epoch's line is finished at its last step (epoch 1, step metrics)
 * or at its end event when it stopped early (epoch 2, the epoch's means). */
static void case_plain(const char *base)
{
    fg_fake_host h;
    cb_host_init(&h, plugin());
    fg_fake_host_set(&h, "refresh_every_n_steps", "100");
    char *out = run_plain(base, "plain", &h, 1);
    CHECK_STR(out, "epoch 1/? 100/200  50.0 it/s  ETA 0:02  loss 0.6000 acc 0.50\n"
                    "epoch 1/? 200/200  50.0 it/s  time T  loss 0.4123 acc 0.86\n"
                    "epoch 2/? 100/200  40.0 it/s  ETA 0:03  loss 0.3000 acc 0.90\n"
                    "epoch 2/? 100/200  40.0 it/s  time T  loss 0.3200 acc 0.89\n");
    free(out);
}

/* Defaults (refresh 50): a line per step event; leave = false: no finished lines. */
static void case_no_leave(const char *base)
{
    fg_fake_host h;
    cb_host_init(&h, plugin());
    fg_fake_host_set(&h, "leave", "false");
    char *out = run_plain(base, "no_leave", &h, 1);
    CHECK_STR(out, "epoch 1/? 50/200  50.0 it/s  ETA 0:03  loss 0.9000 acc 0.25\n"
                    "epoch 1/? 100/200  50.0 it/s  ETA 0:02  loss 0.6000 acc 0.50\n"
                    "epoch 1/? 150/200  50.0 it/s  ETA 0:01  loss 0.5000 acc 0.62\n"
                    "epoch 2/? 50/200  40.0 it/s  ETA 0:04  loss 0.3500 acc 0.88\n"
                    "epoch 2/? 100/200  40.0 it/s  ETA 0:03  loss 0.3000 acc 0.90\n");
    free(out);
}

static void case_rank_nonzero(const char *base)
{
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run_plain(base, "rank_nonzero", &h, 0);
    CHECK_STR(out, "");
    free(out);
}

static void case_bad_option(const char *base)
{
    (void)base;
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    fg_fake_host_set(&h, "refresh_every_n_steps", "-3");
    void *s = NULL;
    fg_error err = {0};
    CHECK(p->init(&h.host, &s, &err) == FG_INVALID_ARGUMENT, "init must refuse -3");
    CHECK_STR(err.message, "[callback.progress] refresh_every_n_steps = -3: must be an "
                            "integer >= 1");
}

static void case_descriptor(const char *base)
{
    (void)base;
    const fg_plugin *p = plugin();
    CHECK(p->option_count == 2, "%u options", p->option_count);
    CHECK(strcmp(p->options[0].key, "refresh_every_n_steps") == 0 &&
              strcmp(p->options[0].default_value, "50") == 0, "refresh_every_n_steps option");
    CHECK(strcmp(p->options[1].key, "leave") == 0 &&
              strcmp(p->options[1].default_value, "true") == 0, "leave option");
}

/* Run by progress_tmux.sh on a tmux terminal, as the trainer drives the bar: its line
 * erased before each event, no epoch or validation line of the trainer's own. The first
 * bar is drawn long (a 2000 s step: "s/it" and a three-field ETA) and the later ones are
 * shorter, so a redraw that did not erase to the end of the line would leave a visible
 * stale tail. A line another callback prints at an event lands on a line of its own, the
 * bar drawn again below it; the epoch's summary (mean loss, validation metrics) stays at
 * its end event. */
static void case_tty_driver(const char *base)
{
    (void)base;
    if (!isatty(STDOUT_FILENO)) {
        fprintf(stderr, "tty_driver: stdout is not a terminal\n");
        fg_test_failures++;
        return;
    }
    static const scripted ev[] = {
        {FG_EVENT_FIT_START, 0, 0, 0, 0, 0, 0},
        {FG_EVENT_TRAIN_STEP_END, 0, 2, 2, 2000, 0.9, 0.1},
        {FG_EVENT_TRAIN_STEP_END, 0, 4, 4, 0.02, 0.5, 0.5},
    };
    static const scripted ev2[] = {
        {FG_EVENT_TRAIN_STEP_END, 0, 8, 8, 0.02, 0.3, 0.7},
        {FG_EVENT_VALIDATION_END, 0, 8, 8, 0, 0.35, 0.75},
        {FG_EVENT_EPOCH_END, 0, 8, 8, 0, 0.4, 0.6},
        {FG_EVENT_TRAIN_STEP_END, 1, 10, 2, 0.02, 0.25, 0.7},
        {FG_EVENT_TRAIN_STEP_END, 1, 12, 4, 0.02, 0.25, 0.7},
        {FG_EVENT_EPOCH_END, 1, 12, 4, 0, 0.28, 0.69}, /* stopped early */
        {FG_EVENT_FIT_END, 1, 12, 4, 0, 0, 0},
    };
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    void *s = NULL;
    fg_error err = {0};
    if (p->init(&h.host, &s, &err) != FG_OK) {
        fprintf(stderr, "init: %s\n", err.message);
        fg_test_failures++;
        return;
    }
    erase_before_events = 1;
    play(p, s, ev, (int)(sizeof ev / sizeof ev[0]), 8, 1);
    /* Another callback, called before the bar at the next event, prints a line. */
    fputs("\r\033[K", stdout);
    printf("checkpoint: a line of another callback\n");
    play(p, s, ev2, (int)(sizeof ev2 / sizeof ev2[0]), 8, 1);
    p->deinit(s);
    printf("driver done\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static const fg_test_case cases[] = {
        {"descriptor", .run_arg = case_descriptor},
        {"plain", .run_arg = case_plain},
        {"no_leave", .run_arg = case_no_leave},
        {"rank_nonzero", .run_arg = case_rank_nonzero},
        {"bad_option", .run_arg = case_bad_option},
        {"tty_driver", .run_arg = case_tty_driver},
    };
    return fg_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
