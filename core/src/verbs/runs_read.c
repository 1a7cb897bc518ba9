/* Reading one run folder for `fulgur runs` (runs.h): status.json, config.ini, and the
 * metrics from report.html's data (its row blocks, report_file.h) or, without it,
 * metrics.csv, streamed a row at a time into runs_rows.h. What cannot be read is a note on
 * the run, never an error: a run killed mid-write is still listed. */
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
#include "runs_rows.h"

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

/* A data row, or NULL when a field is not what its column holds or the line does not
 * have one field per column. */
static json_t *csv_row(const char *line, const char *end, size_t columns)
{
    json_t *row = json_array();
    char buf[512];
    const char *p = line;
    for (size_t i = 0; row; i++) {
        if (i == columns || csv_field(&p, end, buf, sizeof buf) != 0) break;
        json_t *v;
        if (i < 2) {
            char *e;
            long long n = strtoll(buf, &e, 10);
            v = *e || e == buf ? NULL : json_integer(n);
        } else {
            v = csv_value(buf);
        }
        if (!v || json_array_append_new(row, v) != 0) break;
        if (p >= end) return i + 1 == columns ? row : (json_decref(row), NULL);
        if (*p != ',') break;
        p++;
    }
    json_decref(row);
    return NULL;
}

/* One line of f into buf (cap bytes), without its "\n" or "\r\n". 1: a whole line; 0: the
 * end of the file; -1: a last line without "\n" (cut short); -2: a line longer than buf
 * (skipped to its end). */
static int next_line(FILE *f, char *buf, size_t cap, size_t *len)
{
    if (!fgets(buf, (int)cap, f)) return 0;
    size_t n = strlen(buf);
    if (n == 0 || buf[n - 1] != '\n') {
        if (feof(f)) return -1;
        int c;
        while ((c = getc(f)) != EOF && c != '\n') {}
        return -2;
    }
    buf[--n] = '\0';
    if (n && buf[n - 1] == '\r') buf[--n] = '\0';
    *len = n;
    return 1;
}

#define CSV_LINE_BYTES (1 << 20)

/* metrics.csv, a line at a time into the rows (runs_rows.h): memory bounded by a line and
 * what --report keeps, whatever the file's length. */
static void read_metrics_csv(FILE *f, fg_run_info *run, size_t keep)
{
    char *line = malloc(CSV_LINE_BYTES);
    json_t *header = json_array();
    size_t len = 0;
    if (!line || !header || next_line(f, line, CSV_LINE_BYTES, &len) != 1 ||
        csv_split(line, line + len, header) != 0 || json_array_size(header) < 2 ||
        strcmp(json_string_value(json_array_get(header, 0)), "epoch") != 0 ||
        strcmp(json_string_value(json_array_get(header, 1)), "step") != 0) {
        note(run, "metrics.csv: no \"epoch,step,...\" header line; no metrics read");
        json_decref(header);
        free(line);
        return;
    }
    json_decref(run->columns);
    run->columns = header;
    fg_run_rows rr;
    if (fg_run_rows_begin(&rr, run, keep) != 0) {
        free(line);
        return;
    }
    size_t bad = 0, cut = 0, line_no = 1, first_bad = 0;
    for (int got; (got = next_line(f, line, CSV_LINE_BYTES, &len)) != 0;) {
        line_no++;
        if (got == -1) { /* the writer was stopped inside this line */
            cut = line_no;
            break;
        }
        if (got == 1 && len == 0) continue;
        json_t *row = got == 1 ? csv_row(line, line + len, json_array_size(header)) : NULL;
        if (!row || fg_run_rows_add(&rr, row) != 0) {
            if (!bad++) first_bad = line_no;
        }
        json_decref(row);
    }
    free(line);
    fg_run_rows_end(&rr);
    if (cut) note(run, "metrics.csv: line %zu is cut short (a run killed while writing?); ignored", cut);
    if (bad) note(run, "metrics.csv: %zu malformed row(s) skipped, the first at line %zu", bad, first_bad);
    snprintf(run->source, sizeof run->source, "metrics.csv");
}

/* ---- report.html ---------------------------------------------------------------------- */

#define SCAN_BYTES 65536

/* The offset of the first needle in f at or after from (and before to, when to >= 0), or -1. */
static off_t find_in_file(FILE *f, off_t from, off_t to, const char *needle)
{
    size_t n = strlen(needle);
    char buf[SCAN_BYTES];
    off_t at = from;
    for (;;) {
        if (fseeko(f, at, SEEK_SET) != 0) return -1;
        size_t got = fread(buf, 1, sizeof buf, f);
        if (got < n) return -1;
        const char *m = memmem(buf, got, needle, n);
        if (m) {
            off_t found = at + (off_t)(m - buf);
            return to >= 0 && found >= to ? -1 : found;
        }
        if (got < sizeof buf) return -1;
        at += (off_t)(got - n + 1);
        if (to >= 0 && at >= to) return -1;
    }
}

/* The text from the file position up to the next "</script>" (malloc'ed), or NULL. */
static char *read_to_script_end(FILE *f, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    for (int c; buf && (c = getc(f)) != EOF;) {
        if (n + 1 >= cap) {
            if (cap > (size_t)MAX_FILE_BYTES) break;
            char *p = realloc(buf, cap *= 2);
            if (!p) break;
            buf = p;
        }
        buf[n++] = (char)c;
        if (c == '>' && n >= 9 && memcmp(buf + n - 9, "</script>", 9) == 0) {
            *len = n - 9;
            buf[*len] = '\0';
            return buf;
        }
    }
    free(buf);
    return NULL;
}

