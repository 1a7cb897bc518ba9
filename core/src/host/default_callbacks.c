/* Callbacks that run without a config section, as Lightning's progress bar and logger do,
 * and the `enabled` key every [callback.NAME] section has.
 *
 * The list is the core's: each entry is a callback plugin the trainer runs when the
 * config has no [callback.NAME] section of its own, and each is switched off by its own
 * key. A section for it (with its options, or `enabled = false`) takes its place. A
 * default plugin that is not installed is skipped (nobody named it); one whose file is
 * refused is skipped with a warning that says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

typedef struct default_callback {
    const char *name;      /* the plugin: callback.NAME */
    const char *section;   /* the section of its switch */
    const char *key;       /* the boolean key that switches it off when false */
    int terminal_only;     /* only when the run's output is an interactive terminal */
} default_callback;

static const default_callback defaults[] = {
    /* the live bar: [trainer] enable_progress_bar = false, as Lightning names it */
    {"progress", "trainer", "enable_progress_bar", 1},
    /* report.html in every run folder: [callback.report] enabled = false */
    {"report", "callback.report", "enabled", 0},
};

/* The validated value of a boolean key; `fallback` when the config does not set it. */
static int config_bool(const fg_config *cfg, const char *section, const char *key, int fallback)
{
    const char *v = fg_config_get(cfg, section, key);
    int b = fallback;
    if (v && fg_option_parse_bool(v, &b) != FG_OK) b = fallback;
    return b;
}

/* A process an MPI launcher started: mpirun gives each rank a pseudo-terminal and merges
 * what the ranks print into its own output, which may well be a log file. */
static int under_mpi_launcher(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

/* The bar draws in place with "\r": only on stdout when it is a terminal of its own (not
 * a launcher's), and not under --quiet. */
static int output_is_terminal(const fg_runtime *rt)
{
    const char *term = getenv("TERM");
    return rt->out && fileno(rt->out) == STDOUT_FILENO && isatty(STDOUT_FILENO) &&
           rt->verbosity >= FG_LOG_INFO && !(term && strcmp(term, "dumb") == 0) &&
           !under_mpi_launcher();
}

static void mark_disabled_sections(fg_runtime *rt)
{
    for (int i = 0; i < rt->instance_count; i++) {
        fg_instance *inst = rt->instances[i];
        if (inst->kind == FG_KIND_CALLBACK && !config_bool(rt->cfg, inst->section, "enabled", 1))
            inst->disabled = 1;
    }
}

static fg_status check_progress_switch(fg_runtime *rt, fg_error *err)
{
    if (config_bool(rt->cfg, "trainer", "enable_progress_bar", 1)) return FG_OK;
    fg_instance *bar = fg_runtime_instance(rt, "callback.progress");
    if (!bar || bar->disabled) return FG_OK;
    const char *origin = fg_config_origin(rt->cfg, "trainer", "enable_progress_bar");
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [trainer] enable_progress_bar = false, "
                        "but [callback.progress] is configured: remove one of them",
                        origin ? origin : fg_config_path(rt->cfg));
}

static fg_status add_default(fg_runtime *rt, const default_callback *d, fg_error *err)
{
    char section[128];
    snprintf(section, sizeof section, "callback.%s", d->name);
    if (fg_config_has_section(rt->cfg, section)) return FG_OK; /* configured: its own keys */
    if (!config_bool(rt->cfg, d->section, d->key, 1)) return FG_OK;
    if (d->terminal_only && !output_is_terminal(rt)) return FG_OK;
    fg_error e = {0};
    fg_status st = fg_runtime_add_instance(rt, section, FG_KIND_CALLBACK, d->name, &e);
    if (st == FG_NOT_FOUND) return FG_OK;
    if (st == FG_OUT_OF_MEMORY) return fg_error_set(err, st, "%s", e.message);
    if (st != FG_OK && rt->verbosity >= FG_LOG_WARN)
        fprintf(stderr, "fulgur: warning: the default callback %s does not run: %s\n", d->name,
                e.message);
    return FG_OK;
}

fg_status fg_runtime_add_default_callbacks(fg_runtime *rt, fg_error *err)
{
    mark_disabled_sections(rt);
    fg_status st = check_progress_switch(rt, err);
    for (size_t i = 0; st == FG_OK && i < sizeof defaults / sizeof defaults[0]; i++)
        st = add_default(rt, &defaults[i], err);
    return st;
}
