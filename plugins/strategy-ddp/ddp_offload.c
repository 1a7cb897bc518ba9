/* strategy.ddp under offload_optimizer = host: each rank keeps the f32 master and the
 * optimizer state of the whole model in host memory and runs the same host update from the
 * same averaged gradients, so the replicas stay equal without sending parameters. */
#include "ddp.h"

/* The replica's parameters must be the f32 master: under a mixed mode ddp's replica keeps
 * an f32 master of its own beside the half working copy, which the host update would
 * leave stale. Refused, naming what works. */
static fg_status refuse_mixed(ddp *d, fg_error *err)
{
    fg_memory_report m = {sizeof m, 0, 0, 0, 0, 0, 0, 0};
    fg_status st = d->svc->memory(d->svc->ctx, d->replica, &m, err);
    if (st != FG_OK || m.master_bytes == 0) return st;
    return fg_error_set(err, FG_UNAVAILABLE, "[%s] offload_optimizer = host under ddp runs "
                        "fp32 parameters only (this run keeps half working parameters beside "
                        "an f32 master); use [precision] name = fp32, or strategy sharded "
                        "(stages 1-2) or single, which offload the master of a mixed mode",
                        d->host->section);
}

fg_status ddp_offload_setup(ddp *d, fg_error *err)
{
    const fg_train_services *svc = d->svc;
    d->ckpt = (fg_plugin_replica_state){.be = d->be, .be_state = d->be_state, .svc = svc,
                                        .stage = d->replica, .device = d->device};
    if (!d->offload) return FG_OK;
    fg_status st = refuse_mixed(d, err);
    if (st != FG_OK) return st;
    fg_offload_spec o = {.host = d->host, .who = "strategy.ddp", .be = d->be,
                         .be_state = d->be_state, .svc = svc, .stage = d->replica,
                         .device = d->device, .lo = 0, .count = svc->param_count};
    int64_t at, n;
    d->params = svc->region(svc->ctx, d->replica, FG_REGION_PARAMS, 0, &o.pdt, &at, &n);
    svc->region(svc->ctx, d->replica, FG_REGION_GRADS, 0, &o.gdt, &at, &n);
    st = fg_offload_create(&o, &d->off, err);
    if (st != FG_OK) return st;
    d->ckpt.offload = d->off;
    if (d->topo.rank == 0) fg_offload_log_setup(d->off);
    return FG_OK;
}
