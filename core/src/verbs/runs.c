/* `fulgur runs DIR [RUN...] [--report OUT]`: every run folder under DIR (a root of
 * families DIR/NAME/version_N, one family, or one run), a line each: name, version, status,
 * steps, the best value of the metric its callbacks rank by, wall time and notes; and the
 * chosen runs' curves overlaid on one page (runs_report.c). */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runs.h"

#include "core_util.h"

#define MAX_RUNS 4096
#define MAX_DEPTH 3
/* rows of each kind a run gives the --report page: plenty for a chart's width */
#define REPORT_ROWS 2000

typedef struct run_list {
    char **dirs;
    int count, cap;
} run_list;

static int has_file(const char *dir, const char *name)
{
    char path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A run folder holds what the trainer writes first: config.ini and status.json. */
static int is_run(const char *dir)
{
    return has_file(dir, "status.json") || has_file(dir, "config.ini");
}

static fg_status push(run_list *l, const char *dir, fg_error *err)
{
    if (l->count == MAX_RUNS)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: more than %d runs; name a family", dir, MAX_RUNS);
    if (l->count == l->cap) {
        int cap = l->cap ? l->cap * 2 : 32;
        char **p = realloc(l->dirs, (size_t)cap * sizeof *p);
        if (!p) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
        l->dirs = p;
        l->cap = cap;
    }
    if (!(l->dirs[l->count] = strdup(dir))) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    l->count++;
    return FG_OK;
}

static fg_status find_runs(const char *dir, int depth, run_list *l, fg_error *err)
{
    if (is_run(dir)) return push(l, dir, err);
    if (depth >= MAX_DEPTH) return FG_OK;
    DIR *d = opendir(dir);
    if (!d) { /* below the root (the root was checked): say so, list the rest */
        fprintf(stderr, "fulgur runs: %s: cannot read the folder (%s); runs in it are left "
                "out\n", dir, strerror(errno));
        return FG_OK;
    }
    fg_status st = FG_OK;
    for (struct dirent *e; st == FG_OK && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char child[4096];
        if (snprintf(child, sizeof child, "%s/%s", dir, e->d_name) >= (int)sizeof child) continue;
        if (fg_is_directory(child)) st = find_runs(child, depth + 1, l, err);
    }
    closedir(d);
    return st;
}

/* src into dst (cap bytes) with each control character written \xNN: a folder name or a
 * note read from disk never reaches the terminal as an escape sequence or a line break. */
static void escape_controls(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    for (; *src && n + 1 < cap; src++) {
        unsigned char c = (unsigned char)*src;
        if (c >= 0x20 && c != 0x7f) {
            dst[n++] = (char)c;
        } else if (n + 5 <= cap) {
            snprintf(dst + n, cap - n, "\\x%02x", c);
            n += 4;
        } else {
            break;
        }
    }
    dst[n] = '\0';
}

/* NAME/version_N from the folder's last two parts. */
static void name_run(fg_run_info *r)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", r->dir);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
    char *slash = strrchr(buf, '/');
    escape_controls(r->version, sizeof r->version, slash ? slash + 1 : buf);
    if (slash) {
        *slash = '\0';
        char *up = strrchr(buf, '/');
        escape_controls(r->name, sizeof r->name, up ? up + 1 : buf);
    } else {
        snprintf(r->name, sizeof r->name, ".");
    }
}

/* By name, then by version number (version_10 after version_9). */
static int compare_runs(const void *a, const void *b)
{
    const fg_run_info *x = *(fg_run_info *const *)a, *y = *(fg_run_info *const *)b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    const char *px = strrchr(x->version, '_'), *py = strrchr(y->version, '_');
    if (px && py && strncmp(x->version, y->version, (size_t)(px - x->version)) == 0) {
        long vx = strtol(px + 1, NULL, 10), vy = strtol(py + 1, NULL, 10);
        if (vx != vy) return vx < vy ? -1 : 1;
    }
    return strcmp(x->version, y->version);
}

static int chosen(const fg_run_info *r, const fg_runs_options *o)
{
    if (o->pattern_count == 0) return 1;
    char full[600];
    snprintf(full, sizeof full, "%s/%s", r->name, r->version);
    for (int i = 0; i < o->pattern_count; i++)
        if (fnmatch(o->patterns[i], full, 0) == 0 || fnmatch(o->patterns[i], r->name, 0) == 0)
            return 1;
    return 0;
}

