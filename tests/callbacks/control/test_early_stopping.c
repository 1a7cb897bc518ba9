/* callback.early_stopping.*: scripted metric sequences must stop at exactly the expected
 * check, with the expected reason; bad options and a missing metric fail with messages
 * that name the problem. */
#include <math.h>
#include <stdlib.h>

#include "cb_test.h"

#ifndef FG_TEST_EARLY_STOPPING_PLUGIN
#error "FG_TEST_EARLY_STOPPING_PLUGIN must name the built plugin"
#endif

#define STEPS 10

typedef struct outcome {
    int stop_epoch;  /* 0-based epoch whose check stopped; -1: never */
    char reason[256];
    fg_status status;
    char message[FG_ERROR_MESSAGE_MAX];
} outcome;

/* One epoch of a trainer: a logged step, the epoch end, the validation end. The checked
 * value goes into both val/loss and val/acc, and train/loss (for check_on = epoch_end);
 * training ends at the first stop, as the trainer does. */
static outcome run_sequence(cb_instance *in, const double *values, int n)
{
    outcome o = {-1, "", FG_OK, ""};
    fg_callback_action act;
    fg_error err;
    for (int e = 0; e < n && o.stop_epoch < 0; e++) {
        int64_t step = (int64_t)(e + 1) * STEPS;
        uint32_t types[] = {FG_EVENT_TRAIN_STEP_END, FG_EVENT_EPOCH_END, FG_EVENT_VALIDATION_END};
        for (int t = 0; t < 3; t++) {
            fg_status st;
            if (types[t] == FG_EVENT_TRAIN_STEP_END)
                st = cb_send(in, types[t], e, step, METRICS({"train/step_loss", 9.0},
                             {"train/step_acc", 0.1}), &act, &err);
            else if (types[t] == FG_EVENT_EPOCH_END)
                st = cb_send(in, types[t], e, step, METRICS({"train/loss", values[e]},
                             {"train/acc", 0.5}), &act, &err);
            else
                st = cb_send(in, types[t], e, step, METRICS({"val/loss", values[e]},
                             {"val/acc", values[e]}), &act, &err);
            if (st != FG_OK) {
                o.status = st;
                snprintf(o.message, sizeof o.message, "%s", err.message);
                return o;
            }
            CHECK_EQ(act.save_checkpoint, 0);
            if (act.stop) {
                o.stop_epoch = e;
                snprintf(o.reason, sizeof o.reason, "%s", act.reason);
                break;
            }
        }
    }
    return o;
}

static void start(cb_instance *in, const char *path)
{
    cb_prepare(in, load_callback_plugin(path, "early_stopping"));
}

static void init_ok(cb_instance *in)
{
    fg_error err;
    fg_status st = cb_init(in, &err);
    CHECK_STATUS(st, FG_OK, err);
    if (st != FG_OK)
        exit(1);
}

/* Runs values through a fresh instance with the given options ("key", "value", ...). */
static outcome run_with(const char *path, const char *const *opts, int nopts, const double *values,
                        int n)
{
    cb_instance in;
    start(&in, path);
    for (int i = 0; i + 1 < nopts; i += 2)
        cb_set(&in, opts[i], opts[i + 1]);
    init_ok(&in);
    outcome o = run_sequence(&in, values, n);
    cb_deinit(&in);
    return o;
}

#define RUN(path, values, ...)                                                             \
    run_with(path, (const char *const[]){__VA_ARGS__},                                      \
             (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *)), values,    \
             (int)(sizeof values / sizeof values[0]))

static void case_defaults(const char *path, const char *scratch)
{
    (void)scratch;
    const fg_plugin *p = load_callback_plugin(path, "early_stopping");
    CHECK_EQ(p->kind, FG_KIND_CALLBACK);
    CHECK(p->option_count == 8);
    /* monitor val/loss, min, patience 3: best at epoch 2, then three checks without an
     * improvement (an equal value is none). */
    const double v[] = {1.0, 0.75, 0.5, 0.5, 0.625, 0.5, 0.25};
    cb_instance in;
    start(&in, path);
    init_ok(&in);
    outcome o = run_sequence(&in, v, 7);
    CHECK_STATUS(o.status, FG_OK, o);
    CHECK_EQ(o.stop_epoch, 5);
    CHECK_STR(o.reason, "val/loss did not improve for 3 checks; best 0.5000 at epoch 3");
    cb_deinit(&in);
}

