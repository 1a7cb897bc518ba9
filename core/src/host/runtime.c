/* Runtime: configure (parse, override, load the named plugins, validate everything before
 * anything runs), initialise plugins, and find instances. */
#include "runtime.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include "core_schema.h"
#include "hf_config.h"
#include "section_schema.h"

const char *fg_version(void) { return FULGUR_VERSION; }
int fg_abi_minor(void) { return FG_ABI_MINOR; }

fg_status fg_runtime_create(const fg_runtime_options *opts, fg_runtime **out, fg_error *err)
{
    fg_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return fg_error_set(err, FG_OUT_OF_MEMORY, "fulgur: out of memory creating the runtime");
    rt->out = stdout;
    rt->verbosity = FG_LOG_INFO;
    if (opts && FG_HAS_FIELD(opts, fg_runtime_options, out) && opts->out) rt->out = opts->out;
    if (opts && FG_HAS_FIELD(opts, fg_runtime_options, verbosity)) rt->verbosity = opts->verbosity;
    fg_status st = fg_loader_create(&rt->loader, err);
    if (st != FG_OK) {
        free(rt);
        return st;
    }
    if (opts && FG_HAS_FIELD(opts, fg_runtime_options, plugin_path_count)) {
        for (int i = 0; i < opts->plugin_path_count; i++) {
            st = fg_loader_add_path(rt->loader, opts->plugin_paths[i], err);
            if (st != FG_OK) {
                fg_runtime_destroy(rt);
                return st;
            }
        }
    }
    *out = rt;
    return FG_OK;
}

void fg_runtime_destroy(fg_runtime *rt)
{
    if (!rt) return;
    fg_runtime_deinit_plugins(rt);
    for (int i = 0; i < rt->instance_count; i++) free(rt->instances[i]);
    fg_config_destroy(rt->cfg);
    fg_loader_destroy(rt->loader);
    free(rt);
}

fg_instance *fg_runtime_instance(fg_runtime *rt, const char *section)
{
    for (int i = 0; i < rt->instance_count; i++)
        if (strcmp(rt->instances[i]->section, section) == 0) return rt->instances[i];
    return NULL;
}

fg_instance *fg_runtime_instance_of_kind(fg_runtime *rt, int kind)
{
    for (int i = 0; i < rt->instance_count; i++)
        if (rt->instances[i]->kind == kind) return rt->instances[i];
    return NULL;
}

/* [plugins] path: folders relative to the config file's own folder. */
static fg_status add_config_plugin_paths(fg_runtime *rt, fg_error *err)
{
    const char *list = fg_config_get(rt->cfg, "plugins", "path");
    if (!list || !*list) return FG_OK;
    char *copy = strdup(list);
    if (!copy) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    fg_status st = FG_OK;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && st == FG_OK;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t') tok++;
        size_t n = strlen(tok);
        while (n && (tok[n - 1] == ' ' || tok[n - 1] == '\t')) tok[--n] = 0;
        if (!n) continue;
        char dir[8192];
        if (tok[0] == '/')
            snprintf(dir, sizeof dir, "%s", tok);
        else
            snprintf(dir, sizeof dir, "%s/%s", rt->config_dir, tok);
        st = fg_loader_add_path(rt->loader, dir, err);
    }
    free(copy);
    return st;
}

fg_status fg_runtime_add_instance(fg_runtime *rt, const char *section, int kind, const char *name,
                                  fg_error *err)
{
    if (rt->instance_count >= FG_MAX_INSTANCES)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: more than %d plugin sections",
                            fg_config_path(rt->cfg), FG_MAX_INSTANCES);
    const fg_plugin *plugin;
    const char *path;
    fg_error lerr = {0};
    fg_status st = fg_loader_load(rt->loader, kind, name, &plugin, &path, &lerr);
    if (st != FG_OK) {
        const char *origin = fg_config_origin(rt->cfg, section, "name");
        if (!origin) origin = fg_config_origin(rt->cfg, section, NULL);
        return fg_error_set(err, st, "%s: [%s] plugin %s.%s cannot be used: %s",
                            origin ? origin : fg_config_path(rt->cfg), section, fg_kind_name(kind),
                            name, lerr.message);
    }
    fg_instance *inst = calloc(1, sizeof *inst);
    if (!inst) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    inst->rt = rt;
    inst->kind = kind;
    snprintf(inst->section, sizeof inst->section, "%s", section);
    snprintf(inst->name, sizeof inst->name, "%s", name);
    inst->plugin = plugin;
    inst->path = path;
    fg_host_fill(inst);
    rt->instances[rt->instance_count++] = inst;
    return FG_OK;
}

/* Every plugin section names its plugin (or takes the default); each is loaded now so its
 * schema can validate the section. */
