/* fg_runtime_run: start the configured plugins and run a verb. */
#include "fulgur/comm.h"
#include "generate.h"
#include "io_status.h"
#include "runtime.h"
#include "trainer.h"
#include "trainer_export.h"
#include "trainer_predict.h"

/* A rank that fails alone would leave the others blocked in their next collective until
 * the timeout: end the job from here, with the reason. */
static void abort_job(fg_runtime *rt, fg_status st, const fg_error *err)
{
    void *state;
    const fg_comm_vtable *vt = fg_runtime_comm(rt, &state);
    if (!vt || !FG_HAS_FIELD(vt, fg_comm_vtable, abort) || !vt->abort || !vt->topology) return;
    fg_comm_topology topo = {sizeof topo, 0, 1, 0, 1, 0, 1};
    fg_error e = {0};
    if (vt->topology(state, &topo, &e) != FG_OK || topo.world_size < 2) return;
    vt->abort(state, fg_runtime_exit_code(rt, st), err->message[0] ? err->message : "error");
}

fg_status fg_runtime_run(fg_runtime *rt, fg_verb verb, fg_error *err)
{
    if (!rt->cfg)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur: run before configure");
    fg_status st = fg_runtime_init_plugins(rt, err);
    if (st == FG_OK) {
        const fg_trainer_verbs verbs = {fg_trainer_predict, fg_trainer_generate, fg_trainer_export};
        st = fg_trainer_run(rt, verb, &verbs, err);
    }
    /* every rank of an interrupted fit stopped at the same step: nothing to abort */
    if (st != FG_OK && st != FG_STATUS_SIGINT && st != FG_STATUS_SIGTERM) abort_job(rt, st, err);
    fg_runtime_deinit_plugins(rt);
    return st;
}
