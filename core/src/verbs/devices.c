/* `fulgur devices`: what each backend in the search path sees. A backend is started with
 * its default options and asked only to count and name devices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fulgur/backend.h"
#include "runtime.h"

typedef struct backend_list {
    const fg_plugin *plugins[32];
    int count;
} backend_list;

static void collect_backend(void *user, const fg_plugin_file *f)
{
    backend_list *l = user;
    if (f->desc && f->desc->kind == FG_KIND_BACKEND && l->count < 32) l->plugins[l->count++] = f->desc;
}

static void print_devices(fg_runtime *rt, const fg_plugin *p, FILE *out)
{
    fg_instance inst;
    memset(&inst, 0, sizeof inst);
    inst.rt = rt;
    inst.kind = FG_KIND_BACKEND;
    inst.plugin = p;
    snprintf(inst.name, sizeof inst.name, "%s", p->name);
    fg_host_fill(&inst);
    fg_error e = {0};
    fg_status st = p->init(&inst.host, &inst.state, &e);
    if (st != FG_OK) {
        fprintf(out, "%-8s %s: %s\n", p->name, fg_status_name(st), e.message);
        return;
    }
    const fg_backend_vtable *vt = p->vtable;
    int n = 0;
    if (!FG_HAS_FIELD(vt, fg_backend_vtable, device_count) || !vt->device_count) {
        fprintf(out, "%-8s cannot count its devices (device_count not supported)\n", p->name);
    } else if ((st = vt->device_count(inst.state, &n, &e)) != FG_OK) {
        fprintf(out, "%-8s %s: %s\n", p->name, fg_status_name(st), e.message);
    } else {
        fprintf(out, "%-8s %d device(s)\n", p->name, n);
        for (int d = 0; d < n; d++) {
            fg_device_info info;
            memset(&info, 0, sizeof info);
            info.struct_size = sizeof info;
            if (vt->device_info && vt->device_info(inst.state, d, &info, &e) == FG_OK)
                fprintf(out, "  %s:%d  %s  %.1f GiB\n", p->name, d, info.name,
                        (double)info.total_memory / (1024.0 * 1024.0 * 1024.0));
            else
                fprintf(out, "  %s:%d  (no information: %s)\n", p->name, d, e.message);
        }
    }
    if (p->deinit) p->deinit(inst.state);
}

fg_status fg_runtime_list_devices(fg_runtime *rt, FILE *out, fg_error *err)
{
    if (!out) out = stdout;
    fg_status st = fg_loader_add_default_paths(rt->loader, err);
    if (st != FG_OK) return st;
    backend_list l = {{0}, 0};
    fg_loader_scan(rt->loader, collect_backend, &l);
    if (!l.count) fprintf(out, "no backend plugin found in the search path (see `fulgur plugins`)\n");
    for (int i = 0; i < l.count; i++) print_devices(rt, l.plugins[i], out);
    return FG_OK;
}
