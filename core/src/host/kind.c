/* Plugin kind names: the <kind> part of fulgur-<kind>-<name>.so and of config sections. */
#include <string.h>

#include "loader.h"

/* Indexed by fg_plugin_kind; index 0 is no kind. */
static const char *const kind_names[] = {
    [FG_KIND_BACKEND] = "backend", [FG_KIND_PRECISION] = "precision",
    [FG_KIND_STRATEGY] = "strategy", [FG_KIND_COMM] = "comm",
    [FG_KIND_DATA] = "data",       [FG_KIND_CALLBACK] = "callback",
};

const char *fg_kind_name(int kind)
{
    if (kind < FG_KIND_FIRST || kind > FG_KIND_LAST)
        return NULL;
    return kind_names[kind];
}

int fg_kind_from_name(const char *name)
{
    if (name == NULL)
        return 0;
    for (int kind = FG_KIND_FIRST; kind <= FG_KIND_LAST; kind++)
        if (strcmp(kind_names[kind], name) == 0)
            return kind;
    return 0;
}
