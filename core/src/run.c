/* fg_runtime_run: start the configured plugins and run a verb. */
#include "runtime.h"
#include "trainer.h"

fg_status fg_runtime_run(fg_runtime *rt, fg_verb verb, fg_error *err)
{
    if (!rt->cfg)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur: run before configure");
    fg_status st = fg_runtime_init_plugins(rt, err);
    if (st == FG_OK) st = fg_trainer_run(rt, verb, err);
    fg_runtime_deinit_plugins(rt);
    return st;
}
