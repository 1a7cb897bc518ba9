/* `fulgur runs DIR --report OUT`: the runs' data as one report data document (the format
 * the report plugin's page reads), rendered by the report callback plugin itself: the core
 * loads it from the plugin search path and drives it through its ABI with `data` set, as
 * a one-event instance. The page is the plugin's; the core writes no HTML. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fulgur/callback.h"
#include "loader.h"
#include "runs.h"
#include "section_schema.h"

static json_t *run_object(const fg_run_info *r)
{
    char label[600];
    snprintf(label, sizeof label, "%s/%s", r->name, r->version);
    return json_pack("{s:s%, s:s%, s:s, s:O, s:O, s:O, s:O, s:O}", "label", label, strlen(label),
                     "dir", r->dir, strlen(r->dir), "state", r->state, "notes", r->notes,
                     "config", r->config, "status", r->status ? r->status : json_null(),
                     "columns", r->columns, "rows", r->rows);
}

static json_t *document(fg_run_info *const *runs, int count, const char *title)
{
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *list = json_array();
    for (int i = 0; list && i < count; i++) {
        json_t *run = run_object(runs[i]);
        if (!run) {
            json_decref(list);
            return NULL;
        }
        json_array_append_new(list, run);
    }
    if (!list) return NULL;
    return json_pack("{s:s, s:i, s:s%, s:s, s:s, s:o}", "format", "fulgur-report", "version", 1,
                     "title", title, strlen(title), "generated", when, "fulgur_version",
                     fg_version(), "runs", list);
}

/* A report plugin instance configured with `data` and `filename`, sent one event. */
static fg_status render(fg_runtime *rt, const char *data_path, const char *out_path, fg_error *err)
{
    fg_status st = fg_loader_add_default_paths(rt->loader, err);
    const fg_plugin *plugin = NULL;
    const char *path = NULL;
    if (st == FG_OK) st = fg_loader_load(rt->loader, FG_KIND_CALLBACK, "report", &plugin, &path, err);
    if (st != FG_OK) return st;
    const fg_callback_vtable *vt = plugin->vtable;
    if (!vt || !vt->on_event)
        return fg_error_set(err, FG_INCOMPATIBLE, "%s: callback.report has no on_event", path);
    fg_runtime host_rt; /* just enough runtime for the instance's option getters */
    memset(&host_rt, 0, sizeof host_rt);
    host_rt.out = rt->out;
    host_rt.verbosity = rt->verbosity;
    fg_instance inst;
    memset(&inst, 0, sizeof inst);
    inst.rt = &host_rt;
    inst.kind = FG_KIND_CALLBACK;
    snprintf(inst.section, sizeof inst.section, "callback.report");
    snprintf(inst.name, sizeof inst.name, "report");
    inst.plugin = plugin;
    inst.path = path;
    fg_host_fill(&inst);
    host_rt.instances[0] = &inst;
    host_rt.instance_count = 1;
    st = fg_config_parse_string("", "fulgur runs --report", &host_rt.cfg, err);
    if (st == FG_OK) st = fg_config_set(host_rt.cfg, "callback.report", "data", data_path, err);
    if (st == FG_OK) st = fg_config_set(host_rt.cfg, "callback.report", "filename", out_path, err);
    fg_schema schemas[4];
    size_t n = 0;
    if (st == FG_OK) st = fg_section_schemas(&host_rt, "callback.report", schemas, &n, err);
    if (st == FG_OK) st = fg_config_validate_section(host_rt.cfg, "callback.report", schemas, n, err);
    void *state = NULL;
    fg_error perr = {0};
    if (st == FG_OK && (st = plugin->init(&inst.host, &state, &perr)) != FG_OK)
        fg_error_set(err, st, "callback.report (%s) failed to start: %s", path, perr.message);
    if (st == FG_OK) {
        fg_event ev;
        memset(&ev, 0, sizeof ev);
        ev.struct_size = sizeof ev;
        ev.type = FG_EVENT_FIT_END;
        ev.is_rank_zero = 1;
        ev.run_dir = ".";
        fg_callback_action act;
        memset(&act, 0, sizeof act);
        act.struct_size = sizeof act;
        st = vt->on_event(state, &ev, &act, &perr);
        if (st != FG_OK) fg_error_set(err, st, "%s", perr.message);
    }
    if (state && plugin->deinit) plugin->deinit(state);
    fg_config_destroy(host_rt.cfg);
    return st;
}

fg_status fg_runs_write_report(fg_runtime *rt, fg_run_info *const *runs, int count,
                               const char *title, const char *out_path, fg_error *err)
{
    json_t *doc = document(runs, count, title);
    if (!doc) return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", out_path);
    /* the data document goes to the plugin as a file in the temporary folder */
    const char *tmpdir = getenv("TMPDIR");
    char data[4300];
    snprintf(data, sizeof data, "%s/fulgur-runs-XXXXXX", tmpdir && tmpdir[0] ? tmpdir : "/tmp");
    int fd = mkstemp(data);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    fg_status st = FG_OK;
    if (!f || json_dumpf(doc, f, JSON_COMPACT) != 0 || fflush(f) != 0 || ferror(f))
        st = fg_error_set(err, FG_INTERNAL, "%s: cannot write the runs' data: %s", data,
                          strerror(errno ? errno : EIO));
    if (f) fclose(f);
    else if (fd >= 0) close(fd);
    json_decref(doc);
    if (st == FG_OK) st = render(rt, data, out_path, err);
    if (fd >= 0) unlink(data);
    return st;
}
