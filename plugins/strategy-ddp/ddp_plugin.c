/* strategy.ddp: distributed data parallel, one process per device (started by mpirun).
 *
 * Every rank holds the whole model. setup broadcasts rank 0's parameters; each final
 * micro-batch's gradients are summed across ranks in buckets that overlap backward
 * (ddp_buckets.c), divided by the world size, and every rank applies the same update, so
 * the replicas stay equal without ever sending parameters again. Non-final micro-batches
 * of gradient accumulation reduce nothing (PyTorch's no_sync). Metrics are summed across
 * ranks when read; evaluation is local (the sampler gives each rank an exact shard).
 * Model buffers (batch-norm running statistics): rank 0's, broadcast when the metrics are
 * read (plugins/common/strategy_plugin.h). Dropout: each rank draws from its own stream (rank r: stream r).
 * [model] sync_batchnorm: the replica all-reduce sums batch-norm statistics across the ranks
 * through the comm (plugins/common/replica_allreduce.h). */
#include <stdlib.h>
#include <string.h>

#include "ddp.h"
#include "rank_peers.h"
#include "plugin_created.h"
#include "strategy_entries.h"

static const fg_option options[] = {
    {"bucket_mb", FG_OPT_FLOAT, "25", 1e-6, 1e6, NULL,
     "gradient bucket size in MiB: a bucket's all-reduce starts as soon as its gradients "
     "are final, overlapping the rest of backward"},
    {"device", FG_OPT_INT, "-1", -1, 4096, NULL,
     "backend device of this rank; -1: local rank modulo the backend's device count"},
    {"grad_comm_dtype", FG_OPT_ENUM, "fp32", 0, 0, "fp32|bf16",
     "dtype the gradients travel in: bf16 halves the all-reduce's bytes (PyTorch's "
     "bf16_compress_hook): each bucket is rounded to bf16, summed across ranks in bf16 and "
     "widened back before the average"},
    FG_OFFLOAD_OPTION,
};

/* The comm and backend this strategy drives, and the rank's device. */
static fg_status bind_peers(ddp *d, int64_t device, fg_error *err)
{
    fg_status st = fg_plugin_find_rank_comm(d->host, "strategy.ddp", &d->comm, &d->comm_state,
                                            err);
    if (st != FG_OK) return st;
    if (!FG_HAS_FIELD(d->comm, fg_comm_vtable, barrier) || !d->comm->topology ||
        !d->comm->all_reduce || !d->comm->broadcast)
        return fg_error_set(err, FG_INCOMPATIBLE, "strategy.ddp: the [comm] plugin lacks "
                            "topology/all_reduce/broadcast");
    d->overlap = FG_HAS_FIELD(d->comm, fg_comm_vtable, wait) && d->comm->all_reduce_start &&
                 d->comm->test && d->comm->wait;
    d->topo.struct_size = sizeof d->topo;
    st = d->comm->topology(d->comm_state, &d->topo, err);
    if (st != FG_OK) return st;
    return fg_plugin_bind_rank_device(d->host, "strategy.ddp", device, d->topo.local_rank,
                                      &d->be, &d->be_state, &d->device, err);
}

static fg_status ddp_init(const fg_host *host, void **state, fg_error *err)
{
    ddp *d = calloc(1, sizeof *d);
    if (!d) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.ddp: out of memory");
    d->host = host;
    int64_t device = -1;
    d->bucket_mb = 25;
    host->get_float(host, "bucket_mb", &d->bucket_mb);
    host->get_int(host, "device", &device);
    const char *comm_dtype = "fp32";
    host->get_string(host, "grad_comm_dtype", &comm_dtype);
    d->comm_dtype = strcmp(comm_dtype, "bf16") == 0 ? FG_BF16 : FG_F32;
    d->offload = fg_offload_wanted(host);
    fg_status st = d->bucket_mb > 0 ? bind_peers(d, device, err)
                                    : fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] bucket_mb "
                                                   "must be > 0", host->section);
    return FG_PLUGIN_CREATED(st, d, state, free);
}

static void ddp_deinit(void *state) { free(state); }

