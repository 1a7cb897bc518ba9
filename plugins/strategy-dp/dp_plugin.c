/* strategy.dp: data parallel over the devices of one process (dp.h says how a step runs).
 * Checkpoints are replica 0's: the plain model, loadable under any strategy. */
#include <stdlib.h>
#include <string.h>

#include "dp.h"
#include "plugin_created.h"
#include "strategy_entries.h"
#include "stage_metrics.h"

static const fg_option options[] = {
    {"devices", FG_OPT_INT, "0", 0, DP_MAX_DEVICES, NULL,
     "backend devices to train on, 0..devices-1; 0: every device of the backend"},
};

static fg_status bind_backend(dp *d, int64_t devices, fg_error *err)
{
    const fg_host *h = d->host;
    const void *vt = NULL;
    fg_error e = {0};
    if (h->find_plugin(h, FG_KIND_BACKEND, &vt, &d->be_state, &e) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "strategy.dp: %s", e.message);
    d->be = vt;
    if (!d->be->device_count || !d->be->copy || !d->be->axpy || !d->be->queue_sync)
        return fg_error_set(err, FG_INCOMPATIBLE, "strategy.dp: the backend lacks "
                            "device_count, copy, axpy or queue_sync");
    int count = 0;
    fg_status st = d->be->device_count(d->be_state, &count, err);
    if (st != FG_OK) return st;
    if (devices > count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] devices = %lld, but the backend has "
                            "%d device(s) (the cpu backend makes more with [backend] devices = N)",
                            h->section, (long long)devices, count);
    d->devices = devices > 0 ? (int)devices : count;
    if (d->devices < 1)
        return fg_error_set(err, FG_UNAVAILABLE, "strategy.dp: the backend has no devices");
    return FG_OK;
}

static fg_status dp_init(const fg_host *host, void **state, fg_error *err)
{
    dp *d = calloc(1, sizeof *d);
    if (!d) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.dp: out of memory");
    d->host = host;
    int64_t devices = 0;
    host->get_int(host, "devices", &devices);
    fg_status st = bind_backend(d, devices, err);
    return FG_PLUGIN_CREATED(st, d, state, free);
}

static void dp_deinit(void *state) { free(state); }

static fg_status dp_info(void *state, fg_strategy_info *out, fg_error *err)
{
    (void)err;
    const dp *d = state;
    out->launch_mode = FG_LAUNCH_ONE_PROCESS;
    out->needs_comm = 0;
    out->devices = d->devices;
    if (FG_HAS_FIELD(out, fg_strategy_info, world_size)) {
        out->rank = 0;
        out->world_size = 1;
    }
    return FG_OK;
}

/* Replica i on device i. Only replica 0 steps the optimizer: the others get no optimizer
 * state where the host can leave it out. */
static fg_status create_replica(dp *d, int i, fg_error *err)
{
    const fg_train_services *svc = d->svc;
    dp_replica *w = &d->r[i];
    w->d = d;
    w->index = i;
    w->device = i;
    fg_stage_spec spec = {sizeof spec, .device = i, .max_batch = svc->max_batch,
                          .opt_range = i > 0};
    fg_status st = svc->create(svc->ctx, &spec, &w->replica, err);
    if (st != FG_OK) return st;
    uint32_t dt;
    int64_t at, n;
    w->params = svc->region(svc->ctx, w->replica, FG_REGION_PARAMS, 0, &dt, &at, &n);
    w->grads = svc->region(svc->ctx, w->replica, FG_REGION_GRADS, 0, &dt, &at, &n);
    w->queue = svc->queue(svc->ctx, w->replica);
    w->buffers = svc->region(svc->ctx, w->replica, FG_REGION_BUFFERS, 0, &dt, &at, &n);
    if (FG_HAS_FIELD(svc, fg_train_services, set_replica_allreduce)) /* a 1.8 host */
        svc->set_replica_allreduce(svc->ctx, w->replica, dp_allreduce_sum, w);
    return FG_OK;
}

static fg_status dp_setup(void *state, const fg_train_services *svc, fg_error *err)
{
    dp *d = state;
    d->svc = svc;
    d->r = calloc((size_t)d->devices, sizeof *d->r);
    if (!d->r) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.dp: out of memory");
    fg_status st = FG_OK;
    for (int i = 0; i < d->devices && st == FG_OK; i++) st = create_replica(d, i, err);
    if (st == FG_OK && d->devices > 1)
        st = d->be->alloc(d->be_state, 0, (size_t)svc->param_count * sizeof(float),
                          (void **)&d->recv, err);
    if (st == FG_OK) st = dp_workers_start(d, err);
    if (st == FG_OK)
        d->host->log(d->host, FG_LOG_INFO, "%d replicas on devices 0..%d, one thread each; "
                     "gradients summed on device 0 and parameters copied back every step",
                     d->devices, d->devices - 1);
    return st;
}

