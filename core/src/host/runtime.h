/* The runtime: a parsed config, the plugin loader and the configured plugin instances.
 * Internal to the core; the embedding API (fulgur.h) drives it. */
#ifndef FG_RUNTIME_H
#define FG_RUNTIME_H

#include "comm_watch.h"
#include "config.h"
#include "fulgur/fulgur.h"
#include "loader.h"

#define FG_MAX_INSTANCES 32

/* A configured plugin: its host table (first member, so a host pointer is an instance
 * pointer), where it was configured, and its state once initialised. */
typedef struct fg_instance {
    fg_host host;
    struct fg_runtime *rt;
    int kind;
    char section[128];
    char name[64];
    const fg_plugin *plugin;
    const char *path;
    void *state;
    int initialized;
    int disabled; /* [callback.NAME] enabled = false: loaded and checked, never started */
} fg_instance;

struct fg_runtime {
    FILE *out;
    int verbosity;
    fg_loader *loader;
    fg_config *cfg;
    char config_dir[4096];
    fg_instance *instances[FG_MAX_INSTANCES];
    int instance_count;
    /* Internal, for the tuner: called at every logged training step with the learning rate
     * of that step and the mean loss since the last log; nonzero stops the fit. */
    int (*step_observer)(void *user, int64_t step, double lr, double loss);
    void *step_observer_user;
    /* Internal, set by the trainer during a fit: where host->metric reports of backend,
     * precision and strategy plugins go (the trainer's per-step sink); NULL: logged only. */
    void (*metric_sink)(void *user, const char *name, double value);
    void *metric_sink_user;
    /* Internal, set by the trainer while a fit has a run folder (rank 0): its plugins.log,
     * where every line a plugin logs at info level or above is also written, whatever the
     * verbosity (what a backend chose, such as its convolution algorithms); NULL: none. */
    FILE *plugin_log;
    /* The comm as plugins and the core call it (fg_runtime_comm): failures remembered. */
    fg_comm_watch comm_watch;
    int comm_watch_ready;
};

/* The instance configured from `section`, or NULL. */
fg_instance *fg_runtime_instance(fg_runtime *rt, const char *section);
/* The first instance of a kind, or NULL. */
fg_instance *fg_runtime_instance_of_kind(fg_runtime *rt, int kind);
/* The comm instance's calls through the runtime's watch (comm_watch.h): *state is the
 * watch's. NULL (and *state NULL) when no comm is configured and started. */
const fg_comm_vtable *fg_runtime_comm(fg_runtime *rt, void **state);
/* Calls init on every configured instance, in dependency order (backend first). A named
 * plugin that answers FG_UNAVAILABLE is an error: nothing falls back silently. */
fg_status fg_runtime_init_plugins(fg_runtime *rt, fg_error *err);
void fg_runtime_deinit_plugins(fg_runtime *rt);

/* default_callbacks.c: after the config is validated, the callbacks that run without a
 * section (progress on a terminal, report), each switched off by its own key; and
 * `enabled = false` of configured callback sections. */
fg_status fg_runtime_add_default_callbacks(fg_runtime *rt, fg_error *err);

/* Loads the plugin of `section` into a new instance (its host table filled, not started). */
fg_status fg_runtime_add_instance(fg_runtime *rt, const char *section, int kind, const char *name,
                                  fg_error *err);

/* Fills the host table of an instance (also used for throw-away instances). */
void fg_host_fill(fg_instance *inst);

#endif