static fg_status ddp_info(void *state, fg_strategy_info *out, fg_error *err)
{
    const ddp *d = state;
    out->launch_mode = FG_LAUNCH_PROCESS_PER_DEVICE;
    out->needs_comm = 1;
    out->devices = 1;
    if (FG_HAS_FIELD(out, fg_strategy_info, world_size)) {
        out->rank = d->topo.rank;
        out->world_size = d->topo.world_size;
    }
    /* after sync_grads the replica holds the all-reduced gradients, and optimizer_step
     * updates every parameter from them: the clip norm is local to the rank */
    if (FG_HAS_FIELD(out, fg_strategy_info, primary_grads)) out->primary_grads = !d->offload;
    return FG_OK;
}

/* The bf16 copy of the gradients that grad_comm_dtype = bf16 all-reduces. */
static fg_status alloc_wire(ddp *d, uint32_t grad_dtype, fg_error *err)
{
    if (d->comm_dtype != FG_BF16) return FG_OK;
    if (grad_dtype != FG_F32)
        return fg_error_set(err, FG_INCOMPATIBLE, "[%s] grad_comm_dtype = bf16 rounds f32 "
                            "gradients for the wire; these are %s", d->host->section,
                            fg_dtype_name((fg_dtype)grad_dtype));
    return d->be->alloc(d->be_state, d->device, (size_t)d->svc->param_count * 2, &d->wire, err);
}

static fg_status ddp_setup(void *state, const fg_train_services *svc, fg_error *err)
{
    ddp *d = state;
    d->svc = svc;
    /* Equal masks on every rank would make dropout's noise the same N times over. */
    fg_stage_spec spec = {sizeof spec, .device = d->device, .max_batch = svc->max_batch,
                          .rng_stream = (uint64_t)d->topo.rank,
                          /* offloading: no optimizer state on the device */
                          .opt_range = d->offload, .opt_offset = 0, .opt_count = 0};
    fg_status st = svc->create(svc->ctx, &spec, &d->replica, err);
    if (st != FG_OK) return st;
    uint32_t dt, grad_dtype;
    int64_t at, n;
    d->grads = svc->region(svc->ctx, d->replica, FG_REGION_GRADS, 0, &grad_dtype, &at, &n);
    d->queue = svc->queue(svc->ctx, d->replica);
    d->native_queue = FG_HAS_FIELD(d->be, fg_backend_vtable, queue_native) && d->be->queue_native
                          ? d->be->queue_native(d->be_state, d->queue) : NULL;
    /* Buckets start and end on the device where the comm orders collectives by queues and
     * the backend's queue has a handle it can take (comm.nccl on backend.cuda). */
    d->device_ordered = d->overlap && d->native_queue &&
                        FG_HAS_FIELD(d->comm, fg_comm_vtable, wait_on_queue) && d->comm->wait_on_queue;
    d->allreduce = (fg_plugin_comm_allreduce){
        .comm = d->comm, .comm_state = d->comm_state, .be = d->be, .be_state = d->be_state,
        .native_queue = d->device_ordered ? d->native_queue : NULL, .who = "strategy.ddp"};
    if (FG_HAS_FIELD(svc, fg_train_services, set_replica_allreduce)) /* a 1.8 host */
        svc->set_replica_allreduce(svc->ctx, d->replica, fg_plugin_comm_allreduce_sum,
                                   &d->allreduce);
    d->buffers = (fg_plugin_rank0_buffers){.be = d->be, .be_state = d->be_state,
                                           .comm = d->comm, .comm_state = d->comm_state,
                                           .device = d->device, .rank = d->topo.rank,
                                           .world_size = d->topo.world_size};
    fg_plugin_rank0_buffers_bind(&d->buffers, svc, d->replica);
    /* Every rank starts from rank 0's parameters (equal by seed already; this is the
     * contract, and it catches a rank whose config differs in the seed). */
    void *params = svc->region(svc->ctx, d->replica, FG_REGION_PARAMS, 0, &dt, &at, &n);
    st = d->be->queue_sync(d->be_state, d->queue, err);
    if (st == FG_OK)
        st = d->comm->broadcast(d->comm_state, NULL, params, (size_t)svc->param_count, FG_F32, 0,
                                err);
    if (st == FG_OK) st = fg_plugin_rank0_buffers_sync(&d->buffers, err);
    if (st != FG_OK) return st;
    double elems = d->bucket_mb * 1024.0 * 1024.0 / sizeof(float);
    d->bucket_elems = elems < 1 ? 1 : (int64_t)elems;
    /* Every bucket but the last holds at least bucket_elems floats. */
    d->max_buckets = (int)(svc->param_count / d->bucket_elems) + 2;
    d->buckets = calloc((size_t)d->max_buckets, sizeof *d->buckets);
    if (!d->buckets) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.ddp: out of memory");
    if (st == FG_OK) st = alloc_wire(d, grad_dtype, err);
    if (st == FG_OK) st = ddp_offload_setup(d, err);
    if (st != FG_OK) return st;
    svc->set_grad_ready_hook(svc->ctx, d->replica, ddp_on_grad_ready, d);
    if (d->topo.rank == 0)
        d->host->log(d->host, FG_LOG_INFO, "%d ranks on %d node(s), buckets of %.3g MiB "
                     "(%lld floats), %s%s%s", d->topo.world_size, d->topo.node_count, d->bucket_mb,
                     (long long)d->bucket_elems,
                     d->overlap ? "all-reduces overlap backward" : "all-reduces after backward "
                     "(the comm has no all_reduce_start)",
                     d->wire ? ", gradients travel in bf16" : "",
                     d->device_ordered ? ", ordered on the device (no host synchronisation)" : "");
    return FG_OK;
}

