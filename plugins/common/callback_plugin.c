/* Helpers of the callback plugins; see callback_plugin.h. */
#include "callback_plugin.h"

fg_status fg_plugin_read_hparams(const fg_host *host, const char *section, int *hparams,
                                 fg_error *err)
{
    *hparams = 1;
    if (host->get_bool(host, "hparams", hparams) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] hparams: not a boolean", section);
    if (*hparams && (!FG_HAS_FIELD(host, fg_host, config_entry) || host->config_entry == NULL))
        return fg_error_set(err, FG_INCOMPATIBLE, "[%s] hparams = true needs a host with "
                            "config_entry (fulgur ABI 1.x); set hparams = false", section);
    return FG_OK;
}

fg_status fg_plugin_event_has(const fg_event *event, int has_field, const char *section,
                              fg_error *err)
{
    if (has_field)
        return FG_OK;
    return fg_error_set(err, FG_INCOMPATIBLE, "[%s] event struct of %u bytes is too old",
                        section, event ? (unsigned)event->struct_size : 0u);
}