static void case_patience(const char *path, const char *scratch)
{
    (void)scratch;
    /* An improvement resets the count: 2 misses, a best, 2 misses, then the stop. */
    const double v[] = {1.0, 1.5, 1.25, 0.875, 0.9, 0.95, 0.875, 0.5};
    outcome o = RUN(path, v, "patience", "3");
    CHECK_EQ(o.stop_epoch, 6);
    CHECK_STR(o.reason, "val/loss did not improve for 3 checks; best 0.8750 at epoch 4");
    /* patience 1 and 0 both stop at the first check that does not improve (Lightning). */
    o = RUN(path, v, "patience", "1");
    CHECK_EQ(o.stop_epoch, 1);
    CHECK_STR(o.reason, "val/loss did not improve for 1 check; best 1.0000 at epoch 1");
    o = RUN(path, v, "patience", "0");
    CHECK_EQ(o.stop_epoch, 1);
    /* Tiny values keep their significant digits in the reason. */
    const double tiny[] = {1e-5, 2e-5};
    o = RUN(path, tiny, "patience", "1");
    CHECK_STR(o.reason, "val/loss did not improve for 1 check; best 1e-05 at epoch 1");
    /* A long patience never stops within the run. */
    o = RUN(path, v, "patience", "100");
    CHECK_EQ(o.stop_epoch, -1);
    CHECK_EQ(o.status, FG_OK);
}

static void case_min_delta(const char *path, const char *scratch)
{
    (void)scratch;
    /* min_delta 0.25: 3.5 improves on 4 (3.75 < 4), 3.375 does not (3.625 >= 3.5), 3
     * does, 2.875 and 2.8125 do not -> stop at epoch index 5. */
    const double v[] = {4.0, 3.5, 3.375, 3.0, 2.875, 2.8125, 1.0};
    outcome o = RUN(path, v, "patience", "2", "min_delta", "0.25");
    CHECK_EQ(o.stop_epoch, 5);
    CHECK_STR(o.reason, "val/loss did not improve by 0.25 for 2 checks; best 3.0000 at epoch 4");
    /* Without min_delta every decrease counts. */
    o = RUN(path, v, "patience", "2");
    CHECK_EQ(o.stop_epoch, -1);
}

static void case_mode_max(const char *path, const char *scratch)
{
    (void)scratch;
    const double v[] = {0.5, 0.75, 0.875, 0.75, 0.875, 0.9};
    outcome o = RUN(path, v, "monitor", "val/acc", "mode", "max", "patience", "2");
    CHECK_EQ(o.stop_epoch, 4);
    CHECK_STR(o.reason, "val/acc did not improve for 2 checks; best 0.8750 at epoch 3");
    /* min_delta counts upwards in max mode: 0.875 is not 0.25 better than 0.75. */
    const double w[] = {0.25, 0.75, 0.875, 1.0};
    o = RUN(path, w, "monitor", "val/acc", "mode", "max", "patience", "1", "min_delta", "0.25");
    CHECK_EQ(o.stop_epoch, 2);
    CHECK_STR(o.reason, "val/acc did not improve by 0.25 for 1 check; best 0.7500 at epoch 2");
}

static void case_stopping_threshold(const char *path, const char *scratch)
{
    (void)scratch;
    const double v[] = {1.0, 0.7, 0.5, 0.4, 0.3};
    /* 0.5 is not below 0.5; 0.4 is. */
    outcome o = RUN(path, v, "stopping_threshold", "0.5", "patience", "100");
    CHECK_EQ(o.stop_epoch, 3);
    CHECK_STR(o.reason, "val/loss = 0.4000 at epoch 4 is below stopping_threshold 0.5");
    const double acc[] = {0.5, 0.9, 0.95, 0.99};
    o = RUN(path, acc, "monitor", "val/acc", "mode", "max", "stopping_threshold", "0.9");
    CHECK_EQ(o.stop_epoch, 2);
    CHECK_STR(o.reason, "val/acc = 0.9500 at epoch 3 is above stopping_threshold 0.9");
    /* "off" and empty turn it off. */
    o = RUN(path, v, "stopping_threshold", "off");
    CHECK_EQ(o.stop_epoch, -1);
}