/* The rows of one block (report_file.h) at the file position: "[[...],\n[...]]" up to its
 * "</script>", a row at a time. 0, or -1 when the block is malformed or cut short. */
static int read_row_block(FILE *f, fg_run_rows *rr)
{
    char row[65536];
    int c = getc(f);
    if (c != '[') return -1;
    for (;;) {
        while ((c = getc(f)) == ',' || c == '\n' || c == ' ') {}
        if (c == ']') return 0;
        if (c != '[') return -1;
        size_t n = 0;
        row[n++] = '[';
        while ((c = getc(f)) != EOF && c != ']' && c != '<')
            if (n + 2 < sizeof row) row[n++] = (char)c;
        if (c != ']') return -1;
        row[n++] = ']';
        json_t *r = n + 1 < sizeof row ? json_loadb(row, n, 0, NULL) : NULL;
        if (!r) rr->bad++;
        else fg_run_rows_add(rr, r);
        json_decref(r);
    }
}

static void read_row_blocks(FILE *f, off_t data_at, fg_run_rows *rr, fg_run_info *run)
{
    static const char open_tag[] = "<script type=\"application/json\" class=\"fulgur-report-rows\">";
    int cut = 0;
    for (off_t at = 0; (at = find_in_file(f, at, data_at, open_tag)) >= 0;) {
        at += (off_t)strlen(open_tag);
        if (fseeko(f, at, SEEK_SET) != 0 || read_row_block(f, rr) != 0) cut++;
    }
    if (cut) note(run, "report.html: %d row block(s) malformed or cut short; their rest skipped", cut);
}

/* report.html's data block (the first run of its document) and its rows: from the block
 * itself, or, on a page kept in place ("row_blocks": true), from the row blocks before it,
 * one row at a time. 1 when read; 0 with a note when the page has no usable data block. */
static int read_report_html(FILE *f, fg_run_info *run, size_t keep)
{
    off_t at = find_in_file(f, 0, -1, DATA_OPEN);
    size_t len = 0;
    char *text = at >= 0 && fseeko(f, at + (off_t)strlen(DATA_OPEN), SEEK_SET) == 0
                     ? read_to_script_end(f, &len) : NULL;
    if (!text) {
        note(run, "report.html: no complete data block (a file cut short?)");
        return 0;
    }
    json_error_t je;
    json_t *doc = json_loadb(text, len, 0, &je);
    free(text);
    json_t *first = json_array_get(json_object_get(doc, "runs"), 0);
    json_t *cols = json_object_get(first, "columns"), *rows = json_object_get(first, "rows");
    if (!doc || !json_is_array(cols) || !json_is_array(rows) || json_array_size(cols) < 2) {
        if (!doc) note(run, "report.html: the data block cannot be parsed (line %d: %s)", je.line, je.text);
        else note(run, "report.html: the data block has no columns and rows");
        json_decref(doc);
        return 0;
    }
    json_decref(run->columns);
    run->columns = json_incref(cols);
    json_t *config = json_object_get(first, "config");
    if (json_is_array(config) && json_array_size(run->config) == 0) {
        json_decref(run->config);
        run->config = json_incref(config);
    }
    fg_run_rows rr;
    if (fg_run_rows_begin(&rr, run, keep) == 0) {
        size_t i;
        json_t *row;
        json_array_foreach(rows, i, row) fg_run_rows_add(&rr, row);
        if (json_is_true(json_object_get(first, "row_blocks"))) read_row_blocks(f, at, &rr, run);
        if (rr.bad) note(run, "report.html: %zu malformed row(s) skipped", rr.bad);
        fg_run_rows_end(&rr);
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

/* A run marked running whose process is gone was killed (or crashed): "died". */
static void check_running(fg_run_info *run)
{
    if (strcmp(run->state, "running") != 0) return;
    const char *host = json_str(run->status, "host"), *boot = json_str(run->status, "boot_id");
    int64_t pid = (int64_t)json_num(run->status, "pid", 0);
    int alive = fg_run_status_process_alive(host, pid, (int64_t)json_num(run->status, "pid_start_ticks", 0), boot);
    if (alive == 0) {
        snprintf(run->state, sizeof run->state, "died");
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
    if (!run->monitor[0]) snprintf(run->monitor, sizeof run->monitor, "train/loss"); /* no metrics */
    /* an ended run knows its steps; a running or killed one has logged this far */
    const json_t *gs = json_object_get(run->status, "global_step");
    run->steps = json_is_integer(gs) && strcmp(run->state, "running") != 0 ? json_integer_value(gs) : run->last_step;
}

/* The metrics, streamed (runs_rows.h): report.html's, or, where it has no usable data,
 * metrics.csv's. */
static void read_metrics(fg_run_info *run, size_t keep)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/report.html", run->dir);
    FILE *f = open_regular(path);
    if (!f && errno != ENOENT) note(run, "report.html: %s", read_error(errno));
    int have = f && read_report_html(f, run, keep);
    if (f) fclose(f);
    if (have) return;
    snprintf(path, sizeof path, "%s/metrics.csv", run->dir);
    f = open_regular(path);
    if (f) {
        read_metrics_csv(f, run, keep);
        fclose(f);
    } else if (errno != ENOENT) {
        note(run, "metrics.csv: %s", read_error(errno));
    }
}

fg_status fg_run_read(const char *dir, fg_run_info *run, size_t keep_rows, fg_error *err)
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
    run->last_step = -1;
    read_metrics(run, keep_rows);
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
