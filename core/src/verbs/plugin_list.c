/* `fulgur plugins`: every plugin file in the search path, loaded or refused. */
#include <stdio.h>

#include "runtime.h"

typedef struct list_state {
    FILE *out;
    int loaded, refused;
} list_state;

static void print_file(void *user, const fg_plugin_file *f)
{
    list_state *s = user;
    if (f->desc) {
        fprintf(s->out, "%-10s %-16s %-8s abi %u.%u  %s\n", fg_kind_name(f->desc->kind),
                f->desc->name, f->desc->version ? f->desc->version : "?",
                (unsigned)f->desc->abi_major, (unsigned)f->desc->abi_minor, f->path);
        s->loaded++;
    } else {
        if (f->reason)
            fprintf(s->out, "refused %s\n", f->reason); /* the reason starts with the path */
        else
            fprintf(s->out, "refused %s: %s\n", f->path, fg_status_name(f->status));
        s->refused++;
    }
}

fg_status fg_runtime_list_plugins(fg_runtime *rt, FILE *out, fg_error *err)
{
    fg_status st = fg_loader_add_default_paths(rt->loader, err);
    if (st != FG_OK) return st;
    list_state s = {out ? out : stdout, 0, 0};
    fprintf(s.out, "# search path (first match wins):\n");
    for (size_t i = 0; i < fg_loader_path_count(rt->loader); i++)
        fprintf(s.out, "#   %s\n", fg_loader_path(rt->loader, i));
    fg_loader_scan(rt->loader, print_file, &s);
    fprintf(s.out, "# %d plugin(s) loaded, %d refused; host ABI %d.%d\n", s.loaded, s.refused,
            FG_ABI_MAJOR, FG_ABI_MINOR);
    return FG_OK;
}
