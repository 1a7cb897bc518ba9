/* The fake host of the unit tests; see fake_host.h. */
#define _POSIX_C_SOURCE 200809L
#include "fake_host.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "option_text.h"

static const char *const level_names[] = {"error", "warning", "info", "debug"};
static const char *const kind_names[] = {"", "backend", "precision", "strategy", "comm",
                                         "data", "callback"};

static fg_fake_host *as_fake(const fg_host *host)
{
    return (fg_fake_host *)host; /* fg_host is its first member */
}

/* The set value, else the schema default; NULL for a key the schema does not declare. */
static const char *option_value(const fg_host *host, const char *key)
{
    const fg_fake_host *fh = as_fake(host);
    const fg_plugin *p = fh->plugin;
    const fg_option *declared = NULL;
    for (uint32_t i = 0; p && p->options && i < p->option_count && !declared; i++) {
        const fg_option *o =
            (const fg_option *)((const char *)p->options + (size_t)i * p->option_size);
        if (strcmp(o->key, key) == 0)
            declared = o;
    }
    if (!declared)
        return NULL;
    for (int i = 0; i < fh->option_count; i++)
        if (strcmp(fh->keys[i], key) == 0)
            return fh->values[i];
    return declared->default_value;
}

static fg_status get_string(const fg_host *host, const char *key, const char **out)
{
    return fg_test_option_string(option_value(host, key), out);
}

static fg_status get_int(const fg_host *host, const char *key, int64_t *out)
{
    return fg_test_option_int(option_value(host, key), out);
}

static fg_status get_float(const fg_host *host, const char *key, double *out)
{
    return fg_test_option_float(option_value(host, key), out);
}

static fg_status get_bool(const fg_host *host, const char *key, int *out)
{
    return fg_test_option_bool(option_value(host, key), out);
}

static void host_log(const fg_host *host, int level, const char *fmt, ...)
{
    fg_fake_host *fh = as_fake(host);
    const char *name = level_names[level < 0 ? 0 : level > 3 ? 3 : level];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fh->last_log, sizeof fh->last_log, fmt, ap);
    va_end(ap);
    size_t used = strlen(fh->log);
    snprintf(fh->log + used, sizeof fh->log - used, "%s: %s\n", name, fh->last_log);
    fh->log_count++;
    if (fh->echo && level <= fh->echo_level) {
        fprintf(fh->echo, "[%s] %s: %s\n", fh->section, name, fh->last_log);
        fflush(fh->echo);
    }
}

static void metric(const fg_host *host, const char *name, double value, int64_t step)
{
    fg_fake_host *fh = as_fake(host);
    fh->metric_calls++;
    snprintf(fh->last_metric, sizeof fh->last_metric, "%s", name);
    fh->last_metric_value = value;
    fh->last_metric_step = step;
}

static void *host_aligned_alloc(const fg_host *host, size_t align, size_t size)
{
    (void)host;
    void *p = NULL;
    if (align < sizeof(void *))
        align = sizeof(void *);
    return posix_memalign(&p, align, size ? size : 1) == 0 ? p : NULL;
}

static void host_aligned_free(const fg_host *host, void *ptr)
{
    (void)host;
    free(ptr);
}

static fg_status find_plugin(const fg_host *host, uint32_t kind, const void **vtable,
                             void **state, fg_error *err)
{
    const fg_fake_host *fh = as_fake(host);
    for (int i = 0; i < fh->plugin_count; i++) {
        if (fh->plugins[i].kind != kind)
            continue;
        *vtable = fh->plugins[i].vtable;
        *state = fh->plugins[i].state;
        return FG_OK;
    }
    return fg_error_set(err, FG_NOT_FOUND, "[%s] asked for a plugin of kind %u, but the fake "
                        "host has none", fh->section, kind);
}

