/* Shared by the callback plugin tests: an instance of a callback plugin loaded from its
 * built .so with dlopen, configured through the common fake host (tests/common), and sent
 * scripted events; file helpers. No plugin source is linked in. */
#ifndef FG_CB_TEST_H
#define FG_CB_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fake_host.h"
#include "fulgur/callback.h"

/* ---- an instance --------------------------------------------------------------------- */

typedef struct cb_instance {
    fg_fake_host fh; /* section "callback.test" */
    const fg_plugin *plugin;
    const fg_callback_vtable *vt;
    void *state;
    /* what the next events carry */
    int is_rank_zero;       /* 1 unless a test says otherwise */
    double learning_rate;
    int64_t steps_per_epoch;
    char run_dir[1024];
    const char *nonfinite_layer; /* sent as fg_event.nonfinite_layer; NULL unless set */
} cb_instance;

/* dlopens path and checks it is a callback plugin called name; exits the test (status
 * 1) with a message otherwise. The library stays loaded, as the host does it. */
const fg_plugin *load_callback_plugin(const char *path, const char *name);

/* Prepares an instance (options not set yet): rank 0, run_dir "." */
void cb_prepare(cb_instance *in, const fg_plugin *plugin);
/* Sets (or replaces) the value a getter answers for key, as an INI file would write it. */
void cb_set(cb_instance *in, const char *key, const char *value);
/* init() through the fake host. */
fg_status cb_init(cb_instance *in, fg_error *err);
void cb_deinit(cb_instance *in);

/* One event; the action is cleared first and filled by the plugin. */
fg_status cb_send(cb_instance *in, uint32_t type, int64_t epoch, int64_t global_step,
                  const fg_metric *metrics, uint32_t metric_count, fg_callback_action *action,
                  fg_error *err);

/* cb_send(in, type, epoch, step, METRICS({"val/loss", 0.5}, {"val/acc", 0.9}), &act, &err) */
#define METRICS(...)                                                                        \
    ((const fg_metric[]){__VA_ARGS__}),                                                     \
        (uint32_t)(sizeof((const fg_metric[]){__VA_ARGS__}) / sizeof(fg_metric))
#define NO_METRICS NULL, 0u

/* ---- files --------------------------------------------------------------------------- */

/* A fresh empty folder under base (created when missing); the path into out. */
void make_scratch_dir(const char *base, const char *name, char *out, size_t cap);
/* The names in a folder, sorted, joined by ' '; "" when empty or missing. */
void list_dir(const char *dir, char *out, size_t cap);
/* Writes text to dir/rel (rel may contain one folder level, created when missing). */
void write_file(const char *dir, const char *rel, const char *text);
/* Reads a whole small file into out; "" when missing. */
void read_file(const char *path, char *out, size_t cap);

/* Runs the case called argv[1] from a table; prints the result, returns the exit code. */
typedef struct test_case {
    const char *name;
    void (*fn)(const char *plugin_path, const char *scratch);
} test_case;
int run_case(const test_case *cases, size_t count, int argc, char **argv, const char *plugin_path);

#endif