static void case_divergence_threshold(const char *path, const char *scratch)
{
    (void)scratch;
    const double v[] = {1.0, 2.0, 2.5, 0.5};
    outcome o = RUN(path, v, "divergence_threshold", "2", "patience", "100");
    CHECK_EQ(o.stop_epoch, 2);
    CHECK_STR(o.reason, "val/loss = 2.5000 at epoch 3 is above divergence_threshold 2");
    const double acc[] = {0.5, 0.25, 0.0625};
    o = RUN(path, acc, "monitor", "val/acc", "mode", "max", "divergence_threshold", "0.1",
            "patience", "100");
    CHECK_EQ(o.stop_epoch, 2);
    CHECK_STR(o.reason, "val/acc = 0.0625 at epoch 3 is below divergence_threshold 0.1");
}

static void case_not_finite(const char *path, const char *scratch)
{
    (void)scratch;
    const double v[] = {1.0, 0.5, NAN, 0.25};
    outcome o = RUN(path, v, "patience", "100");
    CHECK_EQ(o.stop_epoch, 2);
    CHECK_STR(o.reason, "val/loss is nan at epoch 3; best 0.5000 at epoch 2");
    const double inf[] = {INFINITY};
    o = RUN(path, inf, "patience", "100");
    CHECK_EQ(o.stop_epoch, 0);
    CHECK_STR(o.reason, "val/loss is inf at epoch 1; no earlier value to compare");
    /* check_finite = false: a NaN is merely no improvement. */
    const double nans[] = {1.0, NAN, NAN, 0.5};
    o = RUN(path, nans, "patience", "2", "check_finite", "false");
    CHECK_EQ(o.stop_epoch, 2);
    CHECK_STR(o.reason, "val/loss did not improve for 2 checks; best 1.0000 at epoch 1");
}

static void case_check_on_epoch_end(const char *path, const char *scratch)
{
    (void)scratch;
    /* train/loss is checked at epoch_end: the stop comes at that event, before the
     * validation of the same epoch. */
    cb_instance in;
    start(&in, path);
    cb_set(&in, "monitor", "train/loss");
    cb_set(&in, "check_on", "epoch_end");
    cb_set(&in, "patience", "1");
    init_ok(&in);
    fg_callback_action act;
    fg_error err;
    CHECK_STATUS(cb_send(&in, FG_EVENT_EPOCH_END, 0, 10, METRICS({"train/loss", 1.0}), &act, &err),
                 FG_OK, err);
    CHECK_EQ(act.stop, 0);
    /* validation_end is not looked at, even without train/loss in it. */
    CHECK_STATUS(cb_send(&in, FG_EVENT_VALIDATION_END, 0, 10, METRICS({"val/loss", 9.0}), &act, &err),
                 FG_OK, err);
    CHECK_EQ(act.stop, 0);
    CHECK_STATUS(cb_send(&in, FG_EVENT_EPOCH_END, 1, 20, METRICS({"train/loss", 1.5}), &act, &err),
                 FG_OK, err);
    CHECK_EQ(act.stop, 1);
    CHECK_STR(act.reason, "train/loss did not improve for 1 check; best 1.0000 at epoch 1");
    cb_deinit(&in);
}

