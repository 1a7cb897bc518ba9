/* `fulgur explain KIND.NAME`: a plugin's description and its options; `fulgur explain
 * SECTION` for the core's own sections. */
#include <stdio.h>
#include <string.h>

#include "core_schema.h"
#include "model.h"
#include "optimizer.h"
#include "scheduler.h"
#include "runtime.h"

static const char *type_name(uint32_t t)
{
    switch (t) {
    case FG_OPT_BOOL: return "bool";
    case FG_OPT_INT: return "int";
    case FG_OPT_FLOAT: return "float";
    case FG_OPT_STRING: return "string";
    case FG_OPT_ENUM: return "enum";
    case FG_OPT_LIST: return "list";
    }
    return "?";
}

static void print_options(FILE *out, const fg_option *opts, size_t count, size_t stride)
{
    for (size_t i = 0; i < count; i++) {
        const fg_option *o = (const fg_option *)((const char *)opts + i * stride);
        char range[96] = "";
        if ((o->type == FG_OPT_INT || o->type == FG_OPT_FLOAT) && o->min <= o->max)
            snprintf(range, sizeof range, "  range=[%.15g, %.15g]", o->min, o->max);
        else if (o->type == FG_OPT_ENUM && o->choices)
            snprintf(range, sizeof range, "  choices=%s", o->choices);
        fprintf(out, "  %-22s %-6s %s%s%s  %s\n", o->key, type_name(o->type),
                o->default_value ? "default=" : "required", o->default_value ? o->default_value : "",
                range, o->help ? o->help : "");
    }
}

fg_status fg_runtime_explain(fg_runtime *rt, const char *what, FILE *out, fg_error *err)
{
    if (!out) out = stdout;
    const char *dot = strchr(what, '.');
    int kind = 0;
    if (dot) {
        char kind_name[32];
        snprintf(kind_name, sizeof kind_name, "%.*s", (int)(dot - what), what);
        kind = fg_kind_from_name(kind_name);
    }
    if (!kind) {
        size_t count;
        const fg_option *opts = fg_core_schema(what, &count);
        if (!opts && strcmp(what, "model") == 0) opts = fg_model_schema(&count);
        if (!opts && strcmp(what, "optimizer") == 0) opts = fg_optimizer_schema(&count);
        if (!opts && strcmp(what, "scheduler") == 0) opts = fg_scheduler_schema(&count);
        if (!opts && strncmp(what, "layer.", 6) == 0) opts = fg_layer_schema(what + 6, &count);
        if (!opts)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "explain: '%s' is neither KIND.NAME (kinds: backend, precision, "
                                "strategy, comm, data, callback) nor a core section (trainer, data, model, "
                                "optimizer, scheduler, layer.TYPE, plugins)", what);
        fprintf(out, "[%s] (core)\n", what);
        print_options(out, opts, count, sizeof(fg_option));
        return FG_OK;
    }
    fg_status st = fg_loader_add_default_paths(rt->loader, err);
    if (st != FG_OK) return st;
    const fg_plugin *p;
    const char *path;
    st = fg_loader_load(rt->loader, kind, dot + 1, &p, &path, err);
    if (st != FG_OK) return st;
    fprintf(out, "%s.%s %s (abi %u.%u, needs host >= 1.%u)\n  %s\n  %s\n", fg_kind_name(kind),
            p->name, p->version ? p->version : "?", (unsigned)p->abi_major,
            (unsigned)p->abi_minor, (unsigned)p->min_host_minor,
            p->description ? p->description : "", path);
    size_t core_count;
    char cb_section[160];
    snprintf(cb_section, sizeof cb_section, "callback.%s", p->name);
    const char *section = kind == FG_KIND_CALLBACK ? cb_section : fg_kind_name(kind);
    const fg_option *core = section ? fg_core_schema(section, &core_count) : NULL;
    if (core) {
        fprintf(out, "options of [%s] from the core:\n", section);
        print_options(out, core, core_count, sizeof(fg_option));
    }
    fprintf(out, "options:\n");
    if (!p->option_count) fprintf(out, "  (none)\n");
    print_options(out, p->options, p->option_count, p->option_size);
    return FG_OK;
}
