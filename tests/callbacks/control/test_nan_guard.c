/* callback.nan_guard.*: the first NaN/inf metric stops the run (or fails it with
 * action = error) with a reason naming the metric, the step and the epoch. */
#include <math.h>
#include <stdlib.h>

#include "cb_test.h"

#ifndef FG_TEST_NAN_GUARD_PLUGIN
#error "FG_TEST_NAN_GUARD_PLUGIN must name the built plugin"
#endif

static void start(cb_instance *in, const char *path)
{
    cb_prepare(in, load_callback_plugin(path, "nan_guard"));
}

static void init_ok(cb_instance *in)
{
    fg_error err;
    fg_status st = cb_init(in, &err);
    CHECK_STATUS(st, FG_OK, err);
    if (st != FG_OK)
        exit(1);
}

static void case_stop(const char *path, const char *scratch)
{
    (void)scratch;
    cb_instance in;
    start(&in, path);
    init_ok(&in);
    fg_callback_action act;
    fg_error err;
    CHECK_STATUS(cb_send(&in, FG_EVENT_FIT_START, 0, 0, NO_METRICS, &act, &err), FG_OK, err);
    CHECK_STATUS(cb_send(&in, FG_EVENT_TRAIN_STEP_END, 3, 1233, METRICS({"train/step_loss", 0.5},
                 {"train/step_acc", 0.9}), &act, &err), FG_OK, err);
    CHECK_EQ(act.stop, 0);
    CHECK_STATUS(cb_send(&in, FG_EVENT_TRAIN_STEP_END, 3, 1234, METRICS({"train/step_acc", 0.9},
                 {"train/step_loss", NAN}), &act, &err), FG_OK, err);
    CHECK_EQ(act.stop, 1);
    CHECK_STR(act.reason, "train/step_loss is nan at step 1234 (epoch 4)");
    CHECK_EQ(act.save_checkpoint, 0);
    /* What follows the first NaN is its consequence: reported once. */
    CHECK_STATUS(cb_send(&in, FG_EVENT_EPOCH_END, 3, 1234, METRICS({"train/loss", NAN}), &act, &err),
                 FG_OK, err);
    CHECK_EQ(act.stop, 0);
    cb_deinit(&in);
}

static void case_inf(const char *path, const char *scratch)
{
    (void)scratch;
    cb_instance in;
    start(&in, path);
    init_ok(&in);
    fg_callback_action act;
    fg_error err;
    CHECK_STATUS(cb_send(&in, FG_EVENT_VALIDATION_END, 0, 100, METRICS({"val/loss", INFINITY},
                 {"val/acc", 0.1}), &act, &err), FG_OK, err);
    CHECK_STR(act.reason, "val/loss is inf at step 100 (epoch 1)");
    cb_deinit(&in);

    start(&in, path);
    init_ok(&in);
    CHECK_STATUS(cb_send(&in, FG_EVENT_TEST_END, 2, 300, METRICS({"test/loss", 1.0},
                 {"test/acc", -INFINITY}), &act, &err), FG_OK, err);
    CHECK_EQ(act.stop, 1);
    CHECK_STR(act.reason, "test/acc is -inf at step 300 (epoch 3)");
    cb_deinit(&in);
}

static void case_monitor(const char *path, const char *scratch)
{
    (void)scratch;
    cb_instance in;
    start(&in, path);
    cb_set(&in, "monitor", " val/loss , train/loss");
    init_ok(&in);
    fg_callback_action act;
    fg_error err;
    /* Unwatched metrics may be NaN. */
    CHECK_STATUS(cb_send(&in, FG_EVENT_TRAIN_STEP_END, 0, 10, METRICS({"train/step_loss", NAN}),
                 &act, &err), FG_OK, err);
    CHECK_EQ(act.stop, 0);
    CHECK_STATUS(cb_send(&in, FG_EVENT_VALIDATION_END, 0, 10, METRICS({"val/acc", NAN},
                 {"val/loss", 0.5}), &act, &err), FG_OK, err);
    CHECK_EQ(act.stop, 0);
    CHECK_STATUS(cb_send(&in, FG_EVENT_EPOCH_END, 1, 20, METRICS({"train/loss", NAN}), &act, &err),
                 FG_OK, err);
    CHECK_EQ(act.stop, 1);
    CHECK_STR(act.reason, "train/loss is nan at step 20 (epoch 2)");
    cb_deinit(&in);
}

static void case_action_error(const char *path, const char *scratch)
{
    (void)scratch;
    cb_instance in;
    start(&in, path);
    cb_set(&in, "action", "error");
    init_ok(&in);
    fg_callback_action act;
    fg_error err;
    CHECK_STATUS(cb_send(&in, FG_EVENT_TRAIN_STEP_END, 0, 5, METRICS({"train/step_loss", 1.0}),
                 &act, &err), FG_OK, err);
    fg_status st = cb_send(&in, FG_EVENT_TRAIN_STEP_END, 6, 777, METRICS({"train/step_loss", NAN}),
                           &act, &err);
    CHECK_EQ(st, FG_FATAL);
    CHECK_STR(err.message, "train/step_loss is nan at step 777 (epoch 7)");
    CHECK_EQ(act.stop, 0);
    cb_deinit(&in);
}