static void dp_teardown(void *state)
{
    dp *d = state;
    if (!d->svc) return;
    dp_workers_stop(d);
    if (d->steps > 0)
        d->host->log(d->host, FG_LOG_INFO, "%lld steps: %.3f s summing gradients on device 0, "
                     "%.3f s copying parameters back (%.1f ms a step, nothing overlapped; "
                     "strategy.ddp overlaps its reduction with backward)", (long long)d->steps,
                     d->total_reduce_s, d->total_broadcast_s,
                     1e3 * (d->total_reduce_s + d->total_broadcast_s) / (double)d->steps);
    if (d->recv) d->be->free(d->be_state, 0, d->recv);
    dp_allreduce_free(d);
    for (int i = 0; d->r && i < d->devices; i++)
        if (d->r[i].replica) d->svc->destroy(d->svc->ctx, d->r[i].replica);
    free(d->r);
    d->r = NULL;
    d->recv = NULL;
    d->svc = NULL;
}

static fg_status dp_train_step(void *state, const fg_batch *batch, int micro_index, int final,
                               float grad_scale, fg_error *err)
{
    (void)micro_index;
    (void)final; /* the reduction waits for sync_grads or optimizer_step */
    dp *d = state;
    dp_split(d, batch, grad_scale);
    dp_allreduce_begin(d);
    d->synced = 0;
    return dp_run(d, DP_JOB_TRAIN, err);
}

static fg_status dp_sync_grads(void *state, fg_error *err) { return dp_reduce(state, err); }

static fg_status dp_optimizer_step(void *state, const fg_step_args *args, fg_error *err)
{
    dp *d = state;
    fg_status st = dp_reduce(d, err);
    if (st == FG_OK)
        st = d->svc->optimizer_step(d->svc->ctx, d->r[0].replica, args, 0, d->svc->param_count,
                                    NULL, NULL, err);
    if (st == FG_OK) st = dp_broadcast(d, err);
    for (int i = 0; i < d->devices; i++) d->r[i].has_grads = 0;
    d->synced = 0;
    d->steps++;
    if (st == FG_OK) dp_report_step(d);
    return st;
}

static fg_status dp_eval_step(void *state, const fg_batch *batch, fg_error *err)
{
    dp *d = state;
    dp_split(d, batch, 0.0f);
    return dp_run(d, DP_JOB_EVAL, err);
}

static fg_status dp_read_metrics(void *state, int reset, fg_step_metrics *out, fg_error *err)
{
    dp *d = state;
    out->loss_sum = out->correct = out->count = 0;
    fg_status st = FG_OK;
    for (int i = 0; st == FG_OK && i < d->devices; i++)
        st = fg_plugin_add_stage_metrics(d->svc, d->r[i].replica, reset, out, err);
    return st;
}

static void *dp_primary(void *state) { return ((dp *)state)->r[0].replica; }

/* After sync_grads the sum is in replica 0: its norm and scale are the model's. */
static fg_status dp_grad_norm_sq(void *state, double *out, fg_error *err)
{
    dp *d = state;
    return d->svc->grad_norm_sq(d->svc->ctx, d->r[0].replica, 0, d->svc->param_count, out, err);
}

static fg_status dp_scale_grads(void *state, float s, float clamp, fg_error *err)
{
    dp *d = state;
    return d->svc->scale_grads(d->svc->ctx, d->r[0].replica, 0, d->svc->param_count, s, clamp,
                               err);
}

static fg_status dp_memory_report(void *state, int i, fg_memory_report *out, fg_error *err)
{
    dp *d = state;
    if (i < 0 || i >= d->devices)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "strategy.dp drives %d devices, not "
                            "device %d", d->devices, i);
    fg_status st = d->svc->memory(d->svc->ctx, d->r[i].replica, out, err);
    if (st == FG_OK && i == 0 && d->recv)
        out->other_bytes += (uint64_t)d->svc->param_count * sizeof(float);
    return st;
}

FG_PLUGIN_DEFINE_VTABLE(fg_strategy_vtable, FG_KIND_STRATEGY, 0, "dp", "1.0.0",
                        "data parallel in one process: each batch split over N devices, gradients "
                        "summed on device 0, parameters copied back (use ddp for speed)",
                        FG_PLUGIN_OPTIONS(options), dp_init, dp_deinit,
                        FG_PLUGIN_STRATEGY_ENTRIES(dp_));
