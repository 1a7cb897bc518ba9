/* callback2.tensorboard.*: the TensorBoard writer, driven through its ABI. Case `write`
 * writes a run's event file and, beside it, expected.txt: one "<step> <tag> <value>" line
 * per scalar fed, the value rounded to float32 as the file stores it. tensorboard_check.sh
 * then decodes the file with decode_tfevents.py (an independent reader) and compares. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_test.h"

#define NAME "tensorboard"

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

/* Names of the event files in dir, up to max; returns how many there are. */
static int list_event_files(const char *dir, char names[][512], int max)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (d == NULL)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20) != 0)
            continue;
        if (n < max)
            snprintf(names[n], 512, "%s", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* events.out.tfevents.<unix time, 10 digits>.<this host's name> */
static void check_file_name(const char *name)
{
    char host[256] = "";
    gethostname(host, sizeof host);
    const char *p = name + strlen("events.out.tfevents.");
    size_t digits = strspn(p, "0123456789");
    CHECK(digits == 10 && p[digits] == '.' && strcmp(p + digits + 1, host) == 0,
          "event file name %s is not events.out.tfevents.<unix time>.%s", name, host);
}

typedef struct feed {
    uint32_t type;
    int64_t epoch, step;
    fg_metric metrics[4];
    uint32_t count;
} feed;

static void case_write(const char *base)
{
    char dir[4096], run[4200], tb[4300], expected[4300];
    cb_scratch(dir, sizeof dir, base, "write");
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(tb, sizeof tb, "%s/tb", run);
    snprintf(expected, sizeof expected, "%s/expected.txt", dir);
    /* A tag over 127 bytes needs a two-byte length varint; a step over 2^31 a five-byte
     * step varint; values cover float32 rounding, a negative, a tiny and a huge one. */
    char long_tag[200];
    memset(long_tag, 'x', sizeof long_tag);
    memcpy(long_tag, "custom/", 7);
    long_tag[sizeof long_tag - 1] = '\0';
    const feed events[] = {
        {FG_EVENT_FIT_START, 0, 0, {{0}}, 0},
        {FG_EVENT_TRAIN_STEP_END, 0, 5,
         {{"train/step_loss", 0.6931471805599453}, {"train/step_acc", 0.5}, {"lr", 0.1}}, 3},
        {FG_EVENT_TRAIN_STEP_END, 0, 10, {{"train/step_loss", 0.25}, {"train/step_acc", 0.75}}, 2},
        {FG_EVENT_EPOCH_END, 0, 10, {{"train/loss", 0.4}, {"train/acc", 0.625}}, 2},
        {FG_EVENT_VALIDATION_END, 0, 10, {{"val/loss", -1.5}, {"val/acc", 1e-30}}, 2},
        {FG_EVENT_TRAIN_STEP_END, 1, 3000000000LL, {{long_tag, 3e38}}, 1},
        {FG_EVENT_FIT_END, 1, 3000000000LL, {{0}}, 0},
        {FG_EVENT_TEST_END, 1, 3000000000LL, {{"test/loss", 0.125}, {"test/acc", 0.875}}, 2},
    };
    /* The config the HParams summaries carry, and how the decoder must print them. */
    static const char *const config[] = {
        "trainer", "max_epochs", "3",
        "trainer", "deterministic", "true",
        "trainer", "fast", "false",
        "optimizer", "lr", "0.02",
        "optimizer", "name", "sgd",
        "data", "dir", "/x \"q\"",
        NULL};
    static const char *const hparams_at_start =
        "0 _hparams_/experiment hparam trainer.max_epochs FLOAT64\n"
        "0 _hparams_/experiment hparam trainer.deterministic BOOL\n"
        "0 _hparams_/experiment hparam trainer.fast BOOL\n"
        "0 _hparams_/experiment hparam optimizer.lr FLOAT64\n"
        "0 _hparams_/experiment hparam optimizer.name STRING\n"
        "0 _hparams_/experiment hparam data.dir STRING\n"
        "0 _hparams_/experiment metric train/loss\n"
        "0 _hparams_/experiment metric train/acc\n"
        "0 _hparams_/experiment metric val/loss\n"
        "0 _hparams_/experiment metric val/acc\n"
        "0 _hparams_/experiment metric test/loss\n"
        "0 _hparams_/experiment metric test/acc\n"
        "0 _hparams_/session_start_info trainer.max_epochs = 3.0\n"
        "0 _hparams_/session_start_info trainer.deterministic = true\n"
        "0 _hparams_/session_start_info trainer.fast = false\n"
        "0 _hparams_/session_start_info optimizer.lr = 0.02\n"
        "0 _hparams_/session_start_info optimizer.name = \"sgd\"\n"
        "0 _hparams_/session_start_info data.dir = \"/x \\\"q\\\"\"\n";
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    h.config = config;
    void *s = start(p, &h);
    FILE *want = fopen(expected, "w");
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
        if (events[i].type == FG_EVENT_FIT_START)
            fputs(hparams_at_start, want);
        if (events[i].type == FG_EVENT_FIT_END)
            fputs("0 _hparams_/session_end_info status SUCCESS\n", want); /* at step 0, as torch */
        fg_event e = cb_event(events[i].type, events[i].epoch, events[i].step, run);
        cb_event_metrics(&e, events[i].metrics, events[i].count);
        fg_error err = {0};
        CHECK(cb_send(p, s, &e, &err) == FG_OK, "event %zu: %s", i, err.message);
        for (uint32_t m = 0; m < events[i].count; m++)
            fprintf(want, "%lld %s %.9g\n", (long long)events[i].step,
                    events[i].metrics[m].name, (double)(float)events[i].metrics[m].value);
        if (i == 0) { /* the file exists from the first event on */
            char names[2][512];
            CHECK(list_event_files(tb, names, 2) == 1, "no event file in %s after fit start", tb);
        }
    }
    fclose(want);
    p->deinit(s);

    char names[2][512], path[5000];
    int n = list_event_files(tb, names, 2);
    CHECK(n == 1, "%d event files in %s, want 1", n, tb);
    if (n < 1)
        return;
    check_file_name(names[0]);
    snprintf(path, sizeof path, "%s/%s", tb, names[0]);
    FILE *f = fopen(path, "rb");
    unsigned char head[12] = {0};
    CHECK(f != NULL && fread(head, 1, 12, f) == 12, "cannot read %s", path);
    if (f != NULL)
        fclose(f);
    /* The first 12 bytes of every TensorFlow event file: the 24-byte file_version record's
     * length and its masked CRC-32C. */
    static const unsigned char tf_head[12] = {0x18, 0, 0, 0, 0, 0, 0, 0, 0xa3, 0x7f, 0x4b, 0x22};
    CHECK(memcmp(head, tf_head, 12) == 0, "%s does not start like a TensorFlow event file", path);
}

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