static fg_status load_configured_plugins(fg_runtime *rt, fg_error *err)
{
    static const char *const defaults[] = {"backend", "precision", "strategy"};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        if (!fg_config_has_section(rt->cfg, defaults[i])) {
            fg_status st = fg_config_set(rt->cfg, defaults[i], "name",
                                         fg_section_default_plugin(defaults[i]), err);
            if (st != FG_OK) return st;
        }
    }
    for (size_t i = 0; i < fg_config_section_count(rt->cfg); i++) {
        const char *section = fg_config_section_name(rt->cfg, i);
        int kind = fg_section_plugin_kind(section);
        if (!kind) continue;
        const char *name = kind == FG_KIND_CALLBACK ? section + strlen("callback.")
                                                    : fg_config_get(rt->cfg, section, "name");
        if (!name) name = fg_section_default_plugin(section);
        if (!name || !*name)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] is missing required key 'name'",
                                fg_config_origin(rt->cfg, section, NULL), section);
        fg_status st = fg_runtime_add_instance(rt, section, kind, name, err);
        if (st != FG_OK) return st;
    }
    return FG_OK;
}

static fg_status validate_sections(fg_runtime *rt, fg_error *err)
{
    for (size_t i = 0; i < fg_config_section_count(rt->cfg); i++) {
        const char *section = fg_config_section_name(rt->cfg, i);
        fg_schema schemas[4];
        size_t n = 0;
        fg_status st = fg_section_schemas(rt, section, schemas, &n, err);
        if (st != FG_OK) return st;
        st = fg_config_validate_section(rt->cfg, section, schemas, n, err);
        if (st != FG_OK) return st;
    }
    return FG_OK;
}

fg_status fg_runtime_configure(fg_runtime *rt, const char *path, const char *const *overrides,
                               int override_count, fg_error *err)
{
    if (rt->cfg)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur: the runtime is already configured");
    fg_status st = fg_config_load(path, &rt->cfg, err);
    if (st != FG_OK) return st;
    char *dup = strdup(path);
    if (!dup) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    snprintf(rt->config_dir, sizeof rt->config_dir, "%s", dirname(dup));
    free(dup);
    for (int i = 0; i < override_count; i++) {
        st = fg_config_override(rt->cfg, overrides[i], err);
        if (st != FG_OK) return st;
    }
    st = fg_hf_config_apply(rt->cfg, err); /* config.json's layers, before any check */
    if (st != FG_OK) return st;
    st = fg_config_check_sections(rt->cfg, fg_core_sections, fg_core_section_count,
                                  fg_core_section_prefixes, fg_core_section_prefix_count, err);
    if (st == FG_OK) st = add_config_plugin_paths(rt, err);
    if (st == FG_OK) st = fg_loader_add_default_paths(rt->loader, err);
    if (st == FG_OK) st = load_configured_plugins(rt, err);
    if (st == FG_OK) st = validate_sections(rt, err);
    if (st == FG_OK) st = fg_runtime_add_default_callbacks(rt, err);
    return st;
}

/* Backends first: the others may look them up during init. */
static int init_rank(int kind)
{
    switch (kind) {
    case FG_KIND_BACKEND: return 0;
    case FG_KIND_COMM: return 1;
    case FG_KIND_PRECISION: return 2;
    case FG_KIND_DATA: return 3;
    case FG_KIND_STRATEGY: return 4;
    default: return 5;
    }
}

fg_status fg_runtime_init_plugins(fg_runtime *rt, fg_error *err)
{
    rt->comm_watch_ready = 0; /* a new comm instance: no failure seen yet */
    for (int rank = 0; rank <= 5; rank++) {
        for (int i = 0; i < rt->instance_count; i++) {
            fg_instance *inst = rt->instances[i];
            if (inst->initialized || inst->disabled || init_rank(inst->kind) != rank) continue;
            fg_error perr = {0};
            fg_status st = inst->plugin->init(&inst->host, &inst->state, &perr);
            if (st != FG_OK) {
                const char *what = st == FG_UNAVAILABLE ? "is unavailable" : "failed to start";
                return fg_error_set(err, st, "[%s] %s.%s %s: %s", inst->section,
                                    fg_kind_name(inst->kind), inst->name, what,
                                    perr.message[0] ? perr.message : fg_status_name(st));
            }
            inst->initialized = 1;
        }
    }
    return FG_OK;
}

void fg_runtime_deinit_plugins(fg_runtime *rt)
{
    for (int rank = 5; rank >= 0; rank--) {
        for (int i = rt->instance_count - 1; i >= 0; i--) {
            fg_instance *inst = rt->instances[i];
            if (!inst->initialized || init_rank(inst->kind) != rank) continue;
            if (inst->plugin->deinit) inst->plugin->deinit(inst->state);
            inst->initialized = 0;
            inst->state = NULL;
        }
    }
}

const fg_comm_vtable *fg_runtime_comm(fg_runtime *rt, void **state)
{
    fg_instance *inst = fg_runtime_instance_of_kind(rt, FG_KIND_COMM);
    *state = NULL;
    if (!inst || !inst->initialized) return NULL;
    if (!rt->comm_watch_ready || rt->comm_watch.inner_state != inst->state) {
        fg_comm_watch_init(&rt->comm_watch, inst->plugin->vtable, inst->state);
        rt->comm_watch_ready = 1;
    }
    *state = &rt->comm_watch;
    return &rt->comm_watch.vt;
}

int fg_runtime_exit_code(const fg_runtime *rt, fg_status st)
{
    if (st != FG_OK && rt->comm_watch_ready && rt->comm_watch.peer_failed)
        return 3; /* README "Exit status": peer failure, what the comm's abort ends the job with */
    return fg_status_exit_code(st, 0);
}
