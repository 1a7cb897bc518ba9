/* Reading one run folder for `fulgur runs` (runs.h): status.json, config.ini, and the
 * metrics from report.html's data block or, without one, metrics.csv. What cannot be read
 * is a note on the run, never an error: a run killed mid-write is still listed. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "run_status.h"
#include "runs.h"

#define DATA_OPEN "<script type=\"application/json\" id=\"fulgur-report-data\">"
#define MAX_FILE_BYTES (512L << 20)

static void note(fg_run_info *run, const char *fmt, ...) FG_PRINTF(2, 3);
static void note(fg_run_info *run, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_array_append_new(run->notes, json_string_nocheck(buf));
}

/* path opened for reading if it is a regular file: O_NONBLOCK, so that a FIFO in a run
 * folder is seen and refused, not waited on forever; NULL with errno (EINVAL: not a
 * regular file). */
static FILE *open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        errno = S_ISREG(st.st_mode) ? e : EINVAL;
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) close(fd);
    return f;
}

/* What errno from read_file means, for a note. */
static const char *read_error(int e)
{
    return e == EINVAL ? "not a regular file (a FIFO, device or folder): not read" : strerror(e);
}

/* The whole file, NUL-terminated (malloc'ed); NULL with errno when it cannot be read. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = open_regular(path);
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            if (cap > (size_t)MAX_FILE_BYTES) {
                errno = EFBIG;
                break;
            }
            cap = cap ? cap * 2 : 65536 * 2;
            char *p = realloc(buf, cap);
            if (!p) break;
            buf = p;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) break;
            fclose(f);
            buf[n] = '\0';
            *len = n;
            return buf;
        }
    }
    int e = errno;
    fclose(f);
    free(buf);
    errno = e ? e : EIO;
    return NULL;
}

static const char *json_str(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static double json_num(const json_t *obj, const char *key, double fallback)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : fallback;
}

/* ---- metrics.csv ---------------------------------------------------------------------- */

/* One CSV field (RFC 4180 quotes) from *p up to ',' or the end of the line; the value is
 * written to out (unquoted). Returns 0, or -1 for an unterminated quote. */
static int csv_field(const char **p, const char *end, char *out, size_t cap)
{
    const char *s = *p;
    size_t n = 0;
    if (s < end && *s == '"') {
        for (s++;; s++) {
            if (s >= end) return -1;
            if (*s == '"') {
                if (s + 1 < end && s[1] == '"') s++;
                else { s++; break; }
            }
            if (n + 1 < cap) out[n++] = *s;
        }
    } else {
        for (; s < end && *s != ','; s++)
            if (n + 1 < cap) out[n++] = *s;
    }
    out[n] = '\0';
    *p = s;
    return 0;
}

/* A cell as the report holds it: a number, null (empty) or "nan"/"inf"/"-inf". NULL when
 * the text is none of them. */
static json_t *csv_value(const char *text)
{
    if (!text[0]) return json_null();
    if (strcmp(text, "nan") == 0 || strcmp(text, "inf") == 0 || strcmp(text, "-inf") == 0)
        return json_string(text);
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*end || end == text || !isfinite(v)) return NULL;
    return json_real(v);
}

/* The fields of one line; -1 when it cannot be split. */
static int csv_split(const char *line, const char *end, json_t *fields)
{
    char buf[512];
    const char *p = line;
    for (;;) {
        if (csv_field(&p, end, buf, sizeof buf) != 0) return -1;
        json_array_append_new(fields, json_string_nocheck(buf));
        if (p >= end) return 0;
        if (*p != ',') return -1;
        p++;
    }
}

