/* callback2.throughput.*: the exact lines the throughput callback prints (stdout is
 * captured to a file), its advice, its run summary and its number formatting. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_test.h"

#define NAME "throughput"
#define ADVICE "raise [data] num_workers or prefetch, keep pin_memory = true"

static const fg_plugin *plugin(void)
{
    return cb_load(FG_TEST_PLUGIN, NAME);
}

/* One logged interval: the trainer's three time metrics (a negative value: absent). */
typedef struct interval {
    int64_t step;
    double samples_per_s, step_s, wait_s;
} interval;

/* Runs fit start, the intervals, and fit end (when fit_end), with stdout captured under
 * dir; returns what was printed. */
static char *run(const char *dir, cb_host *h, const interval *iv, int n, int fit_end, int rank0)
{
    char out[4200];
    snprintf(out, sizeof out, "%s/stdout.txt", dir);
    const fg_plugin *p = h->plugin;
    cb_capture_begin(out);
    void *s = NULL;
    fg_error err = {0};
    fg_status st = p->init(&h->host, &s, &err);
    CHECK(st == FG_OK, "init: %s", err.message);
    fg_event e = cb_event(FG_EVENT_FIT_START, 0, 0, dir);
    e.is_rank_zero = rank0;
    CHECK(st != FG_OK || cb_send(p, s, &e, &err) == FG_OK, "%s", err.message);
    for (int i = 0; st == FG_OK && i < n; i++) {
        fg_metric m[5] = {{"train/step_loss", 0.5}, {"train/step_acc", 0.75}};
        uint32_t count = 2;
        if (iv[i].samples_per_s >= 0)
            m[count++] = (fg_metric){"throughput/samples_per_s", iv[i].samples_per_s};
        if (iv[i].step_s >= 0)
            m[count++] = (fg_metric){"time/step_s", iv[i].step_s};
        if (iv[i].wait_s >= 0)
            m[count++] = (fg_metric){"time/data_wait_s", iv[i].wait_s};
        e = cb_event(FG_EVENT_TRAIN_STEP_END, 0, iv[i].step, dir);
        e.is_rank_zero = rank0;
        cb_event_metrics(&e, m, count);
        CHECK(cb_send(p, s, &e, &err) == FG_OK, "%s", err.message);
    }
    if (st == FG_OK && fit_end) {
        e = cb_event(FG_EVENT_FIT_END, 1, n > 0 ? iv[n - 1].step : 0, dir);
        e.is_rank_zero = rank0;
        CHECK(cb_send(p, s, &e, &err) == FG_OK, "%s", err.message);
    }
    if (st == FG_OK)
        p->deinit(s);
    return cb_capture_end();
}

/* A compute-bound interval, a loader-bound one (advice), one just under the 30% line
 * (no advice), and a slow one; then the run's step-weighted means. */
static const interval mixed[] = {
    {50, 41000, 0.0031, 0.0002},
    {100, 12800, 0.010, 0.005},
    {150, 4100, 0.0314, 0.0090},
    {200, 950, 1.5, 0.00004},
};

static void case_lines(const char *base)
{
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "lines");
    cb_host h;
    cb_host_init(&h, plugin());
    char *out = run(dir, &h, mixed, 4, 1, 1);
    CHECK_TEXT(out,
        "throughput: 41k samples/s; step 3.1 ms = data wait 0.2 ms (6%) + compute 2.9 ms\n"
        "throughput: 13k samples/s; step 10.0 ms = data wait 5.0 ms (50%) + compute 5.0 ms\n"
        "throughput: advice: the loader is the bottleneck: " ADVICE "\n"
        "throughput: 4.1k samples/s; step 31.4 ms = data wait 9.0 ms (29%) + compute 22.4 ms\n"
        "throughput: 950 samples/s; step 1.50 s = data wait 40 us (0%) + compute 1.50 s\n"
        "throughput: run mean over 200 steps: 1.2k samples/s; step 386.1 ms = data wait "
        "3.6 ms (1%) + compute 382.6 ms\n");
    CHECK(h.log_count == 0, "unexpected log: %s", h.last_log);
    free(out);
}

/* log_every_n_events = 2 prints the 2nd and 4th intervals; the summary still covers all
 * four. advise = false drops the advice. */
static void case_every_n(const char *base)
{
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "every_n");
    cb_host h;
    cb_host_init(&h, plugin());
    cb_host_set(&h, "log_every_n_events", "2");
    cb_host_set(&h, "advise", "false");
    char *out = run(dir, &h, mixed, 4, 1, 1);
    CHECK_TEXT(out,
        "throughput: 13k samples/s; step 10.0 ms = data wait 5.0 ms (50%) + compute 5.0 ms\n"
        "throughput: 950 samples/s; step 1.50 s = data wait 40 us (0%) + compute 1.50 s\n"
        "throughput: run mean over 200 steps: 1.2k samples/s; step 386.1 ms = data wait "
        "3.6 ms (1%) + compute 382.6 ms\n");
    free(out);
}

