/* callback2.csv_logger.*: the CSV logger's exact file contents, driven through its ABI.
 * Covers the header widening (old rows padded with empty cells), the flush policy, number
 * formatting, quoting, rank 0 only, and the error messages. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cb_test.h"

#define NAME "csv_logger"

static const fg_plugin *plugin(void)
{
    return fg_test_need_plugin(FG_TEST_PLUGIN, FG_KIND_CALLBACK, NAME);
}

static void *start(const fg_plugin *p, fg_fake_host *h)
{
    void *state = NULL;
    fg_error err = {0};
    fg_status st = p->init(&h->host, &state, &err);
    CHECK(st == FG_OK, "init: %s", err.message);
    if (st != FG_OK)
        exit(1);
    return state;
}

/* Sends an event with metrics at (epoch, step) and expects success. */
static void send(const fg_plugin *p, void *state, uint32_t type, int64_t epoch, int64_t step,
                 const char *run, const fg_metric *m, uint32_t n)
{
    fg_event e = cb_event(type, epoch, step, run);
    cb_event_metrics(&e, m, n);
    fg_error err = {0};
    fg_status st = cb_send(p, state, &e, &err);
    CHECK(st == FG_OK, "event %u at step %lld: %s", type, (long long)step, err.message);
}

static void check_file(const char *path, const char *want)
{
    char *got = cb_read_file(path);
    CHECK_STR(got, want);
    free(got);
}

static void case_descriptor(const char *base)
{
    (void)base;
    const fg_plugin *p = plugin();
    CHECK(p->option_count == 3, "%u options", p->option_count);
    CHECK(strcmp(p->options[0].key, "filename") == 0 &&
              strcmp(p->options[0].default_value, "metrics.csv") == 0, "filename option");
    CHECK(strcmp(p->options[1].key, "flush_every_n_events") == 0 &&
              strcmp(p->options[1].default_value, "10") == 0, "flush_every_n_events option");
    CHECK(strcmp(p->options[2].key, "hparams") == 0 &&
              strcmp(p->options[2].default_value, "true") == 0, "hparams option");
}

/* hparams.yaml beside the CSV file: the resolved config by section, numbers and booleans
 * plain, other values quoted with escapes; rank != 0 and hparams = false write none; a
 * host without config_entry is refused when hparams is on. */
static void case_hparams(const char *base)
{
    static const char *const config[] = {
        "trainer", "max_epochs", "3",
        "trainer", "deterministic", "true",
        "trainer", "max_time", "01:30:00",
        "optimizer", "lr", "2e-3",
        "layer.fc1", "type", "linear",
        "data", "dir", "/data/a \"quoted\" dir\\x",
        NULL};
    char dir[4096], run[4200], yaml[4300];
    cb_scratch(dir, sizeof dir, base, "hparams");
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(yaml, sizeof yaml, "%s/hparams.yaml", run);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    h.config = config;
    void *s = start(p, &h);
    fg_event e = cb_event(FG_EVENT_FIT_START, 0, 0, run);
    e.is_rank_zero = 0;
    fg_error err = {0};
    CHECK(cb_send(p, s, &e, &err) == FG_OK, "%s", err.message);
    CHECK(!cb_exists(yaml), "rank 1 must not write hparams.yaml");
    send(p, s, FG_EVENT_FIT_START, 0, 0, run, NULL, 0);
    check_file(yaml, "# the run's resolved configuration (its config.ini), one mapping per section\n"
                     "trainer:\n  max_epochs: 3\n  deterministic: true\n  max_time: \"01:30:00\"\n"
                     "optimizer:\n  lr: 2e-3\n"
                     "layer.fc1:\n  type: \"linear\"\n"
                     "data:\n  dir: \"/data/a \\\"quoted\\\" dir\\\\x\"\n");
    p->deinit(s);

    cb_scratch(dir, sizeof dir, base, "hparams_off");
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(yaml, sizeof yaml, "%s/hparams.yaml", run);
    cb_host_init(&h, p);
    fg_fake_host_set(&h, "hparams", "false");
    s = start(p, &h);
    send(p, s, FG_EVENT_FIT_START, 0, 0, run, NULL, 0);
    CHECK(!cb_exists(yaml), "hparams = false must not write hparams.yaml");
    p->deinit(s);

    cb_host_init(&h, p);
    h.host.config_entry = NULL;
    s = NULL;
    CHECK(p->init(&h.host, &s, &err) == FG_INCOMPATIBLE && strstr(err.message, "hparams = false"),
          "a host without config_entry: %s", err.message);
}

