/* Step metrics summed over a process's stages. */
#include "stage_metrics.h"

fg_status fg_plugin_add_stage_metrics(const fg_train_services *svc, void *stage, int reset,
                                      fg_step_metrics *sum, fg_error *err)
{
    fg_step_metrics m = {sizeof m, 0, 0, 0};
    fg_status st = svc->read_metrics(svc->ctx, stage, reset, &m, err);
    if (st != FG_OK) return st;
    sum->loss_sum += m.loss_sum;
    sum->correct += m.correct;
    sum->count += m.count;
    return FG_OK;
}