static fg_status config_entry(const fg_host *host, size_t index, const char **section,
                              const char **key, const char **value)
{
    const char *const *c = as_fake(host)->config;
    for (size_t i = 0; c && c[3 * i] != NULL; i++) {
        if (i != index)
            continue;
        *section = c[3 * i];
        *key = c[3 * i + 1];
        *value = c[3 * i + 2];
        return FG_OK;
    }
    return FG_NOT_FOUND;
}

void fg_fake_host_init(fg_fake_host *fh, const fg_plugin *plugin, const char *section)
{
    memset(fh, 0, sizeof *fh);
    fh->plugin = plugin;
    if (section)
        snprintf(fh->section, sizeof fh->section, "%s", section);
    else if (plugin && plugin->kind == FG_KIND_CALLBACK)
        snprintf(fh->section, sizeof fh->section, "callback.%s", plugin->name);
    else if (plugin && plugin->kind >= FG_KIND_FIRST && plugin->kind <= FG_KIND_LAST)
        snprintf(fh->section, sizeof fh->section, "%s", kind_names[plugin->kind]);
    fh->host.struct_size = sizeof fh->host;
    fh->host.abi_major = FG_ABI_MAJOR;
    fh->host.abi_minor = FG_ABI_MINOR;
    fh->host.section = fh->section;
    fh->host.log = host_log;
    fh->host.get_bool = get_bool;
    fh->host.get_int = get_int;
    fh->host.get_float = get_float;
    fh->host.get_string = get_string;
    fh->host.aligned_alloc = host_aligned_alloc;
    fh->host.aligned_free = host_aligned_free;
    fh->host.metric = metric;
    fh->host.find_plugin = find_plugin;
    fh->host.config_entry = config_entry;
}

void fg_fake_host_set(fg_fake_host *fh, const char *key, const char *value)
{
    int i = 0;
    while (i < fh->option_count && strcmp(fh->keys[i], key) != 0)
        i++;
    if (i == FG_FAKE_HOST_MAX_OPTIONS) {
        fprintf(stderr, "fake host: more than %d options\n", FG_FAKE_HOST_MAX_OPTIONS);
        exit(2);
    }
    if (i == fh->option_count)
        fh->option_count++;
    snprintf(fh->keys[i], sizeof fh->keys[i], "%s", key);
    snprintf(fh->values[i], sizeof fh->values[i], "%s", value);
}

/* text[0, n) without the blanks around it, into out. */
static void trimmed(const char *text, size_t n, char *out, size_t cap)
{
    while (n > 0 && isspace((unsigned char)*text))
        text++, n--;
    while (n > 0 && isspace((unsigned char)text[n - 1]))
        n--;
    snprintf(out, cap, "%.*s", (int)n, text);
}

void fg_fake_host_set_text(fg_fake_host *fh, const char *text)
{
    while (*text) {
        size_t line = strcspn(text, "\n");
        const char *eq = memchr(text, '=', line);
        char key[64], value[512];
        trimmed(text, eq ? (size_t)(eq - text) : line, key, sizeof key);
        if (eq) {
            trimmed(eq + 1, line - (size_t)(eq - text) - 1, value, sizeof value);
            fg_fake_host_set(fh, key, value);
        } else if (key[0]) {
            fprintf(stderr, "fake host: option line '%s' has no '='\n", key);
            exit(2);
        }
        text += line + (text[line] == '\n');
    }
}

void fg_fake_host_echo(fg_fake_host *fh, FILE *out, int max_level)
{
    fh->echo = out;
    fh->echo_level = max_level;
}

void fg_fake_host_add_plugin(fg_fake_host *fh, uint32_t kind, const void *vtable, void *state)
{
    if (fh->plugin_count == FG_FAKE_HOST_MAX_PLUGINS) {
        fprintf(stderr, "fake host: more than %d plugins\n", FG_FAKE_HOST_MAX_PLUGINS);
        exit(2);
    }
    fh->plugins[fh->plugin_count].kind = kind;
    fh->plugins[fh->plugin_count].vtable = vtable;
    fh->plugins[fh->plugin_count].state = state;
    fh->plugin_count++;
}
