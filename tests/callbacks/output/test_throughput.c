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
    return fg_test_need_plugin(FG_TEST_PLUGIN, FG_KIND_CALLBACK, NAME);
}

/* One logged interval: the trainer's three time metrics (a negative value: absent). */
typedef struct interval {
    int64_t step;
    double samples_per_s, step_s, wait_s;
} interval;

/* Runs fit start, the intervals, and fit end (when fit_end), with stdout captured under
 * dir; returns what was printed. */
static char *run(const char *dir, fg_fake_host *h, const interval *iv, int n, int fit_end, int rank0)
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
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run(dir, &h, mixed, 4, 1, 1);
    CHECK_STR(out,
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
    fg_fake_host h;
    cb_host_init(&h, plugin());
    fg_fake_host_set(&h, "log_every_n_events", "2");
    fg_fake_host_set(&h, "advise", "false");
    char *out = run(dir, &h, mixed, 4, 1, 1);
    CHECK_STR(out,
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
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run(dir, &h, bound, 4, 1, 1);
    CHECK_STR(out,
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
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run(dir, &h, units, 5, 0, 1);
    CHECK_STR(out,
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
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run(dir, &h, none, 2, 1, 1);
    CHECK_STR(out, "");
    CHECK(h.log_count == 1, "%d log messages, want 1", h.log_count);
    CHECK_STR(h.last_log, "[callback.throughput] the trainer sends no "
                           "throughput/samples_per_s or time/step_s metrics: nothing to report");
    free(out);
}

static void case_rank_nonzero(const char *base)
{
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "rank_nonzero");
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run(dir, &h, mixed, 4, 1, 0);
    CHECK_STR(out, "");
    free(out);
}

static void case_bad_option(const char *base)
{
    (void)base;
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    fg_fake_host_set(&h, "log_every_n_events", "0");
    void *s = NULL;
    fg_error err = {0};
    CHECK(p->init(&h.host, &s, &err) == FG_INVALID_ARGUMENT, "init must refuse 0");
    CHECK_STR(err.message, "[callback.throughput] log_every_n_events = 0: must be an integer "
                            ">= 1");
}

static void case_descriptor(const char *base)
{
    (void)base;
    const fg_plugin *p = plugin();
    CHECK(p->option_count == 3, "%u options", p->option_count);
    CHECK(strcmp(p->options[0].key, "log_every_n_events") == 0 &&
              strcmp(p->options[0].default_value, "1") == 0, "log_every_n_events option");
    CHECK(strcmp(p->options[1].key, "advise") == 0 && p->options[1].type == FG_OPT_BOOL &&
              strcmp(p->options[1].default_value, "true") == 0, "advise option");
    CHECK(strcmp(p->options[2].key, "split") == 0 && p->options[2].type == FG_OPT_BOOL &&
              strcmp(p->options[2].default_value, "true") == 0, "split option");
}

/* Sends fit start (with `start` metrics), the step events (one metric list each, ended by
 * a NULL name) and fit end, with stdout captured; returns what was printed. */
static char *run_lists(const char *dir, fg_fake_host *h, const fg_metric *start, uint32_t nstart,
                       const int64_t *steps, const fg_metric (*lists)[12], int n)
{
    char out[4200];
    snprintf(out, sizeof out, "%s/stdout.txt", dir);
    const fg_plugin *p = h->plugin;
    cb_capture_begin(out);
    void *s = NULL;
    fg_error err = {0};
    CHECK(p->init(&h->host, &s, &err) == FG_OK, "init: %s", err.message);
    fg_event e = cb_event(FG_EVENT_FIT_START, 0, 0, dir);
    cb_event_metrics(&e, start, nstart);
    CHECK(cb_send(p, s, &e, &err) == FG_OK, "%s", err.message);
    for (int i = 0; i < n; i++) {
        uint32_t count = 0;
        while (count < 12 && lists[i][count].name != NULL)
            count++;
        e = cb_event(FG_EVENT_TRAIN_STEP_END, 0, steps[i], dir);
        cb_event_metrics(&e, lists[i], count);
        CHECK(cb_send(p, s, &e, &err) == FG_OK, "%s", err.message);
    }
    e = cb_event(FG_EVENT_FIT_END, 1, n > 0 ? steps[n - 1] : 0, dir);
    CHECK(cb_send(p, s, &e, &err) == FG_OK, "%s", err.message);
    p->deinit(s);
    return cb_capture_end();
}

#define PHASES(rate, step, wait, h2d, fwd, bwd, opt)                                        \
    {"train/step_loss", 0.5}, {"throughput/samples_per_s", rate}, {"time/step_s", step},   \
    {"time/data_wait_s", wait}, {"time/h2d_s", h2d}, {"time/forward_s", fwd},               \
    {"time/backward_s", bwd}, {"time/optimizer_s", opt}

/* The step split into its phases: every part with its share, "other" for the rest; advice
 * for a dominating part other than compute (the optimizer, then the copy), none for a
 * compute-bound interval; the run mean at the end. The metric list of the third event is
 * reordered: the remembered positions must not be trusted blindly. */
static void case_split(const char *base)
{
    static const int64_t steps[] = {100, 200, 300};
    static const fg_metric lists[][12] = {
        {PHASES(64000, 0.001, 0.00001, 0.00001, 0.0004, 0.0003, 0.00026), {NULL, 0}},
        {PHASES(32000, 0.002, 0.00001, 0.00001, 0.0004, 0.0003, 0.0012), {NULL, 0}},
        {{"time/optimizer_s", 0.00005}, {"time/backward_s", 0.0002}, {"time/forward_s", 0.0002},
         {"time/h2d_s", 0.0005}, {"time/data_wait_s", 0}, {"time/step_s", 0.001},
         {"throughput/samples_per_s", 64000}, {NULL, 0}},
    };
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "split");
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run_lists(dir, &h, NULL, 0, steps, lists, 3);
    CHECK_STR(out,
        "throughput: 64k samples/s; step 1.0 ms = data wait 10 us (1%) + h2d 10 us (1%) + "
        "forward 0.4 ms (40%) + backward 0.3 ms (30%) + optimizer 0.3 ms (26%) + other 20 us (2%)\n"
        "throughput: 32k samples/s; step 2.0 ms = data wait 10 us (0%) + h2d 10 us (0%) + "
        "forward 0.4 ms (20%) + backward 0.3 ms (15%) + optimizer 1.2 ms (60%) + other 80 us (4%)\n"
        "throughput: advice: the optimizer step is the bottleneck: raise [data] batch_size (or "
        "trainer.accumulate_grad_batches) to update less often\n"
        "throughput: 64k samples/s; step 1.0 ms = data wait 0 us (0%) + h2d 0.5 ms (50%) + "
        "forward 0.2 ms (20%) + backward 0.2 ms (20%) + optimizer 50 us (5%) + other 50 us (5%)\n"
        "throughput: advice: host-to-device copying is the bottleneck: set [data] pin_memory = "
        "true (page-locked staging) and raise batch_size\n"
        "throughput: run mean over 300 steps: 48k samples/s; step 1.3 ms = data wait 7 us (0%) + "
        "h2d 0.2 ms (13%) + forward 0.3 ms (25%) + backward 0.3 ms (20%) + optimizer 0.5 ms (38%) "
        "+ other 50 us (4%)\n");
    free(out);
}

/* A compute-bound run: no advice on the lines, the compute advice once at the end. */
static void case_compute_bound(const char *base)
{
    static const int64_t steps[] = {50, 100};
    static const fg_metric lists[][12] = {
        {PHASES(64000, 0.001, 0.00001, 0.00001, 0.0005, 0.0004, 0.00005), {NULL, 0}},
        {PHASES(64000, 0.001, 0.00001, 0.00001, 0.0005, 0.0004, 0.00005), {NULL, 0}},
    };
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "compute_bound");
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run_lists(dir, &h, NULL, 0, steps, lists, 2);
    const char *line = "throughput: 64k samples/s; step 1.0 ms = data wait 10 us (1%) + h2d 10 us "
                       "(1%) + forward 0.5 ms (50%) + backward 0.4 ms (40%) + optimizer 50 us (5%) "
                       "+ other 30 us (3%)\n";
    char want[2048];
    snprintf(want, sizeof want, "%s%s"
             "throughput: run mean over 100 steps: 64k samples/s; step 1.0 ms = data wait 10 us "
             "(1%%) + h2d 10 us (1%%) + forward 0.5 ms (50%%) + backward 0.4 ms (40%%) + "
             "optimizer 50 us (5%%) + other 30 us (3%%)\n"
             "throughput: advice: the step is compute-bound (forward + backward 90%%): use mixed "
             "precision ([precision] name = bf16-mixed on a GPU) or more devices ([strategy] "
             "name = ddp)\n", line, line);
    CHECK_STR(out, want);
    free(out);
}

