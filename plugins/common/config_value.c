/* A key of the resolved configuration, looked up through host->config_entry. */
#include "config_value.h"

#include <string.h>

int fg_plugin_config_value(const fg_host *host, const char *section, const char *key,
                           const char **value)
{
    *value = NULL;
    if (!FG_HAS_FIELD(host, fg_host, config_entry) || !host->config_entry)
        return 0;
    const char *s = NULL, *k = NULL, *v = NULL;
    for (size_t i = 0; host->config_entry(host, i, &s, &k, &v) == FG_OK; i++)
        if (s && k && strcmp(s, section) == 0 && strcmp(k, key) == 0) {
            *value = v;
            break;
        }
    return 1;
}
