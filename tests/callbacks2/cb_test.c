/* Test harness for the callback plugins; see cb_test.h. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "cb_test.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cb_failures;

const fg_plugin *cb_load(const char *path, const char *name)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "cannot dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    const fg_plugin *p = dlsym(lib, FG_PLUGIN_ENTRY_NAME);
    if (p == NULL || p->magic != FG_PLUGIN_MAGIC || p->abi_major != FG_ABI_MAJOR ||
        p->kind != FG_KIND_CALLBACK || strcmp(p->name, name) != 0 || p->init == NULL ||
        p->vtable == NULL || p->option_size != sizeof(fg_option)) {
        fprintf(stderr, "%s: not a callback plugin named %s\n", path, name);
        exit(1);
    }
    return p; /* never dlclose'd, as the host never unloads a plugin */
}

static void fake_log(const fg_host *host, int level, const char *fmt, ...)
{
    cb_host *h = (cb_host *)host;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->last_log, sizeof h->last_log, fmt, ap);
    va_end(ap);
    h->log_count++;
    (void)level;
}

/* The option's value as the host would serve it: set by the test, else the schema's
 * default; NULL for a key the schema does not declare (FG_NOT_FOUND, as the real host). */
static const char *option_value(const cb_host *h, const char *key, uint32_t type)
{
    const fg_option *o = NULL;
    for (uint32_t i = 0; i < h->plugin->option_count; i++)
        if (strcmp(h->plugin->options[i].key, key) == 0)
            o = &h->plugin->options[i];
    if (o == NULL || o->type != type)
        return NULL;
    for (int i = 0; i < h->option_count; i++)
        if (strcmp(h->keys[i], key) == 0)
            return h->values[i];
    return o->default_value;
}

static fg_status get_bool(const fg_host *host, const char *key, int *out)
{
    const char *v = option_value((const cb_host *)host, key, FG_OPT_BOOL);
    if (v == NULL)
        return FG_NOT_FOUND;
    *out = strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0 ||
           strcmp(v, "on") == 0;
    return FG_OK;
}

static fg_status get_int(const fg_host *host, const char *key, int64_t *out)
{
    const char *v = option_value((const cb_host *)host, key, FG_OPT_INT);
    if (v == NULL)
        return FG_NOT_FOUND;
    *out = strtoll(v, NULL, 10);
    return FG_OK;
}

static fg_status get_float(const fg_host *host, const char *key, double *out)
{
    const char *v = option_value((const cb_host *)host, key, FG_OPT_FLOAT);
    if (v == NULL)
        return FG_NOT_FOUND;
    *out = strtod(v, NULL);
    return FG_OK;
}

static fg_status get_string(const fg_host *host, const char *key, const char **out)
{
    const char *v = option_value((const cb_host *)host, key, FG_OPT_STRING);
    if (v == NULL)
        return FG_NOT_FOUND;
    *out = v;
    return FG_OK;
}

/* The resolved config: the triples set by cb_host_config, or a small default one. */
static const char *const default_config[] = {
    "trainer", "max_epochs", "3",
    "trainer", "seed", "1",
    "data", "name", "idx",
    "optimizer", "lr", "0.02",
    NULL};

static fg_status config_entry(const fg_host *host, size_t index, const char **section,
                              const char **key, const char **value)
{
    const cb_host *h = (const cb_host *)host;
    const char *const *c = h->config ? h->config : default_config;
    for (size_t i = 0; c[3 * i] != NULL; i++) {
        if (i != index) continue;
        *section = c[3 * i];
        *key = c[3 * i + 1];
        *value = c[3 * i + 2];
        return FG_OK;
    }
    return FG_NOT_FOUND;
}

void cb_host_config(cb_host *h, const char *const *triples)
{
    h->config = triples;
}