/* Under ddp: grad sync joins the split and a second line tells communication time, its
 * part hidden behind backward and its exposed part; a long wait is advised on. */
static void case_comm(const char *base)
{
    static const int64_t steps[] = {10, 20};
    static const fg_metric lists[][12] = {
        {PHASES(50000, 0.002, 0, 0.00001, 0.0005, 0.0006, 0.0002), {"time/grad_sync_s", 0.0002},
         {"time/comm_s", 0.0008}, {"time/comm_hidden_s", 0.0006}, {NULL, 0}},
        {PHASES(25000, 0.004, 0, 0.00001, 0.0005, 0.0006, 0.0002), {"time/grad_sync_s", 0.0024},
         {"time/comm_s", 0.0030}, {"time/comm_hidden_s", 0.0006}, {NULL, 0}},
    };
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "comm");
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run_lists(dir, &h, NULL, 0, steps, lists, 2);
    CHECK_STR(out,
        "throughput: 50k samples/s; step 2.0 ms = data wait 0 us (0%) + h2d 10 us (0%) + "
        "forward 0.5 ms (25%) + backward 0.6 ms (30%) + grad sync 0.2 ms (10%) + optimizer "
        "0.2 ms (10%) + other 0.5 ms (25%)\n"
        "throughput: communication 0.8 ms per step: 0.6 ms (75%) hidden behind backward, 0.2 ms "
        "exposed\n"
        "throughput: 25k samples/s; step 4.0 ms = data wait 0 us (0%) + h2d 10 us (0%) + "
        "forward 0.5 ms (12%) + backward 0.6 ms (15%) + grad sync 2.4 ms (60%) + optimizer "
        "0.2 ms (5%) + other 0.3 ms (7%)\n"
        "throughput: communication 3.0 ms per step: 0.6 ms (20%) hidden behind backward, 2.4 ms "
        "exposed\n"
        "throughput: advice: gradient sync is the bottleneck: raise [data] batch_size (fewer, "
        "larger all-reduces) or lower [strategy] bucket_mb so that they start during backward\n"
        "throughput: run mean over 20 steps: 33k samples/s; step 3.0 ms = data wait 0 us (0%) + "
        "h2d 10 us (0%) + forward 0.5 ms (17%) + backward 0.6 ms (20%) + grad sync 1.3 ms (43%) "
        "+ optimizer 0.2 ms (7%) + other 0.4 ms (13%)\n"
        "throughput: communication 1.9 ms per step: 0.6 ms (32%) hidden behind backward, 1.3 ms "
        "exposed\n");
    free(out);
}

