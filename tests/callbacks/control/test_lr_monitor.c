/* callback.lr_monitor.*: the CSV rows (step,epoch,lr) at the configured events, written
 * by rank 0 only, into the run folder. */
#include <stdlib.h>

#include "cb_test.h"

#ifndef FG_TEST_LR_MONITOR_PLUGIN
#error "FG_TEST_LR_MONITOR_PLUGIN must name the built plugin"
#endif

static void start(cb_instance *in, const char *path, const char *scratch, const char *name)
{
    cb_prepare(in, load_callback_plugin(path, "lr_monitor"));
    make_scratch_dir(scratch, name, in->run_dir, sizeof in->run_dir);
}

static void init_ok(cb_instance *in)
{
    fg_error err;
    fg_status st = cb_init(in, &err);
    CHECK_STATUS(st, FG_OK, err);
    if (st != FG_OK)
        exit(1);
}

/* Two epochs of three logged steps each, the rate halving every epoch. */
static void run_two_epochs(cb_instance *in)
{
    fg_callback_action act;
    fg_error err;
    CHECK_STATUS(cb_send(in, FG_EVENT_FIT_START, 0, 0, NO_METRICS, &act, &err), FG_OK, err);
    for (int e = 0; e < 2; e++) {
        in->learning_rate = e == 0 ? 0.5 : 0.25;
        for (int s = 1; s <= 3; s++)
            CHECK_STATUS(cb_send(in, FG_EVENT_TRAIN_STEP_END, e, e * 3 + s,
                                 METRICS({"train/step_loss", 1.0}), &act, &err), FG_OK, err);
        CHECK_STATUS(cb_send(in, FG_EVENT_EPOCH_END, e, e * 3 + 3, METRICS({"train/loss", 1.0}),
                             &act, &err), FG_OK, err);
        CHECK_STATUS(cb_send(in, FG_EVENT_VALIDATION_END, e, e * 3 + 3,
                             METRICS({"val/loss", 1.0}), &act, &err), FG_OK, err);
        CHECK_EQ(act.stop, 0);
        CHECK_EQ(act.save_checkpoint, 0);
    }
    CHECK_STATUS(cb_send(in, FG_EVENT_FIT_END, 2, 6, NO_METRICS, &act, &err), FG_OK, err);
}

static void read_in(const cb_instance *in, const char *name, char *out, size_t cap)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", in->run_dir, name);
    read_file(path, out, cap);
}

static void case_epoch(const char *path, const char *scratch)
{
    cb_instance in;
    char text[1024];
    start(&in, path, scratch, "epoch");
    init_ok(&in);
    run_two_epochs(&in);
    read_in(&in, "lr.csv", text, sizeof text);
    CHECK_STR(text, "step,epoch,lr\n3,0,0.5\n6,1,0.25\n");
    CHECK_EQ(in.fh.metric_calls, 2);
    CHECK_STR(in.fh.last_metric, "lr");
    CHECK(in.fh.last_metric_value == 0.25 && in.fh.last_metric_step == 6);
    CHECK_STR(in.fh.log, "");
    cb_deinit(&in);
}

static void case_step(const char *path, const char *scratch)
{
    cb_instance in;
    char text[1024];
    start(&in, path, scratch, "step");
    cb_set(&in, "logging_interval", "step");
    cb_set(&in, "filename", "rates.csv");
    init_ok(&in);
    run_two_epochs(&in);
    read_in(&in, "rates.csv", text, sizeof text);
    CHECK_STR(text, "step,epoch,lr\n1,0,0.5\n2,0,0.5\n3,0,0.5\n4,1,0.25\n5,1,0.25\n6,1,0.25\n");
    cb_deinit(&in);
}

/* A float32 rate, as the trainer stores it, is written so that it reads back exactly. */
static void case_exact_rate(const char *path, const char *scratch)
{
    cb_instance in;
    char text[1024];
    start(&in, path, scratch, "exact_rate");
    init_ok(&in);
    in.learning_rate = (double)0.01f;
    fg_callback_action act;
    fg_error err;
    CHECK_STATUS(cb_send(&in, FG_EVENT_EPOCH_END, 0, 469, NO_METRICS, &act, &err), FG_OK, err);
    read_in(&in, "lr.csv", text, sizeof text);
    CHECK_STR(text, "step,epoch,lr\n469,0,0.0099999997764825821\n");
    cb_deinit(&in);
}

static void case_other_ranks(const char *path, const char *scratch)
{
    cb_instance in;
    char listing[256];
    start(&in, path, scratch, "other_ranks");
    in.is_rank_zero = 0;
    init_ok(&in);
    run_two_epochs(&in);
    list_dir(in.run_dir, listing, sizeof listing);
    CHECK_STR(listing, "");
    CHECK_EQ(in.fh.metric_calls, 0);
    cb_deinit(&in);
}

static void case_paths(const char *path, const char *scratch)
{
    /* An absolute filename ignores the run folder. */
    cb_instance in;
    char text[256], abs_path[1200];
    start(&in, path, scratch, "paths");
    snprintf(abs_path, sizeof abs_path, "%s/abs.csv", in.run_dir);
    cb_set(&in, "filename", abs_path);
    snprintf(in.run_dir, sizeof in.run_dir, "/nonexistent-run-dir");
    init_ok(&in);
    fg_callback_action act;
    fg_error err;
    CHECK_STATUS(cb_send(&in, FG_EVENT_EPOCH_END, 0, 7, NO_METRICS, &act, &err), FG_OK, err);
    read_file(abs_path, text, sizeof text);
    CHECK_STR(text, "step,epoch,lr\n7,0,0.1\n");
    cb_deinit(&in);

    /* A folder that does not exist: the error names the key and the path. */
    start(&in, path, scratch, "paths_missing");
    cb_set(&in, "filename", "no/such/dir/lr.csv");
    init_ok(&in);
    fg_status st = cb_send(&in, FG_EVENT_EPOCH_END, 0, 7, NO_METRICS, &act, &err);
    CHECK_EQ(st, FG_INVALID_ARGUMENT);
    CHECK_CONTAINS(err.message, "filename = no/such/dir/lr.csv: ");
    CHECK_CONTAINS(err.message, "/paths_missing/no/such/dir/lr.csv: cannot open for writing: No such file");
    cb_deinit(&in);
}

static void case_bad_options(const char *path, const char *scratch)
{
    (void)scratch;
    cb_instance in;
    fg_error err;
    cb_prepare(&in, load_callback_plugin(path, "lr_monitor"));
    cb_set(&in, "logging_interval", "batch");
    CHECK_EQ(cb_init(&in, &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "logging_interval = 'batch': expected step or epoch");
    cb_prepare(&in, load_callback_plugin(path, "lr_monitor"));
    cb_set(&in, "filename", "");
    CHECK_EQ(cb_init(&in, &err), FG_INVALID_ARGUMENT);
    CHECK_CONTAINS(err.message, "filename is empty");
}

int main(int argc, char **argv)
{
    static const test_case cases[] = {
        {"epoch", case_epoch},
        {"step", case_step},
        {"exact_rate", case_exact_rate},
        {"other_ranks", case_other_ranks},
        {"paths", case_paths},
        {"bad_options", case_bad_options},
    };
    return run_case(cases, sizeof cases / sizeof cases[0], argc, argv, FG_TEST_LR_MONITOR_PLUGIN);
}
