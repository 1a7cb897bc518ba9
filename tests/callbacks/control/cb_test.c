/* The plugin loader, the event sender and file helpers of the callback plugin tests. */
#define _POSIX_C_SOURCE 200809L
#include "cb_test.h"
#include "plugin_load.h"
#include "test_event.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

const fg_plugin *load_callback_plugin(const char *path, const char *name)
{
    const fg_plugin *p = fg_test_need_plugin(path, FG_KIND_CALLBACK, name);
    const fg_callback_vtable *vt = p->vtable;
    if (vt->struct_size < sizeof *vt || !vt->on_event) {
        fprintf(stderr, "%s: callback vtable without on_event\n", path);
        exit(1);
    }
    return p;
}

void cb_prepare(cb_instance *in, const fg_plugin *plugin)
{
    memset(in, 0, sizeof *in);
    fg_fake_host_init(&in->fh, plugin, "callback.test");
    in->plugin = plugin;
    in->vt = plugin->vtable;
    in->is_rank_zero = 1;
    in->learning_rate = 0.1;
    in->steps_per_epoch = 10;
    snprintf(in->run_dir, sizeof in->run_dir, ".");
}

void cb_set(cb_instance *in, const char *key, const char *value)
{
    fg_fake_host_set(&in->fh, key, value);
}

fg_status cb_init(cb_instance *in, fg_error *err)
{
    memset(err, 0, sizeof *err);
    in->state = NULL;
    return in->plugin->init(&in->fh.host, &in->state, err);
}

void cb_deinit(cb_instance *in)
{
    if (in->state && in->plugin->deinit)
        in->plugin->deinit(in->state);
    in->state = NULL;
}

fg_status cb_send(cb_instance *in, uint32_t type, int64_t epoch, int64_t global_step,
                  const fg_metric *metrics, uint32_t metric_count, fg_callback_action *action,
                  fg_error *err)
{
    fg_event ev = fg_test_event(type, epoch, global_step, in->steps_per_epoch,
                                in->learning_rate, in->run_dir);
    ev.metrics = metrics;
    ev.metric_count = metric_count;
    ev.is_rank_zero = in->is_rank_zero;
    ev.nonfinite_layer = in->nonfinite_layer;
    memset(action, 0, sizeof *action);
    action->struct_size = sizeof *action;
    memset(err, 0, sizeof *err);
    return in->vt->on_event(in->state, &ev, action, err);
}

/* ---- files --------------------------------------------------------------------------- */

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char child[2048];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            remove_tree(child);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* mkdir -p */
static void make_dirs(const char *path)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
    }
    mkdir(buf, 0755);
}

void make_scratch_dir(const char *base, const char *name, char *out, size_t cap)
{
    make_dirs(base);
    snprintf(out, cap, "%s/%s", base, name);
    remove_tree(out);
    if (mkdir(out, 0755) != 0) {
        fprintf(stderr, "mkdir %s: %s\n", out, strerror(errno));
        exit(1);
    }
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void list_dir(const char *dir, char *out, size_t cap)
{
    out[0] = '\0';
    DIR *d = opendir(dir);
    if (!d)
        return;
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 256) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], compare_names);
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(out + used, used < cap ? cap - used : 0, "%s%s", i ? " " : "", names[i]);
        if (w > 0)
            used += (size_t)w;
        free(names[i]);
    }
}

void write_file(const char *dir, const char *rel, const char *text)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    char *slash = strrchr(path, '/');
    if (slash && slash > path + strlen(dir)) {
        *slash = '\0';
        mkdir(path, 0755);
        *slash = '/';
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        fg_test_failures++;
        return;
    }
    fputs(text, f);
    fclose(f);
}

void read_file(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
}

int run_case(const test_case *cases, size_t count, int argc, char **argv, const char *plugin_path)
{
    for (size_t i = 0; argc == 3 && i < count; i++) {
        if (strcmp(cases[i].name, argv[1]) == 0) {
            cases[i].fn(plugin_path, argv[2]);
            return fg_test_report(argv[1]);
        }
    }
    fprintf(stderr, "usage: %s CASE SCRATCH_DIR, CASE one of the test's table\n", argv[0]);
    return 2;
}
