/* Which schemas validate a config section. */
#include "section_schema.h"

#include <string.h>

#include "core_schema.h"

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
    *count = n;
    return FG_OK;
}