/* offload_optimizer = host: the host update and the wait for the gradients' copies join the
 * split after the optimizer, and count as the optimizer step in the advice. */
static void case_offload(const char *base)
{
    static const int64_t steps[] = {10};
    static const fg_metric lists[][12] = {
        {PHASES(50000, 0.002, 0, 0, 0.0005, 0.0006, 0), {"time/offload_update_s", 0.0006},
         {"time/offload_copy_wait_s", 0.0001}, {NULL, 0}},
    };
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "offload");
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run_lists(dir, &h, NULL, 0, steps, lists, 1);
    const char *split = "step 2.0 ms = data wait 0 us (0%) + h2d 0 us (0%) + forward 0.5 ms "
                        "(25%) + backward 0.6 ms (30%) + optimizer 0 us (0%) + host update 0.6 "
                        "ms (30%) + offload wait 0.1 ms (5%) + other 0.2 ms (10%)\n";
    char want[2048];
    snprintf(want, sizeof want, "throughput: 50k samples/s; %s"
             "throughput: advice: the optimizer step is the bottleneck: raise [data] batch_size "
             "(or trainer.accumulate_grad_batches) to update less often\n"
             "throughput: run mean over 10 steps: 50k samples/s; %s"
             "throughput: advice: the optimizer step was the bottleneck in 1 of 1 logged "
             "intervals: raise [data] batch_size (or trainer.accumulate_grad_batches) to update "
             "less often\n", split, split);
    CHECK_STR(out, want);
    free(out);
}

/* The advice follows the configured strategy: under dp a sync-bound step is told to use
 * ddp, and a compute-bound ddp run is not told to use ddp. */