/* The loader dominates most intervals: the summary repeats the advice with the count.
 * Intervals of unequal length (global steps 10, 30, 40, 100) weigh by their steps. */
static void case_advice_summary(const char *base)
{
    static const interval bound[] = {
        {10, 1000, 0.004, 0.002},
        {30, 2000, 0.002, 0.0001},
        {40, 500, 0.008, 0.006},
        {100, 800, 0.005, 0.004},
    };
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "advice_summary");
    cb_host h;
    cb_host_init(&h, plugin());
    char *out = run(dir, &h, bound, 4, 1, 1);
    CHECK_TEXT(out,
        "throughput: 1.0k samples/s; step 4.0 ms = data wait 2.0 ms (50%) + compute 2.0 ms\n"
        "throughput: advice: the loader is the bottleneck: " ADVICE "\n"
        "throughput: 2.0k samples/s; step 2.0 ms = data wait 0.1 ms (5%) + compute 1.9 ms\n"
        "throughput: 500 samples/s; step 8.0 ms = data wait 6.0 ms (75%) + compute 2.0 ms\n"
        "throughput: advice: the loader is the bottleneck: " ADVICE "\n"
        "throughput: 800 samples/s; step 5.0 ms = data wait 4.0 ms (80%) + compute 1.0 ms\n"
        "throughput: advice: the loader is the bottleneck: " ADVICE "\n"
        "throughput: run mean over 100 steps: 870 samples/s; step 4.6 ms = data wait "
        "3.2 ms (70%) + compute 1.4 ms\n"
        "throughput: advice: the loader was the bottleneck in 3 of 4 logged intervals: "
        ADVICE "\n");
    free(out);
}

/* Units and partial metrics: a line shows what the trainer sent, nothing more. */
static void case_units(const char *base)
{
    static const interval units[] = {
        {1, 9.5, 0.105, -1},
        {2, 1.23e6, 0.00005, -1},
        {3, 25e6, 2.5, -1},
        {4, 999, -1, -1},
        {5, -1, 0.003, -1},
    };
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "units");
    cb_host h;
    cb_host_init(&h, plugin());
    char *out = run(dir, &h, units, 5, 0, 1);
    CHECK_TEXT(out,
        "throughput: 9.5 samples/s; step 105.0 ms\n"
        "throughput: 1.2M samples/s; step 50 us\n"
        "throughput: 25M samples/s; step 2.50 s\n"
        "throughput: 999 samples/s\n"
        "throughput: step 3.0 ms\n");
    free(out);
}

/* Without the time metrics there is nothing to say: one warning through the host's log,
 * no lines, no summary. */
static void case_no_metrics(const char *base)
{
    static const interval none[] = {{50, -1, -1, -1}, {100, -1, -1, -1}};
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "no_metrics");
    cb_host h;
    cb_host_init(&h, plugin());
    char *out = run(dir, &h, none, 2, 1, 1);
    CHECK_TEXT(out, "");
    CHECK(h.log_count == 1, "%d log messages, want 1", h.log_count);
    CHECK_TEXT(h.last_log, "[callback.throughput] the trainer sends no "
                           "throughput/samples_per_s or time/step_s metrics: nothing to report");
    free(out);
}

static void case_rank_nonzero(const char *base)
{
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "rank_nonzero");
    cb_host h;
    cb_host_init(&h, plugin());
    char *out = run(dir, &h, mixed, 4, 1, 0);
    CHECK_TEXT(out, "");
    free(out);
}

static void case_bad_option(const char *base)
{
    (void)base;
    const fg_plugin *p = plugin();
    cb_host h;
    cb_host_init(&h, p);
    cb_host_set(&h, "log_every_n_events", "0");
    void *s = NULL;
    fg_error err = {0};
    CHECK(p->init(&h.host, &s, &err) == FG_INVALID_ARGUMENT, "init must refuse 0");
    CHECK_TEXT(err.message, "[callback.throughput] log_every_n_events = 0: must be an integer "
                            ">= 1");
}

static void case_descriptor(const char *base)
{
    (void)base;
    const fg_plugin *p = plugin();
    CHECK(p->option_count == 2, "%u options", p->option_count);
    CHECK(strcmp(p->options[0].key, "log_every_n_events") == 0 &&
              strcmp(p->options[0].default_value, "1") == 0, "log_every_n_events option");
    CHECK(strcmp(p->options[1].key, "advise") == 0 && p->options[1].type == FG_OPT_BOOL &&
              strcmp(p->options[1].default_value, "true") == 0, "advise option");
}

int main(int argc, char **argv)
{
    static const cb_case cases[] = {
        {"descriptor", case_descriptor}, {"lines", case_lines},
        {"every_n", case_every_n},       {"advice_summary", case_advice_summary},
        {"units", case_units},           {"no_metrics", case_no_metrics},
        {"rank_nonzero", case_rank_nonzero}, {"bad_option", case_bad_option},
    };
    return cb_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
