/* The core's own config keys, section by section. */
#ifndef FG_CORE_SCHEMA_H
#define FG_CORE_SCHEMA_H

#include <stddef.h>

#include "fulgur/plugin.h"

/* The core's keys of a section ("trainer", "data", "backend", ..., and `enabled` of every
 * "callback.NAME"); NULL with *count = 0 for a section the core has no keys in. */
const fg_option *fg_core_schema(const char *section, size_t *count);

/* Sections the core knows by exact name, and the prefixes of named families. */
extern const char *const fg_core_sections[];
extern const size_t fg_core_section_count;
extern const char *const fg_core_section_prefixes[];
extern const size_t fg_core_section_prefix_count;

/* The plugin kind configured by a section ("backend" -> FG_KIND_BACKEND,
 * "callback.x" -> FG_KIND_CALLBACK), 0 for a core-only section. */
int fg_section_plugin_kind(const char *section);
/* The plugin name a section selects when it has no `name` key; NULL when required. */
const char *fg_section_default_plugin(const char *section);

#endif