void cb_host_init(cb_host *h, const fg_plugin *plugin)
{
    memset(h, 0, sizeof *h);
    snprintf(h->section, sizeof h->section, "callback.%s", plugin->name);
    h->plugin = plugin;
    h->host.struct_size = sizeof(fg_host);
    h->host.abi_major = FG_ABI_MAJOR;
    h->host.abi_minor = FG_ABI_MINOR;
    h->host.section = h->section;
    h->host.log = fake_log;
    h->host.get_bool = get_bool;
    h->host.get_int = get_int;
    h->host.get_float = get_float;
    h->host.get_string = get_string;
    h->host.config_entry = config_entry;
}

void cb_host_set(cb_host *h, const char *key, const char *value)
{
    if (h->option_count == CB_MAX_OPTIONS) {
        fprintf(stderr, "cb_host_set: too many options\n");
        exit(1);
    }
    h->keys[h->option_count] = key;
    h->values[h->option_count++] = value;
}

fg_event cb_event(uint32_t type, int64_t epoch, int64_t global_step, const char *run_dir)
{
    fg_event e;
    memset(&e, 0, sizeof e);
    e.struct_size = sizeof e;
    e.type = type;
    e.epoch = epoch;
    e.global_step = global_step;
    e.steps_per_epoch = 10;
    e.step_in_epoch = global_step - epoch * 10;
    e.learning_rate = 0.01;
    e.is_rank_zero = 1;
    e.run_dir = run_dir;
    return e;
}

void cb_event_metrics(fg_event *e, const fg_metric *metrics, uint32_t count)
{
    e->metrics = metrics;
    e->metric_count = count;
}

fg_status cb_send(const fg_plugin *p, void *state, const fg_event *e, fg_error *err)
{
    const fg_callback_vtable *vt = p->vtable;
    fg_callback_action action;
    memset(&action, 0, sizeof action);
    action.struct_size = sizeof action;
    fg_status st = vt->on_event(state, e, &action, err);
    CHECK(!action.stop && !action.save_checkpoint, "%s must not steer training", p->name);
    return st;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void cb_scratch(char *out, size_t cap, const char *base, const char *name)
{
    snprintf(out, cap, "%s/%s", base, name);
    nftw(out, remove_entry, 16, FTW_DEPTH | FTW_PHYS); /* a previous run's leftovers */
    /* mkdir -p base: cases run in parallel, so a parent may appear between the calls */
    for (char *slash = strchr(out + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(out, 0777);
        *slash = '/';
    }
    if (mkdir(out, 0777) != 0) {
        fprintf(stderr, "cannot create %s: %s\n", out, strerror(errno));
        exit(1);
    }
}

char *cb_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL)
        buf[len] = '\0';
    return buf;
}

int cb_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int saved_stdout = -1;
static char capture_path[4096];

void cb_capture_begin(const char *path)
{
    fflush(stdout);
    snprintf(capture_path, sizeof capture_path, "%s", path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    saved_stdout = dup(STDOUT_FILENO);
    if (fd < 0 || saved_stdout < 0 || dup2(fd, STDOUT_FILENO) < 0) {
        fprintf(stderr, "cannot redirect stdout to %s: %s\n", path, strerror(errno));
        exit(1);
    }
    close(fd);
}

char *cb_capture_end(void)
{
    fflush(stdout);
    dup2(saved_stdout, STDOUT_FILENO);
    close(saved_stdout);
    saved_stdout = -1;
    char *text = cb_read_file(capture_path);
    if (text == NULL) {
        fprintf(stderr, "cannot read back %s\n", capture_path);
        exit(1);
    }
    return text;
}

int cb_main(int argc, char **argv, const cb_case *cases, size_t count)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s CASE SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < count; i++) {
        if (strcmp(cases[i].name, argv[1]) != 0)
            continue;
        cases[i].run(argv[2]);
        if (cb_failures > 0) {
            fprintf(stderr, "%s: %d check(s) failed\n", argv[1], cb_failures);
            return 1;
        }
        fprintf(stderr, "%s: ok\n", argv[1]);
        return 0;
    }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