static void format_wall(char *buf, size_t cap, double s)
{
    if (s < 0) {
        snprintf(buf, cap, "-");
        return;
    }
    long long t = (long long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%lld:%02lld", t / 60, t % 60);
}

static void format_best(char *buf, size_t cap, const fg_run_info *r)
{
    char monitor[200]; /* the monitor escaped, as much as a column shows */
    escape_controls(monitor, sizeof monitor, r->monitor);
    if (r->has_best) snprintf(buf, cap, "%s %.4g", monitor, r->best);
    else snprintf(buf, cap, "-");
}

static void print_notes(FILE *out, const json_t *notes)
{
    size_t k;
    const json_t *note;
    char text[1024];
    json_array_foreach(notes, k, note) {
        const char *v = json_string_value(note);
        escape_controls(text, sizeof text, v ? v : "");
        fprintf(out, "%s%s", k ? "; " : "", text);
    }
}

static void print_runs(FILE *out, fg_run_info *const *runs, int count)
{
    int wn = 4, wv = 7, wb = 4;
    char best[256];
    for (int i = 0; i < count; i++) {
        format_best(best, sizeof best, runs[i]);
        if ((int)strlen(runs[i]->name) > wn) wn = (int)strlen(runs[i]->name);
        if ((int)strlen(runs[i]->version) > wv) wv = (int)strlen(runs[i]->version);
        if ((int)strlen(best) > wb) wb = (int)strlen(best);
    }
    fprintf(out, "%-*s  %-*s  %-11s  %8s  %-*s  %9s  %s\n", wn, "NAME", wv, "VERSION", "STATUS",
            "STEPS", wb, "BEST", "WALL TIME", "NOTES");
    for (int i = 0; i < count; i++) {
        const fg_run_info *r = runs[i];
        char steps[32], wall[32];
        format_best(best, sizeof best, r);
        format_wall(wall, sizeof wall, r->wall_s);
        if (r->steps >= 0) snprintf(steps, sizeof steps, "%lld", (long long)r->steps);
        else snprintf(steps, sizeof steps, "-");
        fprintf(out, "%-*s  %-*s  %-11s  %8s  %-*s  %9s  ", wn, r->name, wv, r->version, r->state,
                steps, wb, best, wall);
        print_notes(out, r->notes);
        fputc('\n', out);
    }
}

static fg_status read_runs(const run_list *l, const fg_runs_options *o, fg_run_info ***out,
                           int *count, fg_error *err)
{
    fg_run_info **runs = calloc((size_t)(l->count ? l->count : 1), sizeof *runs);
    if (!runs) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    int n = 0;
    fg_status st = FG_OK;
    for (int i = 0; st == FG_OK && i < l->count; i++) {
        fg_run_info *r = malloc(sizeof *r);
        if (!r) {
            st = fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
            break;
        }
        st = fg_run_read(l->dirs[i], r, o->report_path ? REPORT_ROWS : 0, err);
        if (st != FG_OK) {
            free(r);
            break;
        }
        name_run(r);
        if (!chosen(r, o)) {
            fg_run_free(r);
            free(r);
            continue;
        }
        runs[n++] = r;
    }
    qsort(runs, (size_t)n, sizeof *runs, compare_runs);
    *out = runs;
    *count = n;
    return st;
}

fg_status fg_runtime_runs(fg_runtime *rt, const fg_runs_options *o, FILE *out, fg_error *err)
{
    if (!out) out = stdout;
    if (!FG_HAS_FIELD(o, fg_runs_options, report_path) || !o->root || !o->root[0])
        return fg_error_set(err, FG_INVALID_ARGUMENT, "runs: give the folder the runs are in");
    if (!fg_is_directory(o->root))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "runs: %s: %s", o->root,
                            errno == ENOENT ? "no such folder" : "not a folder");
    run_list l = {NULL, 0, 0};
    fg_run_info **runs = NULL;
    int count = 0;
    fg_status st = find_runs(o->root, 0, &l, err);
    if (st == FG_OK) st = read_runs(&l, o, &runs, &count, err);
    if (st == FG_OK && count == 0)
        fprintf(out, "no runs under %s%s\n", o->root, o->pattern_count ? " match the names given" : "");
    else if (st == FG_OK)
        print_runs(out, runs, count);
    if (st == FG_OK && o->report_path && count == 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "runs --report: no runs to compare under %s", o->root);
    if (st == FG_OK && o->report_path) {
        char title[4200];
        snprintf(title, sizeof title, "fulgur runs: %s", o->root);
        st = fg_runs_write_report(rt, runs, count, title, o->report_path, err);
        if (st == FG_OK) fprintf(out, "report: %s (%d run%s)\n", o->report_path, count, count == 1 ? "" : "s");
    }
    for (int i = 0; i < count; i++) {
        fg_run_free(runs[i]);
        free(runs[i]);
    }
    free(runs);
    for (int i = 0; i < l.count; i++) free(l.dirs[i]);
    free(l.dirs);
    return st;
}
