/* Which schemas validate a config section. */
#include "section_schema.h"

#include <string.h>

#include "core_schema.h"
#include "model.h"
#include "optimizer.h"
#include "scheduler.h"

static void push(fg_schema *out, size_t *n, const char *owner, const fg_option *opts,
                 size_t count, size_t stride)
{
    if (!opts || !count) return;
    out[*n].owner = owner;
    out[*n].options = opts;
    out[*n].count = count;
    out[*n].option_size = stride;
    (*n)++;
}

fg_status fg_section_schemas(fg_runtime *rt, const char *section, fg_schema *out, size_t *count,
                             fg_error *err)
{
    size_t n = 0, c = 0;
    const fg_option *core = fg_core_schema(section, &c);
    push(out, &n, "core", core, c, sizeof(fg_option));
    fg_instance *inst = fg_runtime_instance(rt, section);
    if (inst)
        push(out, &n, inst->name, inst->plugin->options, inst->plugin->option_count,
             inst->plugin->option_size);
    if (strcmp(section, "model") == 0) {
        core = fg_model_schema(&c);
        push(out, &n, "model", core, c, sizeof(fg_option));
    } else if (strcmp(section, "optimizer") == 0) {
        core = fg_optimizer_schema(&c);
        push(out, &n, "optimizer", core, c, sizeof(fg_option));
    } else if (strcmp(section, "scheduler") == 0) {
        core = fg_scheduler_schema(&c);
        push(out, &n, "scheduler", core, c, sizeof(fg_option));
    } else if (strncmp(section, "layer.", 6) == 0) {
        fg_status st = fg_layer_check_type(rt->cfg, section, err);
        if (st != FG_OK) return st;
        core = fg_layer_schema(fg_config_get(rt->cfg, section, "type"), &c);
        push(out, &n, "layer", core, c, sizeof(fg_option));
    }
    *count = n;
    return FG_OK;
}
