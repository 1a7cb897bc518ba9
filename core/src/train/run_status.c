/* status.json of a run folder (run_status.h). */
#include "run_status.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "loader.h"
#include "output_file.h"
#include "run_status_signal.h"
#include "runtime.h"

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void iso_time(double unix_s, char *buf, size_t cap)
{
    time_t secs = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Field 22 of /proc/PID/stat (starttime); 0 when unknown. The command name (field 2) is
 * in parentheses and may hold spaces: count from the last ')'. */
static int64_t process_start_ticks(int64_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    int field = 2;
    for (p++; *p && field < 22; p++)
        if (*p == ' ') field++;
    return field == 22 ? strtoll(p, NULL, 10) : 0;
}

static void read_boot_id(char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return;
    if (!fgets(buf, (int)cap, f)) buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

int fg_run_status_process_alive(const char *host, int64_t pid, int64_t start_ticks,
                                const char *boot_id)
{
    char here[256] = "", boot[64];
    gethostname(here, sizeof here - 1);
    if (!host || strcmp(host, here) != 0 || pid <= 0) return -1;
    read_boot_id(boot, sizeof boot);
    if (boot_id && boot_id[0] && boot[0] && strcmp(boot_id, boot) != 0) return 0; /* rebooted */
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 0;
    if (start_ticks > 0) {
        int64_t now = process_start_ticks(pid);
        if (now > 0 && now != start_ticks) return 0; /* the pid was reused */
    }
    return 1;
}

static json_t *plugin_list(fg_runtime *rt)
{
    json_t *list = json_array();
    for (int i = 0; list && i < rt->instance_count; i++) {
        const fg_instance *inst = rt->instances[i];
        if (!inst->initialized) continue;
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s, s:s}", "section", inst->section,
                                              "kind", fg_kind_name(inst->kind), "name", inst->name,
                                              "version", inst->plugin->version ? inst->plugin->version : "?",
                                              "path", inst->path ? inst->path : ""));
    }
    return list;
}

static int dump_json(FILE *out, void *doc)
{
    return json_dumpf(doc, out, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
}

/* path.tmp.PID, then a rename over path: a reader sees the old file or the new one. */
static fg_status write_atomically(const char *path, json_t *doc, fg_error *err)
{
    return fg_output_write_atomic(path, dump_json, doc, err);
}

static const char *verb_name(fg_verb verb)
{
    switch (verb) {
    case FG_VERB_FIT: return "fit";
    case FG_VERB_VALIDATE: return "validate";
    case FG_VERB_TEST: return "test";
    case FG_VERB_PREDICT: return "predict";
    case FG_VERB_GENERATE: return "generate";
    case FG_VERB_EXPORT: return "export";
    case FG_VERB_CHECK: return "check";
    }
    return "?";
}

/* The record a SIGTERM or SIGINT writes at once (run_status_signal.h): "failed", and why;
 * it stays only when the process is killed before it records its own end. */
static void arm_signal_record(const char *path, json_t *running)
{
    json_t *doc = json_deep_copy(running);
    if (!doc) return;
    json_object_set_new(doc, "status", json_string("failed"));
    json_object_set_new(doc, "end_unix", json_string("@@END@@"));
    json_object_set_new(doc, "exit_code", json_string("@@CODE@@"));
    json_object_set_new(doc, "global_step", json_string("@@STEP@@"));
    json_object_set_new(doc, "message", json_string(
        "@@SIG@@ received after step @@N@@; the process ended before it stopped at a step "
        "boundary (killed: under mpirun, a rank that exits makes mpirun send the others SIGTERM, "
        "then SIGKILL a second later; the rank lost first is named in mpirun's output)"));
    char *text = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    if (text) fg_run_status_signal_arm(path, text);
    free(text);
    json_decref(doc);
}

fg_status fg_run_status_begin(const char *run_dir, fg_runtime *rt, fg_verb verb, fg_error *err)
{
    char path[8192], host[256] = "", boot[64], started[32];
    snprintf(path, sizeof path, "%s/status.json", run_dir);
    gethostname(host, sizeof host - 1);
    read_boot_id(boot, sizeof boot);
    double now = wall_seconds();
    iso_time(now, started, sizeof started);
    json_t *doc = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:f, s:o}",
                            "format", "fulgur-run-status", "version", 1, "status", "running",
                            "verb", verb_name(verb), "config", fg_config_path(rt->cfg),
                            "fulgur_version", fg_version(), "host", host,
                            "pid", (json_int_t)getpid(),
                            "pid_start_ticks", (json_int_t)process_start_ticks(getpid()),
                            "boot_id", boot, "started", started, "start_unix", now,
                            "plugins", plugin_list(rt));
    if (!doc)
        return fg_error_set(err, FG_INTERNAL, "%s: cannot encode the run's status (out of memory, "
                            "or a path that is not UTF-8)", path);
    fg_status st = write_atomically(path, doc, err);
    if (st == FG_OK) arm_signal_record(path, doc);
    json_decref(doc);
    return st;
}

fg_status fg_run_status_end(const char *run_dir, const fg_run_outcome *o, fg_error *err)
{
    char path[8192], ended[32];
    fg_run_status_signal_disarm(); /* the real outcome from here on */
    snprintf(path, sizeof path, "%s/status.json", run_dir);
    json_t *doc = json_load_file(path, 0, NULL);
    if (!json_is_object(doc)) { /* removed or edited meanwhile: what we know now */
        json_decref(doc);
        doc = json_pack("{s:s, s:i}", "format", "fulgur-run-status", "version", 1);
        if (!doc) return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    double now = wall_seconds();
    iso_time(now, ended, sizeof ended);
    json_t *start = json_object_get(doc, "start_unix");
    json_object_set_new(doc, "status", json_string(o->status));
    json_object_set_new(doc, "ended", json_string(ended));
    json_object_set_new(doc, "end_unix", json_real(now));
    if (json_is_number(start))
        json_object_set_new(doc, "wall_s", json_real(now - json_number_value(start)));
    json_object_set_new(doc, "exit_code", json_integer(o->exit_code));
    json_object_set_new(doc, "global_step", json_integer(o->global_step));
    json_object_set_new(doc, "epoch", json_integer(o->epoch));
    if (o->message && o->message[0]) json_object_set_new(doc, "message", json_string(o->message));
    else json_object_del(doc, "message"); /* a signal's record (run_status_signal.h) is stale */
    fg_status st = write_atomically(path, doc, err);
    json_decref(doc);
    return st;
}
