/* Typed readings of option text for the fake hosts of the plugin tests. */
#include "option_text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

fg_status fg_test_option_string(const char *text, const char **out)
{
    if (!text) return FG_NOT_FOUND;
    *out = text;
    return FG_OK;
}

fg_status fg_test_option_int(const char *text, int64_t *out)
{
    if (!text) return FG_NOT_FOUND;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0) return FG_INVALID_ARGUMENT;
    *out = x;
    return FG_OK;
}

fg_status fg_test_option_float(const char *text, double *out)
{
    if (!text) return FG_NOT_FOUND;
    char *end = NULL;
    double x = strtod(text, &end);
    if (end == text || *end != '\0') return FG_INVALID_ARGUMENT;
    *out = x;
    return FG_OK;
}

fg_status fg_test_option_bool(const char *text, int *out)
{
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    if (!text) return FG_NOT_FOUND;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = 1;
            return FG_OK;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = 0;
            return FG_OK;
        }
    }
    return FG_INVALID_ARGUMENT;
}