static void case_strategy_advice(const char *base)
{
    static const int64_t steps[] = {10};
    static const fg_metric sync_bound[][12] = {
        {PHASES(25000, 0.004, 0, 0.00001, 0.0005, 0.0006, 0.0002), {"time/grad_sync_s", 0.0024},
         {NULL, 0}},
    };
    static const fg_metric compute_bound[][12] = {
        {PHASES(64000, 0.001, 0.00001, 0.00001, 0.0005, 0.0004, 0.00005), {NULL, 0}},
    };
    static const char *const dp[] = {"strategy", "name", "dp", NULL};
    static const char *const ddp[] = {"strategy", "name", "ddp", NULL};
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "strategy_advice");
    fg_fake_host h;
    cb_host_init(&h, plugin());
    h.config = dp;
    char *out = run_lists(dir, &h, NULL, 0, steps, sync_bound, 1);
    CHECK(strstr(out, "throughput: advice: gradient sync is the bottleneck: use [strategy] "
                      "name = ddp (one process per device") != NULL,
          "dp, sync-bound: no ddp advice in:\n%s", out);
    free(out);
    cb_host_init(&h, plugin());
    h.config = ddp;
    out = run_lists(dir, &h, NULL, 0, steps, compute_bound, 1);
    CHECK(strstr(out, "compute-bound") != NULL && strstr(out, "name = ddp") == NULL &&
              strstr(out, "(more ranks)") != NULL,
          "ddp, compute-bound: want the more-ranks advice without ddp in:\n%s", out);
    free(out);
}

/* Fit start's memory/... metrics: one line per device, roles in the order sent. */
static void case_memory(const char *base)
{
    static const fg_metric one[] = {
        {"memory/param_bytes", 1048576}, {"memory/grad_bytes", 1048576},
        {"memory/optimizer_bytes", 2097152}, {"memory/total_bytes", 4718592}, {"lr", 0.1}};
    static const fg_metric two[] = {
        {"memory/dev0/param_bytes", 524288}, {"memory/dev0/total_bytes", 1048576},
        {"memory/dev1/param_bytes", 262144}, {"memory/dev1/total_bytes", 786432}};
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "memory");
    fg_fake_host h;
    cb_host_init(&h, plugin());
    char *out = run_lists(dir, &h, one, 5, NULL, NULL, 0);
    CHECK_STR(out, "throughput: memory: param 1.00 MiB, grad 1.00 MiB, optimizer 2.00 MiB, "
                    "total 4.50 MiB\n");
    free(out);
    cb_scratch(dir, sizeof dir, base, "memory2");
    out = run_lists(dir, &h, two, 4, NULL, NULL, 0);
    CHECK_STR(out, "throughput: memory (dev0): param 0.50 MiB, total 1.00 MiB\n"
                    "throughput: memory (dev1): param 0.25 MiB, total 0.75 MiB\n");
    free(out);
}

/* split = true (default) asks the trainer for the phase timing; split = false does not. */
static void case_requests(const char *base)
{
    (void)base;
    const fg_plugin *p = plugin();
    const fg_callback_vtable *vt = p->vtable;
    CHECK(FG_HAS_FIELD(vt, fg_callback_vtable, requests) && vt->requests != NULL, "no requests()");
    if (vt->requests == NULL)
        return;
    for (int split = 1; split >= 0; split--) {
        fg_fake_host h;
        cb_host_init(&h, p);
        if (!split)
            fg_fake_host_set(&h, "split", "false");
        void *s = NULL;
        fg_error err = {0};
        CHECK(p->init(&h.host, &s, &err) == FG_OK, "init: %s", err.message);
        fg_callback_requests r;
        memset(&r, 0, sizeof r);
        r.struct_size = sizeof r;
        CHECK(vt->requests(s, &r, &err) == FG_OK, "requests: %s", err.message);
        CHECK(r.flags == (split ? FG_REQUEST_STEP_TIMING : 0u), "split = %d: flags %u", split,
              r.flags);
        p->deinit(s);
    }
}

int main(int argc, char **argv)
{
    static const fg_test_case cases[] = {
        {"descriptor", .run_arg = case_descriptor},
        {"lines", .run_arg = case_lines},
        {"every_n", .run_arg = case_every_n},
        {"advice_summary", .run_arg = case_advice_summary},
        {"units", .run_arg = case_units},
        {"no_metrics", .run_arg = case_no_metrics},
        {"rank_nonzero", .run_arg = case_rank_nonzero},
        {"bad_option", .run_arg = case_bad_option},
        {"split", .run_arg = case_split},
        {"compute_bound", .run_arg = case_compute_bound},
        {"comm", .run_arg = case_comm},
        {"offload", .run_arg = case_offload},
        {"memory", .run_arg = case_memory},
        {"requests", .run_arg = case_requests},
        {"strategy_advice", .run_arg = case_strategy_advice},
    };
    return fg_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