static void ddp_teardown(void *state)
{
    ddp *d = state;
    if (!d->svc) return;
    ddp_buckets_drain(d);
    if (d->replica) { /* the digest reads the stage's buffers: before it goes */
        fg_plugin_rank0_buffers_report(&d->buffers, d->host);
        d->svc->set_grad_ready_hook(d->svc->ctx, d->replica, NULL, NULL);
        d->svc->destroy(d->svc->ctx, d->replica);
    }
    if (d->steps > 0 && d->topo.rank == 0) {
        double hidden = d->total_comm > 0 ? d->total_hidden / d->total_comm : 0;
        d->host->log(d->host, FG_LOG_INFO, "%lld steps: gradient all-reduce in flight %.3f s, "
                     "%.0f%% of it hidden behind backward; waited %.3f s after backward",
                     (long long)d->steps, d->total_comm, 100 * hidden, d->total_wait);
    }
    if (d->topo.rank == 0) fg_offload_log_totals(d->off);
    fg_offload_destroy(d->off);
    d->off = NULL;
    if (d->wire) d->be->free(d->be_state, d->device, d->wire);
    d->wire = NULL;
    free(d->buckets);
    d->buckets = NULL;
    d->replica = NULL;
    d->svc = NULL;
}

static fg_status ddp_train_step(void *state, const fg_batch *batch, int micro_index, int final,
                                float grad_scale, fg_error *err)
{
    ddp *d = state;
    ddp_buckets_begin(d, final != 0);
    double t0 = ddp_now();
    const fg_train_services *svc = d->svc;
    int64_t reduced = d->allreduce.calls;
    fg_status st = svc->forward(svc->ctx, d->replica, 0, batch, 0, NULL, 1, err);
    /* batch norm under [model] sync_batchnorm updated every rank's running statistics from
     * the same sums: they stay equal without rank 0's broadcast */
    if (d->allreduce.calls == reduced) d->buffers.stale = d->buffers.data != NULL;
    if (st == FG_OK)
        st = svc->backward(svc->ctx, d->replica, 0, NULL, grad_scale, micro_index > 0, err);
    d->timing.compute_start = t0;
    d->timing.backward_end = ddp_now();
    if (!final) return st;
    if (st != FG_OK) {
        ddp_buckets_drain(d);
        return st;
    }
    return ddp_buckets_flush(d, err);
}

