/* sdk.metrics_json: drives the out-of-tree example plugin through its ABI alone, the way
 * a host does (dlopen, read the descriptor, init with a host table, send events), and
 * checks the exact lines it writes. Built against the installed headers only, with
 * tests/common (the fake host and checks need nothing but the SDK headers).
 *
 * usage: metrics_json_driver PLUGIN.so SCRATCH_DIR */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fulgur/sdk.h>

#include "check.h"
#include "fake_host.h"
#include "plugin_load.h"
#include "test_event.h"

/* The common fake host with path (NULL: not set) and every_n_events. */
static void make_host(fg_fake_host *h, const fg_plugin *p, const char *path, int64_t every)
{
    char n[32];
    snprintf(n, sizeof n, "%lld", (long long)every);
    fg_fake_host_init(h, p, NULL);
    fg_fake_host_set(h, "every_n_events", n);
    if (path != NULL)
        fg_fake_host_set(h, "path", path);
}

static fg_event make_event(uint32_t type, int64_t step, const fg_metric *m, uint32_t n, int rank0)
{
    fg_event e = fg_test_event(type, 1, step, 10, 0.1, ".");
    e.metrics = m;
    e.metric_count = n;
    e.is_rank_zero = rank0;
    return e;
}

/* The whole file, or NULL when it does not exist. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = calloc(1, 65536);
    size_t n = buf ? fread(buf, 1, 65535, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}

/* Sends `count` events (global_step = 10 + i) to a fresh instance, then deinit. */
static fg_status run_events(const fg_plugin *p, fg_fake_host *h, const fg_event *events, int count,
                            fg_error *err)
{
    void *state = NULL;
    fg_status st = p->init(&h->host, &state, err);
    if (st != FG_OK)
        return st;
    const fg_callback_vtable *vt = p->vtable;
    for (int i = 0; i < count && st == FG_OK; i++) {
        fg_callback_action action;
        memset(&action, 0, sizeof action);
        action.struct_size = sizeof action;
        st = vt->on_event(state, &events[i], &action, err);
        CHECK(!action.stop && !action.save_checkpoint, "metrics_json must not act on training");
    }
    p->deinit(state);
    return st;
}

static void check_descriptor(const fg_plugin *p)
{
    CHECK(p->magic == FG_PLUGIN_MAGIC, "magic %#x", (unsigned)p->magic);
    CHECK(p->struct_size == sizeof(fg_plugin), "struct_size %u", (unsigned)p->struct_size);
    CHECK(p->abi_major == FG_ABI_MAJOR, "abi_major %u", (unsigned)p->abi_major);
    CHECK(p->kind == FG_KIND_CALLBACK, "kind %u", (unsigned)p->kind);
    CHECK(strcmp(p->name, "metrics_json") == 0, "name %s", p->name);
    CHECK(p->option_count == 2 && p->option_size == sizeof(fg_option), "%u options of %u bytes",
          (unsigned)p->option_count, (unsigned)p->option_size);
    CHECK(strcmp(p->options[0].key, "path") == 0 && p->options[0].type == FG_OPT_STRING &&
              p->options[0].default_value == FG_OPT_REQUIRED,
          "option 0: %s", p->options[0].key);
    CHECK(strcmp(p->options[1].key, "every_n_events") == 0 && p->options[1].type == FG_OPT_INT &&
              strcmp(p->options[1].default_value, "1") == 0 && p->options[1].min == 1,
          "option 1: %s", p->options[1].key);
    const fg_callback_vtable *vt = p->vtable;
    CHECK(vt != NULL && vt->struct_size == sizeof(fg_callback_vtable) && vt->on_event != NULL,
          "callback vtable");
}

