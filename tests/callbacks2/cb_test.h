/* Test harness for the callback plugins: each plugin is dlopen'ed from its built .so and
 * driven through its ABI alone, as the trainer drives it. A fake host answers option
 * queries with the value a test set, else the default the plugin's own schema declares,
 * and records what the plugin logged. */
#ifndef CB_TEST_H
#define CB_TEST_H

#include <stddef.h>
#include <stdint.h>

#include <fulgur/sdk.h>

extern int cb_failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            cb_failures++;                                                                 \
        }                                                                                  \
    } while (0)

/* Compares two strings and prints both on a mismatch. */
#define CHECK_TEXT(got, want)                                                              \
    do {                                                                                   \
        const char *got_ = (got), *want_ = (want);                                         \
        CHECK(got_ != NULL && strcmp(got_, want_) == 0, "\n--- got ---\n%s\n--- want ---\n%s", \
              got_ ? got_ : "(null)", want_);                                              \
    } while (0)

#define CB_MAX_OPTIONS 8

typedef struct cb_host {
    fg_host host; /* first: the plugin gets &h->host */
    const fg_plugin *plugin;
    char section[64];
    const char *keys[CB_MAX_OPTIONS];
    const char *values[CB_MAX_OPTIONS];
    int option_count;
    char last_log[1024];
    int log_count;
    const char *const *config; /* section, key, value triples, NULL-ended; NULL: a default */
} cb_host;

/* dlopens path and returns its descriptor, checked to be a callback named `name`. */
const fg_plugin *cb_load(const char *path, const char *name);

/* A host for plugin with the section "callback.<name>" and no options set. */
void cb_host_init(cb_host *h, const fg_plugin *plugin);
void cb_host_set(cb_host *h, const char *key, const char *value);
/* The resolved config host->config_entry serves (triples, NULL-ended; kept by pointer). */
void cb_host_config(cb_host *h, const char *const *triples);

/* An event as the trainer builds it: rank 0, no metrics, 10 steps per epoch. */
fg_event cb_event(uint32_t type, int64_t epoch, int64_t global_step, const char *run_dir);
void cb_event_metrics(fg_event *e, const fg_metric *metrics, uint32_t count);

/* Sends one event and checks that the plugin asked neither to stop nor to checkpoint. */
fg_status cb_send(const fg_plugin *p, void *state, const fg_event *e, fg_error *err);

/* A fresh empty folder under base, named after the case. Exits the test on failure. */
void cb_scratch(char *out, size_t cap, const char *base, const char *name);

/* The whole file (malloc'ed, NUL-terminated), or NULL when it cannot be read. */
char *cb_read_file(const char *path);
int cb_exists(const char *path);

/* Redirects stdout (fd 1) into path until cb_capture_end, which returns what was written
 * (malloc'ed). Begin before the plugin's init: that is where it asks isatty(1). */
void cb_capture_begin(const char *path);
char *cb_capture_end(void);

/* Runs the case named argv[1] from the table; prints "ok" or the failures. */
typedef struct cb_case {
    const char *name;
    void (*run)(const char *scratch_base);
} cb_case;
int cb_main(int argc, char **argv, const cb_case *cases, size_t count);

#endif
