/* What the callback plugins share: the hparams option of the loggers, and the check that
 * the host's event struct has the fields a plugin reads. */
#ifndef FULGUR_PLUGIN_COMMON_CALLBACK_H
#define FULGUR_PLUGIN_COMMON_CALLBACK_H

#include "fulgur/callback.h"

/* The bool option "hparams" (write the resolved configuration); true needs a host that
 * serves config_entry (ABI 1.x). FG_INVALID_ARGUMENT or FG_INCOMPATIBLE naming section. */
fg_status fg_plugin_read_hparams(const fg_host *host, const char *section, int *hparams,
                                 fg_error *err);

/* FG_OK when the event struct has `field` (fields are only ever appended), else
 * FG_INCOMPATIBLE: "[section] event struct of N bytes is too old". */
#define FG_PLUGIN_EVENT_NEEDS(event, field, section, err)                                  \
    fg_plugin_event_has((event), FG_HAS_FIELD((event), fg_event, field), (section), (err))
fg_status fg_plugin_event_has(const fg_event *event, int has_field, const char *section,
                              fg_error *err);

#endif
