/* One fake fg_host for every unit test that runs a plugin without the core. It answers
 * like the real host (core/src/host/host.c): a key the plugin's schema declares gets the
 * value the test set, else the schema's default; an undeclared key is FG_NOT_FOUND, text
 * that is not the type FG_INVALID_ARGUMENT (option_text.h). It captures what the plugin
 * logs and reports as metrics, serves aligned host memory, the resolved config
 * (config_entry) and the other plugins a test registers (find_plugin).
 *
 *   fg_fake_host h;
 *   fg_fake_host_init(&h, plugin, NULL);           section "callback.NAME", "data", ...
 *   fg_fake_host_set_text(&h, "threads = 2\ndevices = 1");
 *   plugin->init(&h.host, &state, &err);
 *
 * Built against the SDK headers only. */
#ifndef FG_TEST_FAKE_HOST_H
#define FG_TEST_FAKE_HOST_H

#include <stdint.h>
#include <stdio.h>

#include <fulgur/plugin.h>

#define FG_FAKE_HOST_MAX_OPTIONS 32
#define FG_FAKE_HOST_MAX_PLUGINS 4

typedef struct fg_fake_host {
    fg_host host;            /* first: a plugin gets &fake->host */
    const fg_plugin *plugin; /* its schema: the declared keys and their defaults */
    char section[64];
    int option_count;
    char keys[FG_FAKE_HOST_MAX_OPTIONS][64];
    char values[FG_FAKE_HOST_MAX_OPTIONS][512];

    char log[65536];         /* every line, "level: text\n" (as much as fits) */
    char last_log[1024];     /* the last line's text alone */
    int log_count;
    FILE *echo;              /* NULL, or where each line is also printed */
    int echo_level;          /* lines above this fg_log_level are not echoed */

    int metric_calls;
    char last_metric[64];
    double last_metric_value;
    int64_t last_metric_step;

    const char *const *config; /* config_entry: section, key, value triples, NULL-ended */
    struct {
        uint32_t kind;
        const void *vtable;
        void *state;
    } plugins[FG_FAKE_HOST_MAX_PLUGINS]; /* what find_plugin answers */
    int plugin_count;
} fg_fake_host;

/* No options set, no config, no other plugins, nothing echoed. section NULL: the real
 * host's, "callback.NAME" for a callback, the kind's name ("data", "comm") otherwise. */
void fg_fake_host_init(fg_fake_host *fh, const fg_plugin *plugin, const char *section);
/* Sets (or replaces) the text a getter reads for key, as an INI file would write it.
 * Exits the test (status 2) when more than FG_FAKE_HOST_MAX_OPTIONS keys are set. */
void fg_fake_host_set(fg_fake_host *fh, const char *key, const char *value);
/* "key = value" lines (separated by '\n'; blanks around key and value dropped). */
void fg_fake_host_set_text(fg_fake_host *fh, const char *text);
/* Also prints each log line at or below max_level to out, as "[section] level: text". */
void fg_fake_host_echo(fg_fake_host *fh, FILE *out, int max_level);
/* What find_plugin answers for kind (exits the test when the table is full). */
void fg_fake_host_add_plugin(fg_fake_host *fh, uint32_t kind, const void *vtable, void *state);

#endif