/* Default options: step rows wait in memory; the epoch end flushes them; validation and
 * test widen the header. */
static void case_defaults(const char *base)
{
    char dir[4096], run[4200], csv[4300], tmp[4310];
    cb_scratch(dir, sizeof dir, base, "defaults");
    snprintf(run, sizeof run, "%s/run", dir); /* not there yet: the plugin creates it */
    snprintf(csv, sizeof csv, "%s/metrics.csv", run);
    snprintf(tmp, sizeof tmp, "%s.tmp", csv);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    void *s = start(p, &h);
    fg_metric s1[] = {{"train/step_loss", 0.5}, {"train/step_acc", 0.25}};
    fg_metric s2[] = {{"train/step_loss", 0.25}, {"train/step_acc", 0.5}};
    fg_metric ep[] = {{"train/loss", 0.375}, {"train/acc", 0.375}};
    fg_metric val[] = {{"val/loss", 0.75}, {"val/acc", 0.125}};
    fg_metric test[] = {{"test/loss", 1}, {"test/acc", 0.875}};
    send(p, s, FG_EVENT_FIT_START, 0, 0, run, NULL, 0);
    send(p, s, FG_EVENT_TRAIN_STEP_END, 0, 5, run, s1, 2);
    send(p, s, FG_EVENT_TRAIN_STEP_END, 0, 10, run, s2, 2);
    CHECK(!cb_exists(csv), "two step rows must still be in memory (flush every 10)");
    send(p, s, FG_EVENT_EPOCH_END, 0, 10, run, ep, 2);
    check_file(csv, "epoch,step,train/step_loss,train/step_acc,train/loss,train/acc\n"
                    "0,5,0.5,0.25,,\n"
                    "0,10,0.25,0.5,,\n"
                    "0,10,,,0.375,0.375\n");
    send(p, s, FG_EVENT_VALIDATION_END, 0, 10, run, val, 2);
    send(p, s, FG_EVENT_FIT_END, 1, 10, run, NULL, 0);
    send(p, s, FG_EVENT_TEST_END, 1, 10, run, test, 2);
    check_file(csv, "epoch,step,train/step_loss,train/step_acc,train/loss,train/acc,val/loss,"
                    "val/acc,test/loss,test/acc\n"
                    "0,5,0.5,0.25,,,,,,\n"
                    "0,10,0.25,0.5,,,,,,\n"
                    "0,10,,,0.375,0.375,,,,\n"
                    "0,10,,,,,0.75,0.125,,\n"
                    "1,10,,,,,,,1,0.875\n");
    CHECK(!cb_exists(tmp), "the rewrite's temporary file must be gone");
    p->deinit(s);
}

/* flush_every_n_events = 2 and a nested file name: a new column in pending rows widens the
 * file at the next flush; teardown flushes the rest. */
