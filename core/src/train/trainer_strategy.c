/* The trainer's questions to its strategy plugin (trainer_strategy.h). */
#include "trainer_strategy.h"

#include <string.h>

#include "trainer_internal.h"

#define STRAT(t) ((const fg_strategy_vtable *)(t)->strategy.vt)

fg_status fg_trainer_strategy_info(fg_trainer *t, fg_strategy_info *si, fg_error *e)
{
    const fg_strategy_vtable *sv = STRAT(t);
    memset(si, 0, sizeof *si);
    si->struct_size = sizeof *si;
    return sv->info ? sv->info(t->strategy.state, si, e) : FG_OK;
}

void *fg_trainer_primary_grads_stage(fg_trainer *t)
{
    const fg_strategy_vtable *sv = STRAT(t);
    fg_strategy_info si;
    fg_error e = {0};
    if (fg_trainer_strategy_info(t, &si, &e) != FG_OK || !si.primary_grads)
        return NULL;
    return sv->primary_replica ? sv->primary_replica(t->strategy.state) : NULL;
}
