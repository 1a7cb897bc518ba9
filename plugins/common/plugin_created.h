/* The end of a plugin's init (or any create function): the new object handed out on
 * success, destroyed on failure. */
#ifndef FULGUR_PLUGIN_COMMON_CREATED_H
#define FULGUR_PLUGIN_COMMON_CREATED_H

#include "fulgur/plugin.h"

/* On FG_OK, *out = obj and FG_OK; otherwise destroy(obj) (which accepts a half-built one)
 * and st. Use as `return FG_PLUGIN_CREATED(st, s, state, my_deinit);`. */
#define FG_PLUGIN_CREATED(st, obj, out, destroy)                                           \
    ((st) == FG_OK ? (*(out) = (obj), FG_OK) : ((destroy)(obj), (st)))

#endif
