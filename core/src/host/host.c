/* Host services handed to each plugin instance: logging, typed options, aligned memory,
 * metrics and lookup of the other configured plugins. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_schema.h"
#include "runtime.h"

static const fg_option *find_option(const fg_instance *inst, const char *key)
{
    const fg_plugin *p = inst->plugin;
    if (p && p->options) {
        for (uint32_t i = 0; i < p->option_count; i++) {
            const fg_option *o = (const fg_option *)((const char *)p->options + (size_t)i * p->option_size);
            if (strcmp(o->key, key) == 0) return o;
        }
    }
    return NULL;
}

/* The user's value, else the schema's default; NULL for an undeclared key. */
static const char *option_value(const fg_host *host, const char *key, const fg_option **opt)
{
    const fg_instance *inst = (const fg_instance *)host;
    *opt = find_option(inst, key);
    if (!*opt) return NULL;
    const char *v = inst->rt && inst->rt->cfg && inst->section[0]
                        ? fg_config_get(inst->rt->cfg, inst->section, key)
                        : NULL;
    return v ? v : (*opt)->default_value;
}

static fg_status host_get_bool(const fg_host *host, const char *key, int *out)
{
    const fg_option *o;
    const char *v = option_value(host, key, &o);
    if (!v) return FG_NOT_FOUND;
    return fg_option_parse_bool(v, out);
}

static fg_status host_get_int(const fg_host *host, const char *key, int64_t *out)
{
    const fg_option *o;
    const char *v = option_value(host, key, &o);
    if (!v) return FG_NOT_FOUND;
    return fg_option_parse_int(v, out);
}

static fg_status host_get_float(const fg_host *host, const char *key, double *out)
{
    const fg_option *o;
    const char *v = option_value(host, key, &o);
    if (!v) return FG_NOT_FOUND;
    return fg_option_parse_float(v, out);
}

static fg_status host_get_string(const fg_host *host, const char *key, const char **out)
{
    const fg_option *o;
    const char *v = option_value(host, key, &o);
    if (!v) return FG_NOT_FOUND;
    *out = v;
    return FG_OK;
}

static void host_log_line(FILE *f, const fg_instance *inst, int level, const char *fmt,
                          va_list ap)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    flockfile(f);
    fprintf(f, "[%s.%s] %s: ", fg_kind_name(inst->kind) ? fg_kind_name(inst->kind) : "?",
            inst->name, names[level < 0 ? 0 : level > 3 ? 3 : level]);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    funlockfile(f);
}

static void host_log(const fg_host *host, int level, const char *fmt, ...)
{
    const fg_instance *inst = (const fg_instance *)host;
    int verbosity = inst->rt ? inst->rt->verbosity : FG_LOG_INFO;
    va_list ap;
    if (level <= FG_LOG_INFO && inst->rt && inst->rt->plugin_log) {
        va_start(ap, fmt);
        host_log_line(inst->rt->plugin_log, inst, level, fmt, ap);
        fflush(inst->rt->plugin_log);
        va_end(ap);
    }
    if (level > verbosity) return;
    FILE *f = level <= FG_LOG_WARN ? stderr : (inst->rt && inst->rt->out ? inst->rt->out : stdout);
    va_start(ap, fmt);
    host_log_line(f, inst, level, fmt, ap);
    va_end(ap);
}

static void *host_aligned_alloc(const fg_host *host, size_t align, size_t size)
{
    void *p = NULL;
    if (align < sizeof(void *)) align = sizeof(void *);
    if (posix_memalign(&p, align, size ? size : 1) != 0) return NULL;
    return p;
}

static void host_aligned_free(const fg_host *host, void *ptr) { free(ptr); }

/* A callback's reports are only logged: feeding them back into step events would let a
 * callback see its own output (lr_monitor reports the lr every event). */
static void host_metric(const fg_host *host, const char *name, double value, int64_t step)
{
    const fg_instance *inst = (const fg_instance *)host;
    if (inst->rt && inst->rt->metric_sink && inst->kind != FG_KIND_CALLBACK && name)
        inst->rt->metric_sink(inst->rt->metric_sink_user, name, value);
    if (inst->rt && inst->rt->verbosity >= FG_LOG_DEBUG)
        fprintf(inst->rt->out ? inst->rt->out : stdout, "metric %s = %g at step %lld\n", name,
                value, (long long)step);
}

static fg_status host_find_plugin(const fg_host *host, uint32_t kind, const void **vtable,
                                  void **state, fg_error *err)
{
    const fg_instance *self = (const fg_instance *)host;
    fg_instance *other = self->rt ? fg_runtime_instance_of_kind(self->rt, (int)kind) : NULL;
    if (!other || !other->initialized)
        return fg_error_set(err, FG_NOT_FOUND, "[%s] asked for a %s plugin, but none is configured",
                            self->section, fg_kind_name((int)kind) ? fg_kind_name((int)kind) : "?");
    if (kind == FG_KIND_COMM) { /* through the watch: a lost peer sets the exit code */
        *vtable = fg_runtime_comm(self->rt, state);
        return FG_OK;
    }
    *vtable = other->plugin->vtable;
    *state = other->state;
    return FG_OK;
}

/* The resolved config, entry by entry across sections in file order. */
static fg_status host_config_entry(const fg_host *host, size_t index, const char **section,
                                   const char **key, const char **value)
{
    const fg_instance *inst = (const fg_instance *)host;
    const fg_config *cfg = inst->rt ? inst->rt->cfg : NULL;
    for (size_t i = 0; cfg && i < fg_config_section_count(cfg); i++) {
        const char *sec = fg_config_section_name(cfg, i);
        size_t n = fg_config_entry_count(cfg, sec);
        if (index >= n) {
            index -= n;
            continue;
        }
        *section = sec;
        *key = fg_config_entry_key(cfg, sec, index);
        *value = fg_config_get(cfg, sec, *key);
        return FG_OK;
    }
    return FG_NOT_FOUND;
}

void fg_host_fill(fg_instance *inst)
{
    fg_host *h = &inst->host;
    memset(h, 0, sizeof *h);
    h->struct_size = sizeof *h;
    h->abi_major = FG_ABI_MAJOR;
    h->abi_minor = FG_ABI_MINOR;
    h->section = inst->section;
    h->log = host_log;
    h->get_bool = host_get_bool;
    h->get_int = host_get_int;
    h->get_float = host_get_float;
    h->get_string = host_get_string;
    h->aligned_alloc = host_aligned_alloc;
    h->aligned_free = host_aligned_free;
    h->metric = host_metric;
    h->find_plugin = host_find_plugin;
    h->config_entry = host_config_entry;
}