static void case_unseen_monitor(const char *path, const char *scratch)
{
    (void)scratch;
    cb_instance in;
    start(&in, path);
    cb_set(&in, "monitor", "val/los,val/acc,test/loss");
    init_ok(&in);
    fg_callback_action act;
    fg_error err;
    CHECK_STATUS(cb_send(&in, FG_EVENT_VALIDATION_END, 0, 10, METRICS({"val/loss", 0.5},
                 {"val/acc", 0.5}), &act, &err), FG_OK, err);
    CHECK_STATUS(cb_send(&in, FG_EVENT_FIT_END, 1, 10, NO_METRICS, &act, &err), FG_OK, err);
    /* A typo is named; test/... metrics only come after fit and are not. */
    CHECK_STR(in.fh.log, "warning: monitor names val/los, but no event carried it during "
                            "fit, so it was never checked\n");
    cb_deinit(&in);
}

static void case_bad_options(const char *path, const char *scratch)
{
    (void)scratch;
    cb_instance in;
    start(&in, path);
    cb_set(&in, "monitor", "a,,b");
    fg_error err;
    CHECK_EQ(cb_init(&in, &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "monitor = 'a,,b' has an empty item");
    start(&in, path);
    cb_set(&in, "action", "panic");
    CHECK_EQ(cb_init(&in, &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "action = 'panic': expected stop or error");
}

/* The trainer's finite check: the reason names the step, the epoch and the layer; later
 * non-finite metrics are its consequence and say nothing more. */
static void case_layer(const char *path, const char *scratch)
{
    (void)scratch;
    cb_instance in;
    start(&in, path);
    init_ok(&in);
    fg_callback_action act;
    fg_error err;
    in.nonfinite_layer = "fc3";
    CHECK_STATUS(cb_send(&in, FG_EVENT_NONFINITE, 0, 4, METRICS({"train/step_loss", NAN},
                 {"grad/nonfinite_layers", 3}, {"input/nonfinite_values", 0}), &act, &err), FG_OK, err);
    CHECK_EQ(act.stop, 1);
    CHECK_STR(act.reason, "step 4 (epoch 1): the loss is nan; non-finite gradients in layer fc3 "
                             "(the first in backward order, 3 layers affected)");
    in.nonfinite_layer = NULL;
    CHECK_STATUS(cb_send(&in, FG_EVENT_TRAIN_STEP_END, 0, 4, METRICS({"train/step_loss", NAN}),
                 &act, &err), FG_OK, err);
    CHECK_EQ(act.stop, 0);
    cb_deinit(&in);

    /* A finite loss, one layer, the input named; action = error fails the run with it. */
    start(&in, path);
    cb_set(&in, "action", "error");
    init_ok(&in);
    in.nonfinite_layer = "conv1";
    CHECK_STATUS(cb_send(&in, FG_EVENT_NONFINITE, 2, 120, METRICS({"train/step_loss", 0.5},
                 {"grad/nonfinite_layers", 1}, {"input/nonfinite_values", 1}), &act, &err),
                 FG_FATAL, err);
    CHECK_STR(err.message, "step 120 (epoch 3): non-finite gradients in layer conv1 (the "
                              "first in backward order, 1 layer affected); the input batch holds "
                              "1 non-finite value");
    cb_deinit(&in);

    /* A strategy that cannot tell the layer. */
    start(&in, path);
    init_ok(&in);
    CHECK_STATUS(cb_send(&in, FG_EVENT_NONFINITE, 0, 7, METRICS({"train/step_loss", INFINITY},
                 {"grad/nonfinite_layers", -1}, {"input/nonfinite_values", 0}), &act, &err), FG_OK, err);
    CHECK_STR(act.reason, "step 7 (epoch 1): the loss is inf; non-finite gradients (the "
                             "strategy cannot tell in which layer)");
    cb_deinit(&in);
}

/* check_every_n_steps asks the trainer for the finite check; 0 asks nothing. */
static void case_requests(const char *path, const char *scratch)
{
    (void)scratch;
    const char *values[] = {NULL, "5", "0"};
    const uint32_t flags[] = {FG_REQUEST_FINITE_CHECK, FG_REQUEST_FINITE_CHECK, 0};
    const int64_t every[] = {1, 5, 0};
    for (int i = 0; i < 3; i++) {
        cb_instance in;
        start(&in, path);
        if (values[i])
            cb_set(&in, "check_every_n_steps", values[i]);
        init_ok(&in);
        CHECK(FG_HAS_FIELD(in.vt, fg_callback_vtable, requests) && in.vt->requests);
        fg_callback_requests r;
        memset(&r, 0, sizeof r);
        r.struct_size = sizeof r;
        fg_error err;
        CHECK_STATUS(in.vt->requests(in.state, &r, &err), FG_OK, err);
        CHECK_EQ(r.flags, flags[i]);
        CHECK_EQ(r.finite_check_every, every[i]);
        cb_deinit(&in);
    }
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"stop", case_stop},
        {"inf", case_inf},
        {"monitor", case_monitor},
        {"action_error", case_action_error},
        {"unseen_monitor", case_unseen_monitor},
        {"bad_options", case_bad_options},
        {"layer", case_layer},
        {"requests", case_requests},
    };
    return run_case(cases, sizeof cases / sizeof cases[0], argc, argv, FG_TEST_NAN_GUARD_PLUGIN);
}
