/* Per-device bytes by role from the strategy, printed at setup; as memory/... metrics
 * (names kept in `names`) for the fit-start event. */
#ifndef FG_TRAINER_MEMORY_H
#define FG_TRAINER_MEMORY_H

#include "fulgur/callback.h"

struct fg_trainer;

fg_status fg_trainer_report_memory(struct fg_trainer *t, fg_error *err);
uint32_t fg_trainer_memory_metrics(const struct fg_trainer *t, fg_metric *out, char (*names)[64],
                                   uint32_t capacity);

#endif
