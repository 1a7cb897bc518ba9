/* strategy.sharded under offload_optimizer = host (stages 1-2): this rank's shard of the f32
 * master and of the optimizer state live in host memory; the reduced gradient shard is
 * copied there, updated on the host, and the working shard copied back before the
 * all-gather. Stage 3 is refused at init. */
#include "sharded.h"

fg_status sh_offload_setup(sharded *s, fg_error *err)
{
    if (!s->offload) return FG_OK;
    fg_offload_spec o = {.host = s->host, .who = "strategy.sharded", .be = s->be,
                         .be_state = s->be_state, .svc = s->svc, .stage = s->replica,
                         .device = s->device, .lo = s->lo, .count = s->mine, .pdt = s->pdt,
                         .gdt = s->gdt};
    fg_status st = fg_offload_create(&o, &s->off, err);
    if (st == FG_OK && s->topo.rank == 0) fg_offload_log_setup(s->off);
    return st;
}

fg_status sh_offload_step(sharded *s, const fg_step_args *args, fg_error *err)
{
    void *grads = s->stage == 1 ? sh_at(s->grads, s->lo, s->gsz) : (void *)s->gshard;
    return fg_offload_step(s->off, args, sh_at(s->params, s->lo, s->psz), grads, err);
}

const float *sh_master(const sharded *s, int *dev)
{
    *dev = s->off ? -1 : s->device;
    if (s->off) return s->pdt != FG_F32 ? fg_offload_master(s->off) : NULL;
    return s->master;
}

float *sh_state_slot(sharded *s, int i, int *dev)
{
    *dev = s->off ? -1 : s->device;
    if (s->off) return fg_offload_slot(s->off, i);
    uint32_t dt;
    int64_t at, n;
    return s->svc->region(s->svc->ctx, s->replica, FG_REGION_OPT_STATE, i, &dt, &at, &n);
}