/* Waits for every bucket and averages: after it, every rank holds the same gradients. Runs
 * once per step, from sync_grads (clipping) or from optimizer_step. */
static fg_status ddp_sync_grads(void *state, fg_error *err)
{
    ddp *d = state;
    if (d->synced) return FG_OK;
    fg_status st = ddp_buckets_wait(d, err);
    if (st != FG_OK) return st;
    ddp_report_step(d);
    if (d->topo.world_size > 1)
        st = d->be->scale(d->be_state, d->queue, FG_F32, d->grads,
                          1.0f / (float)d->topo.world_size, (size_t)d->svc->param_count, err);
    d->synced = st == FG_OK;
    return st;
}

static fg_status ddp_optimizer_step(void *state, const fg_step_args *args, fg_error *err)
{
    ddp *d = state;
    fg_status st = ddp_sync_grads(d, err);
    d->steps++;
    d->synced = 0;
    if (st == FG_OK && d->off) return fg_offload_step(d->off, args, d->params, d->grads, err);
    if (st == FG_OK)
        st = d->svc->optimizer_step(d->svc->ctx, d->replica, args, 0, d->svc->param_count, NULL,
                                    NULL, err);
    return st;
}

static fg_status ddp_gather_state(void *state, float *params, float *buffers,
                                  float *opt_state, fg_error *err)
{
    ddp *d = state; /* every rank holds the model; rank 0's is written */
    return d->topo.rank == 0 ? fg_plugin_replica_gather(&d->ckpt, params, buffers, opt_state, err)
                             : FG_OK;
}

/* Every rank is handed the file's optimizer state (the trainer reads it on each). */
static fg_status ddp_scatter_state(void *state, const float *opt_state, fg_error *err)
{
    return fg_plugin_replica_scatter(&((ddp *)state)->ckpt, opt_state, err);
}

/* The averaged gradients are the same on every rank: the local norm is the global one. */
static fg_status ddp_grad_norm_sq(void *state, double *out, fg_error *err)
{
    ddp *d = state;
    return d->svc->grad_norm_sq(d->svc->ctx, d->replica, 0, d->svc->param_count, out, err);
}

static fg_status ddp_scale_grads(void *state, float factor, float clamp, fg_error *err)
{
    ddp *d = state;
    return d->svc->scale_grads(d->svc->ctx, d->replica, 0, d->svc->param_count, factor, clamp, err);
}

static fg_status ddp_eval_step(void *state, const fg_batch *batch, fg_error *err)
{
    ddp *d = state;
    return d->svc->forward(d->svc->ctx, d->replica, 0, batch, 0, NULL, 0, err);
}

/* Local sums, then summed across ranks: every rank sees the global values. */
static fg_status ddp_read_metrics(void *state, int reset, fg_step_metrics *out, fg_error *err)
{
    ddp *d = state;
    fg_status st = d->svc->read_metrics(d->svc->ctx, d->replica, reset, out, err);
    if (st != FG_OK || d->topo.world_size == 1) return st;
    st = fg_plugin_sum_metrics(d->comm, d->comm_state, out, err);
    if (st == FG_OK && d->buffers.stale) st = fg_plugin_rank0_buffers_sync(&d->buffers, err);
    return st;
}

static void *ddp_primary(void *state) { return ((ddp *)state)->replica; }

static fg_status ddp_memory_report(void *state, int i, fg_memory_report *out, fg_error *err)
{
    ddp *s = state;
    if (i != 0) return fg_error_set(err, FG_INVALID_ARGUMENT, "strategy.ddp drives one device, not %d", i + 1);
    return s->svc->memory(s->svc->ctx, s->replica, out, err);
}

FG_PLUGIN_DEFINE_VTABLE(fg_strategy_vtable, FG_KIND_STRATEGY, 0, "ddp", "1.0.0",
                        "distributed data parallel: one process per device, bucketed gradient "
                        "all-reduce overlapping backward",
                        FG_PLUGIN_OPTIONS(options), ddp_init, ddp_deinit,
                        FG_PLUGIN_STRATEGY_STATE_ENTRIES(ddp_));