static void case_widening(const char *base)
{
    char dir[4096], run[4200], csv[4300];
    cb_scratch(dir, sizeof dir, base, "widening");
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(csv, sizeof csv, "%s/logs/deep/m.csv", run);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    fg_fake_host_set(&h, "flush_every_n_events", "2");
    fg_fake_host_set(&h, "filename", "logs/deep/m.csv");
    void *s = start(p, &h);
    fg_metric r1[] = {{"a", 1}, {"b", 2}}, r2[] = {{"a", 3}, {"b", 4}};
    fg_metric r3[] = {{"a", 5}, {"c", 6}}, r4[] = {{"b", 7}};
    fg_metric r5[] = {{"c", 8}, {"d", 9}};
    send(p, s, FG_EVENT_TRAIN_STEP_END, 0, 1, run, r1, 2);
    CHECK(!cb_exists(csv), "one row must wait");
    send(p, s, FG_EVENT_TRAIN_STEP_END, 0, 2, run, r2, 2);
    const char *two = "epoch,step,a,b\n0,1,1,2\n0,2,3,4\n";
    check_file(csv, two);
    send(p, s, FG_EVENT_TRAIN_STEP_END, 0, 3, run, r3, 2);
    check_file(csv, two);
    send(p, s, FG_EVENT_TRAIN_STEP_END, 0, 4, run, r4, 1);
    check_file(csv, "epoch,step,a,b,c\n0,1,1,2,\n0,2,3,4,\n0,3,5,,6\n0,4,,7,\n");
    send(p, s, FG_EVENT_TRAIN_STEP_END, 1, 15, run, r5, 2);
    p->deinit(s);
    check_file(csv, "epoch,step,a,b,c,d\n0,1,1,2,,\n0,2,3,4,,\n0,3,5,,6,\n0,4,,7,,\n"
                    "1,15,,,8,9\n");
}

/* Numbers read back as the same double; names with CSV syntax are quoted. */
static void case_values(const char *base)
{
    char dir[4096], csv[4300];
    cb_scratch(dir, sizeof dir, base, "values");
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    fg_fake_host_set(&h, "flush_every_n_events", "1");
    void *s = start(p, &h);
    fg_metric m[] = {{"v1", 0.1},      {"v2", 1.0 / 3},   {"v3", 1e-20},
                     {"v4", NAN},      {"v5", INFINITY},  {"v6", -INFINITY},
                     {"v7", 2},        {"v8", -0.5},      {"v9", 123456789012.0}};
    fg_metric odd[] = {{"with,comma", 1}, {"q\"uote", 2}, {"v1", 0.2}, {"v1", 0.3}};
    send(p, s, FG_EVENT_TRAIN_STEP_END, 0, 1, dir, m, 9);
    send(p, s, FG_EVENT_TRAIN_STEP_END, 0, 2, dir, odd, 4);
    p->deinit(s);
    check_file(csv, "epoch,step,v1,v2,v3,v4,v5,v6,v7,v8,v9,\"with,comma\",\"q\"\"uote\"\n"
                    "0,1,0.1,0.33333333333333331,1e-20,nan,inf,-inf,2,-0.5,123456789012,,\n"
                    "0,2,0.3,,,,,,,,,1,2\n");
}

/* Only rank 0 writes: other ranks create nothing. */
static void case_rank_nonzero(const char *base)
{
    char dir[4096], run[4200];
    cb_scratch(dir, sizeof dir, base, "rank_nonzero");
    snprintf(run, sizeof run, "%s/run", dir);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    void *s = start(p, &h);
    fg_metric m[] = {{"train/loss", 1}};
    fg_event e = cb_event(FG_EVENT_EPOCH_END, 0, 10, run);
    cb_event_metrics(&e, m, 1);
    e.is_rank_zero = 0;
    fg_error err = {0};
    CHECK(cb_send(p, s, &e, &err) == FG_OK, "%s", err.message);
    p->deinit(s);
    CHECK(!cb_exists(run), "rank 1 must not create %s", run);
}

/* A file left by an earlier run in the same folder is replaced, not appended to. */
static void case_truncate(const char *base)
{
    char dir[4096], csv[4300];
    cb_scratch(dir, sizeof dir, base, "truncate");
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    FILE *f = fopen(csv, "w");
    fputs("epoch,step,old\n7,7,7\n", f);
    fclose(f);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    void *s = start(p, &h);
    fg_metric m[] = {{"train/loss", 0.5}};
    send(p, s, FG_EVENT_FIT_START, 0, 0, dir, NULL, 0);
    send(p, s, FG_EVENT_EPOCH_END, 0, 10, dir, m, 1);
    check_file(csv, "epoch,step,train/loss\n0,10,0.5\n");
    p->deinit(s);
}