static void case_missing_metric(const char *path, const char *scratch)
{
    (void)scratch;
    const double v[] = {1.0, 0.5};
    outcome o = RUN(path, v, "monitor", "val/los");
    CHECK_EQ(o.status, FG_INVALID_ARGUMENT);
    CHECK_EQ(o.stop_epoch, -1);
    CHECK_STR(o.message, "monitor = val/los: the validation_end event of epoch 1 has no such "
                            "metric; present: val/loss, val/acc");
    /* A train metric checked at validation_end gets a hint. */
    o = RUN(path, v, "monitor", "train/loss");
    CHECK_EQ(o.status, FG_INVALID_ARGUMENT);
    CHECK_CONTAINS(o.message, "present: val/loss, val/acc (train/* metrics arrive at epoch_end: "
                              "set check_on = epoch_end)");
    o = RUN(path, v, "monitor", "val/loss", "check_on", "epoch_end");
    CHECK_EQ(o.status, FG_INVALID_ARGUMENT);
    CHECK_CONTAINS(o.message, "the epoch_end event of epoch 1 has no such metric; present: "
                              "train/loss, train/acc (val/* metrics arrive at validation_end");
}

static void case_never_checked(const char *path, const char *scratch)
{
    (void)scratch;
    /* No validation ran: fit_end says so instead of staying silent. */
    cb_instance in;
    start(&in, path);
    init_ok(&in);
    fg_callback_action act;
    fg_error err;
    CHECK_STATUS(cb_send(&in, FG_EVENT_EPOCH_END, 0, 10, METRICS({"train/loss", 1.0}), &act, &err),
                 FG_OK, err);
    CHECK_STATUS(cb_send(&in, FG_EVENT_FIT_END, 1, 10, NO_METRICS, &act, &err), FG_OK, err);
    CHECK_CONTAINS(in.fh.log, "warning: no validation_end event reached this callback, so "
                              "val/loss was never checked");
    cb_deinit(&in);
}

static void case_bad_options(const char *path, const char *scratch)
{
    (void)scratch;
    struct {
        const char *key, *value, *message;
    } bad[] = {
        {"stopping_threshold", "abc", "stopping_threshold = 'abc' is not a finite number; leave "
                                      "it empty to turn it off"},
        {"divergence_threshold", "1e999", "divergence_threshold = '1e999' is not a finite number"},
        {"divergence_threshold", "2x", "divergence_threshold = '2x' is not a finite number"},
        {"mode", "median", "mode = 'median': expected min or max"},
        {"check_on", "fit_end", "check_on = 'fit_end': expected validation_end or epoch_end"},
        {"patience", "-1", "patience = -1: must be >= 0"},
        {"min_delta", "-0.5", "min_delta = -0.5: must be a finite number >= 0"},
        {"monitor", "", "monitor is empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cb_instance in;
        start(&in, path);
        cb_set(&in, bad[i].key, bad[i].value);
        fg_error err;
        fg_status st = cb_init(&in, &err);
        CHECK_EQ(st, FG_INVALID_ARGUMENT);
        CHECK_CONTAINS(err.message, bad[i].message);
        if (st == FG_OK)
            cb_deinit(&in);
    }
}

/* Every rank takes the same decision: rank zero only gates logging. */
static void case_ranks_agree(const char *path, const char *scratch)
{
    (void)scratch;
    const double v[] = {1.0, 0.5, 0.75, 0.625, 0.6, 0.1};
    outcome first = {0};
    for (int rank = 0; rank < 3; rank++) {
        cb_instance in;
        start(&in, path);
        cb_set(&in, "patience", "2");
        in.is_rank_zero = rank == 0;
        init_ok(&in);
        outcome o = run_sequence(&in, v, 6);
        if (rank == 0)
            first = o;
        CHECK_EQ(o.stop_epoch, 3);
        CHECK_STR(o.reason, first.reason);
        if (rank > 0)
            CHECK_STR(in.fh.log, "");
        cb_deinit(&in);
    }
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"defaults", case_defaults},
        {"patience", case_patience},
        {"min_delta", case_min_delta},
        {"mode_max", case_mode_max},
        {"stopping_threshold", case_stopping_threshold},
        {"divergence_threshold", case_divergence_threshold},
        {"not_finite", case_not_finite},
        {"check_on_epoch_end", case_check_on_epoch_end},
        {"missing_metric", case_missing_metric},
        {"never_checked", case_never_checked},
        {"bad_options", case_bad_options},
        {"ranks_agree", case_ranks_agree},
    };
    return run_case(cases, sizeof cases / sizeof cases[0], argc, argv,
                    FG_TEST_EARLY_STOPPING_PLUGIN);
}
