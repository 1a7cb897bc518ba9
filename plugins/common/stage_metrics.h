/* The step metrics of a strategy that runs several stages in one process (dp, model-parallel):
 * the sums of the stages it reads them from. */
#ifndef FULGUR_PLUGIN_COMMON_STAGE_METRICS_H
#define FULGUR_PLUGIN_COMMON_STAGE_METRICS_H

#include "fulgur/strategy.h"

/* Adds `stage`'s loss sum, correct and count (read through svc, reset as asked) to *sum. */
fg_status fg_plugin_add_stage_metrics(const fg_train_services *svc, void *stage, int reset,
                                      fg_step_metrics *sum, fg_error *err);

#endif