static void check_all_events(const fg_plugin *p, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/all.jsonl", dir);
    fg_metric m[] = {{"train/loss", 0.25}, {"train/acc", NAN}, {"odd\"name\\\n", -3e-7}};
    fg_event ev[] = {make_event(FG_EVENT_FIT_START, 10, NULL, 0, 1),
                     make_event(FG_EVENT_TRAIN_STEP_END, 11, m, 3, 1)};
    fg_fake_host h;
    make_host(&h, p, path, 1);
    fg_error err = {0};
    fg_status st = run_events(p, &h, ev, 2, &err);
    CHECK(st == FG_OK, "status %s: %s", fg_status_name(st), err.message);
    char *text = read_file(path);
    const char *want =
        "{\"event\":\"fit_start\",\"epoch\":1,\"global_step\":10,\"step_in_epoch\":0,"
        "\"steps_per_epoch\":10,\"lr\":0.1,\"metrics\":{}}\n"
        "{\"event\":\"train_step_end\",\"epoch\":1,\"global_step\":11,\"step_in_epoch\":1,"
        "\"steps_per_epoch\":10,\"lr\":0.1,\"metrics\":{\"train/loss\":0.25,\"train/acc\":null,"
        "\"odd\\\"name\\\\\\n\":-3e-07}}\n";
    CHECK(text != NULL && strcmp(text, want) == 0, "%s holds\n%s\nwant\n%s", path,
          text ? text : "(no file)", want);
    free(text);
}

static void check_every_n(const fg_plugin *p, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/every3.jsonl", dir);
    fg_metric m[] = {{"val/loss", 1.5}};
    fg_event ev[7];
    for (int i = 0; i < 7; i++)
        ev[i] = make_event(FG_EVENT_VALIDATION_END, 10 + i, m, 1, 1);
    fg_fake_host h;
    make_host(&h, p, path, 3);
    fg_error err = {0};
    fg_status st = run_events(p, &h, ev, 7, &err);
    CHECK(st == FG_OK, "status %s: %s", fg_status_name(st), err.message);
    char *text = read_file(path);
    int lines = 0;
    for (const char *c = text; c && *c; c++)
        lines += *c == '\n';
    CHECK(lines == 3, "every_n_events = 3 over 7 events: %d lines, want 3 (events 1, 4, 7)", lines);
    CHECK(text && strstr(text, "\"global_step\":10,") && strstr(text, "\"global_step\":13,") &&
              strstr(text, "\"global_step\":16,") && !strstr(text, "\"global_step\":11,"),
          "written steps:\n%s", text ? text : "(no file)");
    free(text);
}

static void check_not_rank_zero(const fg_plugin *p, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank1.jsonl", dir);
    fg_event ev[] = {make_event(FG_EVENT_EPOCH_END, 10, NULL, 0, 0)};
    fg_fake_host h;
    make_host(&h, p, path, 1);
    fg_error err = {0};
    CHECK(run_events(p, &h, ev, 1, &err) == FG_OK, "%s", err.message);
    char *text = read_file(path);
    CHECK(text == NULL, "a rank other than 0 created %s", path);
    free(text);
}

static void check_errors(const fg_plugin *p, const char *dir)
{
    fg_event ev[] = {make_event(FG_EVENT_EPOCH_END, 10, NULL, 0, 1)};
    fg_error err = {0};

    char bad[4096];
    snprintf(bad, sizeof bad, "%s/no-such-dir/m.jsonl", dir);
    fg_fake_host h;
    make_host(&h, p, bad, 1);
    fg_status st = run_events(p, &h, ev, 1, &err);
    char want[4200];
    snprintf(want, sizeof want, "[callback.metrics_json] path = %s: cannot open for writing: ", bad);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(err.message, want) != NULL,
          "unwritable path: %s: %s", fg_status_name(st), err.message);

    make_host(&h, p, NULL, 1);
    memset(&err, 0, sizeof err);
    st = run_events(p, &h, ev, 1, &err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(err.message, "[callback.metrics_json] path: required"),
          "missing path: %s: %s", fg_status_name(st), err.message);

    make_host(&h, p, bad, 0);
    memset(&err, 0, sizeof err);
    st = run_events(p, &h, ev, 1, &err);
    CHECK(st == FG_INVALID_ARGUMENT && strstr(err.message, "every_n_events = 0: must be an integer >= 1"),
          "every_n_events = 0: %s: %s", fg_status_name(st), err.message);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PLUGIN.so SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    const fg_plugin *p = fg_test_load_plugin(argv[1], FG_KIND_CALLBACK, "metrics_json");
    if (p == NULL)
        return 1;
    check_descriptor(p);
    if (fg_test_failures == 0) {
        check_all_events(p, argv[2]);
        check_every_n(p, argv[2]);
        check_not_rank_zero(p, argv[2]);
        check_errors(p, argv[2]);
    }
    return fg_test_report("metrics_json");
}
