/* Test harness for the callback plugins; see cb_test.h. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "cb_test.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The resolved config of a run, unless a test sets its own. */
static const char *const default_config[] = {
    "trainer", "max_epochs", "3",
    "trainer", "seed", "1",
    "data", "name", "idx",
    "optimizer", "lr", "0.02",
    NULL};

void cb_host_init(fg_fake_host *h, const fg_plugin *plugin)
{
    fg_fake_host_init(h, plugin, NULL);
    h->config = default_config;
}

fg_event cb_event(uint32_t type, int64_t epoch, int64_t global_step, const char *run_dir)
{
    return fg_test_event(type, epoch, global_step, 10, 0.01, run_dir);
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
