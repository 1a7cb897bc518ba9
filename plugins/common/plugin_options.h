/* Reading a plugin's options through the host, failing with the option's name. */
#ifndef FULGUR_PLUGIN_COMMON_OPTIONS_H
#define FULGUR_PLUGIN_COMMON_OPTIONS_H

#include "fulgur/plugin.h"

/* FG_OK, or the host's status (FG_INVALID_ARGUMENT when it said FG_OK without a value)
 * with "who: cannot read option KEY: STATUS". */
fg_status fg_plugin_get_string(const fg_host *host, const char *who, const char *key,
                               const char **out, fg_error *err);
fg_status fg_plugin_get_int(const fg_host *host, const char *who, const char *key,
                            int64_t *out, fg_error *err);
fg_status fg_plugin_get_float(const fg_host *host, const char *who, const char *key,
                              double *out, fg_error *err);
fg_status fg_plugin_get_bool(const fg_host *host, const char *who, const char *key, int *out,
                             fg_error *err);

#endif