static void expect_error(const fg_plugin *p, void *s, const fg_event *e, fg_status want,
                         const char *fragment1, const char *fragment2)
{
    fg_error err = {0};
    fg_status st = cb_send(p, s, e, &err);
    CHECK(st == want, "status %s, want %s (%s)", fg_status_name(st), fg_status_name(want),
          err.message);
    CHECK(strstr(err.message, fragment1) != NULL, "message '%s' lacks '%s'", err.message,
          fragment1);
    CHECK(strstr(err.message, fragment2) != NULL, "message '%s' lacks '%s'", err.message,
          fragment2);
}

/* The run folder is a regular file: the message names the key, the path and the reason. */
static void case_bad_folder(const char *base)
{
    char dir[4096], run[4200];
    cb_scratch(dir, sizeof dir, base, "bad_folder");
    snprintf(run, sizeof run, "%s/not_a_dir", dir);
    fclose(fopen(run, "w"));
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    void *s = start(p, &h);
    fg_event e = cb_event(FG_EVENT_FIT_START, 0, 0, run);
    expect_error(p, s, &e, FG_INVALID_ARGUMENT,
                 "[callback.csv_logger] filename = metrics.csv: cannot create the folder of",
                 "not_a_dir/metrics.csv: Not a directory");
    p->deinit(s);
}

/* A folder is in the file's place: refused naming it, never replaced (issue 30). */
static void case_write_error(const char *base)
{
    char dir[4096], csv[4300];
    cb_scratch(dir, sizeof dir, base, "write_error");
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    mkdir(csv, 0777);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    void *s = start(p, &h);
    fg_metric m[] = {{"train/loss", 0.5}};
    fg_event e = cb_event(FG_EVENT_EPOCH_END, 0, 10, dir);
    cb_event_metrics(&e, m, 1);
    expect_error(p, s, &e, FG_INVALID_ARGUMENT, "[callback.csv_logger] ",
                 "metrics.csv: is a folder, not a regular file: refusing to replace it");
    p->deinit(s);
}

static void case_bad_option(const char *base)
{
    (void)base;
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    fg_fake_host_set(&h, "flush_every_n_events", "0");
    void *s = NULL;
    fg_error err = {0};
    fg_status st = p->init(&h.host, &s, &err);
    CHECK(st == FG_INVALID_ARGUMENT, "status %s", fg_status_name(st));
    CHECK_STR(err.message, "[callback.csv_logger] flush_every_n_events = 0: must be an "
                            "integer >= 1");
}

/* An event struct from a host older than the fields the plugin reads is refused. */
static void case_old_event(const char *base)
{
    char dir[4096];
    cb_scratch(dir, sizeof dir, base, "old_event");
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    void *s = start(p, &h);
    fg_event e = cb_event(FG_EVENT_FIT_START, 0, 0, dir);
    e.struct_size = (uint32_t)offsetof(fg_event, run_dir);
    expect_error(p, s, &e, FG_INCOMPATIBLE, "[callback.csv_logger] event struct of",
                 "is too old");
    p->deinit(s);
}

int main(int argc, char **argv)
{
    static const fg_test_case cases[] = {
        {"descriptor", .run_arg = case_descriptor},
        {"defaults", .run_arg = case_defaults},
        {"widening", .run_arg = case_widening},
        {"values", .run_arg = case_values},
        {"rank_nonzero", .run_arg = case_rank_nonzero},
        {"truncate", .run_arg = case_truncate},
        {"bad_folder", .run_arg = case_bad_folder},
        {"write_error", .run_arg = case_write_error},
        {"bad_option", .run_arg = case_bad_option},
        {"old_event", .run_arg = case_old_event},
        {"hparams", .run_arg = case_hparams},
    };
    return fg_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
