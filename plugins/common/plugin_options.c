/* Option getters that name the option that could not be read. */
#include "plugin_options.h"

static fg_status failure(const char *who, const char *key, fg_status st, fg_error *err)
{
    return fg_error_set(err, st == FG_OK ? FG_INVALID_ARGUMENT : st,
                        "%s: cannot read option %s: %s", who, key, fg_status_name(st));
}

fg_status fg_plugin_get_string(const fg_host *host, const char *who, const char *key,
                               const char **out, fg_error *err)
{
    fg_status st = host->get_string(host, key, out);
    return st != FG_OK || !*out ? failure(who, key, st, err) : FG_OK;
}

fg_status fg_plugin_get_int(const fg_host *host, const char *who, const char *key,
                            int64_t *out, fg_error *err)
{
    fg_status st = host->get_int(host, key, out);
    return st != FG_OK ? failure(who, key, st, err) : FG_OK;
}

fg_status fg_plugin_get_float(const fg_host *host, const char *who, const char *key,
                              double *out, fg_error *err)
{
    fg_status st = host->get_float(host, key, out);
    return st != FG_OK ? failure(who, key, st, err) : FG_OK;
}

fg_status fg_plugin_get_bool(const fg_host *host, const char *who, const char *key, int *out,
                             fg_error *err)
{
    fg_status st = host->get_bool(host, key, out);
    return st != FG_OK ? failure(who, key, st, err) : FG_OK;
}
