/* One key of the run's resolved configuration, as the host hands it out (config_entry). */
#ifndef FULGUR_PLUGIN_COMMON_CONFIG_VALUE_H
#define FULGUR_PLUGIN_COMMON_CONFIG_VALUE_H

#include "fulgur/plugin.h"

/* 0 when the host cannot say (no config_entry, ABI 1.x); else 1, *value the first value of
 * `key` in `[section]`, NULL when the config has no such key. */
int fg_plugin_config_value(const fg_host *host, const char *section, const char *key,
                           const char **value);

#endif