/* A data row, or NULL when a field is not what its column holds. */
static json_t *csv_row(const char *line, const char *end, size_t columns)
{
    json_t *fields = json_array(), *row = json_array();
    int ok = fields && row && csv_split(line, end, fields) == 0 && json_array_size(fields) == columns;
    for (size_t i = 0; ok && i < columns; i++) {
        const char *text = json_string_value(json_array_get(fields, i));
        json_t *v;
        if (i < 2) {
            char *e;
            long long n = strtoll(text, &e, 10);
            v = *e || e == text ? NULL : json_integer(n);
        } else {
            v = csv_value(text);
        }
        ok = v != NULL;
        if (ok) json_array_append_new(row, v);
    }
    json_decref(fields);
    if (!ok) json_decref(row);
    return ok ? row : NULL;
}

void fg_run_parse_metrics_csv(const char *text, size_t len, fg_run_info *run)
{
    const char *p = text, *end = text + len;
    const char *nl = memchr(p, '\n', len);
    json_t *header = json_array();
    if (!nl || csv_split(p, nl > p && nl[-1] == '\r' ? nl - 1 : nl, header) != 0 ||
        json_array_size(header) < 2 ||
        strcmp(json_string_value(json_array_get(header, 0)), "epoch") != 0 ||
        strcmp(json_string_value(json_array_get(header, 1)), "step") != 0) {
        note(run, "metrics.csv: no \"epoch,step,...\" header line; no metrics read");
        json_decref(header);
        return;
    }
    json_t *rows = json_array();
    size_t bad = 0, cut = 0, line_no = 1, first_bad = 0;
    for (p = nl + 1; p < end; p = nl + 1) {
        line_no++;
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) { /* the writer was stopped inside this line */
            cut = line_no;
            break;
        }
        const char *e = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        if (e == p) continue;
        json_t *row = csv_row(p, e, json_array_size(header));
        if (row) {
            json_array_append_new(rows, row);
        } else if (!bad++) {
            first_bad = line_no;
        }
    }
    if (cut) note(run, "metrics.csv: line %zu is cut short (a run killed while writing?); ignored", cut);
    if (bad) note(run, "metrics.csv: %zu malformed row(s) skipped, the first at line %zu", bad, first_bad);
    json_decref(run->columns);
    json_decref(run->rows);
    run->columns = header;
    run->rows = rows;
    snprintf(run->source, sizeof run->source, "metrics.csv");
}

/* ---- report.html ---------------------------------------------------------------------- */

/* Keeps the rows whose shape matches the columns: [int, int, number|null|string...]. */
static json_t *checked_rows(const json_t *rows, size_t columns, size_t *bad)
{
    json_t *out = json_array();
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row) {
        int ok = json_is_array(row) && json_array_size(row) == columns &&
                 json_is_integer(json_array_get(row, 0)) && json_is_integer(json_array_get(row, 1));
        for (size_t j = 2; ok && j < columns; j++) {
            const json_t *v = json_array_get(row, j);
            ok = json_is_number(v) || json_is_null(v) || json_is_string(v);
        }
        if (ok) json_array_append(out, (json_t *)row);
        else (*bad)++;
    }
    return out;
}

int fg_run_parse_report_html(const char *text, size_t len, fg_run_info *run)
{
    const char *open = strstr(text, DATA_OPEN);
    const char *start = open ? open + strlen(DATA_OPEN) : NULL;
    const char *close = start ? strstr(start, "</script>") : NULL;
    if (!open || !close || (size_t)(close - text) > len) {
        note(run, "report.html: no complete data block (a file cut short?)");
        return 0;
    }
    json_error_t je;
    json_t *doc = json_loadb(start, (size_t)(close - start), 0, &je);
    json_t *first = json_array_get(json_object_get(doc, "runs"), 0);
    json_t *cols = json_object_get(first, "columns"), *rows = json_object_get(first, "rows");
    if (!doc || !json_is_array(cols) || !json_is_array(rows) || json_array_size(cols) < 2) {
        if (!doc) note(run, "report.html: the data block cannot be parsed (line %d: %s)", je.line, je.text);
        else note(run, "report.html: the data block has no columns and rows");
        json_decref(doc);
        return 0;
    }
    size_t bad = 0;
    json_decref(run->columns);
    json_decref(run->rows);
    run->columns = json_incref(cols);
    run->rows = checked_rows(rows, json_array_size(cols), &bad);
    if (bad) note(run, "report.html: %zu malformed row(s) skipped", bad);
    json_t *config = json_object_get(first, "config");
    if (json_is_array(config) && json_array_size(run->config) == 0) {
        json_decref(run->config);
        run->config = json_incref(config);
    }
    json_decref(doc);
    snprintf(run->source, sizeof run->source, "report.html");
    return 1;
}