/* Two writers in one folder within the same second never share or truncate a file. */
static void case_two_writers(const char *base)
{
    char dir[4096], tb[4200];
    cb_scratch(dir, sizeof dir, base, "two_writers");
    snprintf(tb, sizeof tb, "%s/tb", dir);
    const fg_plugin *p = plugin();
    fg_fake_host h1, h2;
    cb_host_init(&h1, p);
    cb_host_init(&h2, p);
    void *a = start(p, &h1), *b = start(p, &h2);
    fg_event e = cb_event(FG_EVENT_FIT_START, 0, 0, dir);
    fg_error err = {0};
    CHECK(cb_send(p, a, &e, &err) == FG_OK, "%s", err.message);
    CHECK(cb_send(p, b, &e, &err) == FG_OK, "%s", err.message);
    char names[4][512];
    int n = list_event_files(tb, names, 4);
    CHECK(n == 2, "%d event files, want 2", n);
    p->deinit(a);
    p->deinit(b);
}

static void case_absolute_subdir(const char *base)
{
    char dir[4096], abs[4200], names[2][512];
    cb_scratch(dir, sizeof dir, base, "absolute_subdir");
    snprintf(abs, sizeof abs, "%s/elsewhere/tb", dir);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    fg_fake_host_set(&h, "subdir", abs);
    void *s = start(p, &h);
    fg_event e = cb_event(FG_EVENT_FIT_START, 0, 0, "/nonexistent/run/dir");
    fg_error err = {0};
    CHECK(cb_send(p, s, &e, &err) == FG_OK, "%s", err.message);
    CHECK(list_event_files(abs, names, 2) == 1, "no event file in %s", abs);
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
    expect_error(p, s, &e, FG_INVALID_ARGUMENT, "[callback.tensorboard] subdir = tb: cannot create",
                 "not_a_dir: Not a directory");
    p->deinit(s);
}

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
    expect_error(p, s, &e, FG_INCOMPATIBLE, "[callback.tensorboard] event struct of", "too old");
    p->deinit(s);
}

static void case_descriptor(const char *base)
{
    (void)base;
    const fg_plugin *p = plugin();
    CHECK(p->option_count == 2 && strcmp(p->options[0].key, "subdir") == 0 &&
              strcmp(p->options[0].default_value, "tb") == 0, "subdir option");
    CHECK(strcmp(p->options[1].key, "hparams") == 0 &&
              strcmp(p->options[1].default_value, "true") == 0, "hparams option");
}

int main(int argc, char **argv)
{
    static const fg_test_case cases[] = {
        {"descriptor", .run_arg = case_descriptor},
        {"write", .run_arg = case_write},
        {"rank_nonzero", .run_arg = case_rank_nonzero},
        {"two_writers", .run_arg = case_two_writers},
        {"absolute_subdir", .run_arg = case_absolute_subdir},
        {"bad_folder", .run_arg = case_bad_folder},
        {"old_event", .run_arg = case_old_event},
    };
    return fg_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
