/* Test harness for the callback plugins: each plugin is dlopen'ed from its built .so and
 * driven through its ABI alone, as the trainer drives it, with the common fake host
 * (tests/common/fake_host.h). Events, scratch folders, files and stdout capture. */
#ifndef CB_TEST_H
#define CB_TEST_H

#include <stddef.h>
#include <stdint.h>

#include <fulgur/sdk.h>

#include "check.h"
#include "fake_host.h"
#include "plugin_load.h"
#include "test_event.h"

/* The common fake host (section "callback.NAME") serving a small resolved config
 * (trainer max_epochs 3 and seed 1, data name idx, optimizer lr 0.02) until a test sets
 * its own in h->config. */
void cb_host_init(fg_fake_host *h, const fg_plugin *plugin);

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

#endif