/* ---- the folder ----------------------------------------------------------------------- */

static void read_config(fg_run_info *run, const char *path)
{
    fg_config *cfg = NULL;
    fg_error e = {0};
    struct stat st;
    if (stat(path, &st) != 0) return;
    if (fg_config_load(path, &cfg, &e) != FG_OK) {
        note(run, "config.ini: %s", e.message);
        return;
    }
    for (size_t i = 0; i < fg_config_section_count(cfg); i++) {
        const char *s = fg_config_section_name(cfg, i);
        for (size_t j = 0; j < fg_config_entry_count(cfg, s); j++) {
            const char *k = fg_config_entry_key(cfg, s, j);
            json_array_append_new(run->config, json_pack("[s,s,s]", s, k, fg_config_get(cfg, s, k)));
        }
    }
    /* the metric a run is ranked by, as its callbacks rank it */
    static const char *const rankers[] = {"callback.checkpoint", "callback.early_stopping"};
    for (size_t i = 0; i < 2 && !run->monitor[0]; i++) {
        const char *m = fg_config_get(cfg, rankers[i], "monitor");
        if (i == 1 && !m && fg_config_has_section(cfg, rankers[i])) m = "val/loss"; /* its default */
        if (!m || !m[0]) continue;
        const char *mode = fg_config_get(cfg, rankers[i], "mode");
        snprintf(run->monitor, sizeof run->monitor, "%s", m);
        run->monitor_max = mode && strcmp(mode, "max") == 0;
    }
    fg_config_destroy(cfg);
}

static double mtime_of(const char *dir, const char *file)
{
    char path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return stat(path, &st) == 0 ? (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec : -1;
}

static void read_status(fg_run_info *run)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/status.json", run->dir);
    json_error_t je;
    size_t len = 0;
    char *text = read_file(path, &len);
    int e = errno, was_read = text != NULL;
    run->status = text ? json_loadb(text, len, 0, &je) : NULL;
    free(text);
    snprintf(run->state, sizeof run->state, "unknown");
    if (!run->status) {
        if (was_read) note(run, "status.json cannot be read (line %d: %s)", je.line, je.text);
        else if (e != ENOENT) note(run, "status.json: %s", read_error(e));
        else note(run, "no status.json (a run from an older fulgur, or one that did not start)");
        return;
    }
    if (!json_is_object(run->status)) {
        note(run, "status.json is not a JSON object");
        json_decref(run->status);
        run->status = NULL;
        return;
    }
    const char *s = json_str(run->status, "status");
    if (s && (!strcmp(s, "finished") || !strcmp(s, "failed") || !strcmp(s, "interrupted") ||
              !strcmp(s, "running")))
        snprintf(run->state, sizeof run->state, "%s", s);
    else
        note(run, "status.json: status \"%s\" is not one fulgur writes", s ? s : "(none)");
    const char *msg = json_str(run->status, "message");
    if (msg && strcmp(run->state, "running") != 0) note(run, "%s", msg);
}

/* A run marked running whose process is gone was killed (or crashed). */
static void check_running(fg_run_info *run)
{
    if (strcmp(run->state, "running") != 0) return;
    const char *host = json_str(run->status, "host"), *boot = json_str(run->status, "boot_id");
    int64_t pid = (int64_t)json_num(run->status, "pid", 0);
    int alive = fg_run_status_process_alive(host, pid, (int64_t)json_num(run->status, "pid_start_ticks", 0), boot);
    if (alive == 0) {
        snprintf(run->state, sizeof run->state, "interrupted");
        note(run, "process %lld is gone without recording an end (killed, or it crashed)", (long long)pid);
    } else if (alive < 0) {
        note(run, "running on %s: cannot check from here", host ? host : "another host");
    }
}

