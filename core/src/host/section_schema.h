/* Which schemas validate a config section: the core's keys, a plugin's declared options,
 * the model's and layers' keys. */
#ifndef FG_SECTION_SCHEMA_H
#define FG_SECTION_SCHEMA_H

#include "runtime.h"

/* Fills up to 4 schemas for `section` into `out`. */
fg_status fg_section_schemas(fg_runtime *rt, const char *section, fg_schema *out, size_t *count,
                             fg_error *err);

#endif