static void summarise(fg_run_info *run)
{
    double start = json_num(run->status, "start_unix", -1);
    run->wall_s = json_num(run->status, "wall_s", -1);
    if (run->wall_s < 0 && start > 0) {
        double last = time(NULL);
        if (strcmp(run->state, "running") != 0) { /* the last sign of life */
            static const char *const files[] = {"status.json", "report.html", "metrics.csv"};
            last = -1;
            for (size_t i = 0; i < 3; i++) {
                double m = mtime_of(run->dir, files[i]);
                if (m > last) last = m;
            }
        }
        if (last >= start) run->wall_s = last - start;
    }
    size_t i, mcol = 0;
    const json_t *row, *name;
    if (!run->monitor[0]) { /* no callback ranks: val/loss, else the training loss */
        json_array_foreach(run->columns, i, name)
            if (json_is_string(name) && strcmp(json_string_value(name), "val/loss") == 0)
                snprintf(run->monitor, sizeof run->monitor, "val/loss");
        if (!run->monitor[0]) snprintf(run->monitor, sizeof run->monitor, "train/loss");
    }
    json_array_foreach(run->columns, i, name)
        if (json_is_string(name) && strcmp(json_string_value(name), run->monitor) == 0) mcol = i;
    int64_t last = -1;
    json_array_foreach(run->rows, i, row) {
        int64_t step = json_integer_value(json_array_get(row, 1));
        if (step > last) last = step;
        const json_t *v = mcol >= 2 ? json_array_get(row, mcol) : NULL;
        if (!json_is_number(v)) continue;
        double x = json_number_value(v);
        if (!run->has_best || (run->monitor_max ? x > run->best : x < run->best)) {
            run->has_best = 1;
            run->best = x;
            run->best_step = step;
        }
    }
    /* an ended run knows its steps; a running or killed one has logged this far */
    const json_t *gs = json_object_get(run->status, "global_step");
    run->steps = json_is_integer(gs) && strcmp(run->state, "running") != 0 ? json_integer_value(gs) : last;
}

static void read_metrics(fg_run_info *run)
{
    char path[4200];
    size_t len;
    snprintf(path, sizeof path, "%s/report.html", run->dir);
    char *text = read_file(path, &len);
    if (!text && errno != ENOENT) note(run, "report.html: %s", read_error(errno));
    int have = text && fg_run_parse_report_html(text, len, run);
    free(text);
    if (have) return;
    snprintf(path, sizeof path, "%s/metrics.csv", run->dir);
    text = read_file(path, &len);
    if (text) fg_run_parse_metrics_csv(text, len, run);
    else if (errno != ENOENT) note(run, "metrics.csv: %s", read_error(errno));
    free(text);
}

fg_status fg_run_read(const char *dir, fg_run_info *run, fg_error *err)
{
    memset(run, 0, sizeof *run);
    snprintf(run->dir, sizeof run->dir, "%s", dir);
    run->notes = json_array();
    run->config = json_array();
    run->columns = json_pack("[s,s]", "epoch", "step");
    run->rows = json_array();
    if (!run->notes || !run->config || !run->columns || !run->rows) {
        fg_run_free(run);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", dir);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/config.ini", dir);
    read_config(run, path);
    read_status(run);
    check_running(run);
    read_metrics(run);
    if (!run->source[0] && json_array_size(run->rows) == 0) note(run, "no metrics written yet");
    summarise(run);
    return FG_OK;
}

void fg_run_free(fg_run_info *run)
{
    json_decref(run->notes);
    json_decref(run->status);
    json_decref(run->config);
    json_decref(run->columns);
    json_decref(run->rows);
    memset(run, 0, sizeof *run);
}
