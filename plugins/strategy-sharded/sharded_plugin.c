/* strategy.sharded: ZeRO stages 1, 2 and 3 (see sharded.h), one process per device under
 * mpirun. The trainer sees ddp's contract: every rank steps on its shard of each batch,
 * sync_grads finishes the reduction (sums divided by the world size), grad_norm_sq is the
 * global squared norm (the shards' sums all-reduced), scale_grads scales this rank's
 * gradients, and optimizer_step updates this rank's shard of the parameters only. */
#include <stdlib.h>
#include <string.h>

#include "rank_peers.h"
#include "sharded.h"
#include "strategy_entries.h"

static const fg_option options[] = {
    {"stage", FG_OPT_INT, "2", 1, 3, NULL,
     "ZeRO stage: 1 shards the optimizer state, 2 also the gradients, 3 also the parameters"},
    {"bucket_mb", FG_OPT_FLOAT, "25", 1e-6, 1e6, NULL,
     "gradient bucket size in MiB: a bucket's reduction starts as soon as its gradients are "
     "final, overlapping the rest of backward (stages 2-3: two buffers of at least the "
     "largest layer)"},
    {"device", FG_OPT_INT, "-1", -1, 4096, NULL,
     "backend device of this rank; -1: local rank modulo the backend's device count"},
    {"sharded_checkpoint", FG_OPT_BOOL, "false", 0, 0, NULL,
     "checkpoints as one file per rank (its shard) plus an index, nothing gathered; "
     "`fulgur ckpt merge INDEX -o OUT` makes the one ordinary file of them"},
    FG_OFFLOAD_OPTION,
};

static fg_status bind_peers(sharded *s, int64_t device, fg_error *err)
{
    fg_status st = fg_plugin_find_rank_comm(s->host, "strategy.sharded", &s->comm,
                                            &s->comm_state, err);
    if (st != FG_OK) return st;
    if (!FG_HAS_FIELD(s->comm, fg_comm_vtable, all_gather_v_start) || !s->comm->topology ||
        !s->comm->all_reduce || !s->comm->all_reduce_start || !s->comm->wait || !s->comm->test ||
        !s->comm->send || !s->comm->recv || !s->comm->reduce_scatter_v_start ||
        !s->comm->all_gather_v_start)
        return fg_error_set(err, FG_INCOMPATIBLE, "strategy.sharded: the [comm] plugin lacks "
                            "started collectives with per-rank counts (reduce_scatter_v_start, "
                            "all_gather_v_start) or send/recv");
    s->topo.struct_size = sizeof s->topo;
    st = s->comm->topology(s->comm_state, &s->topo, err);
    if (st != FG_OK) return st;
    st = fg_plugin_bind_rank_device(s->host, "strategy.sharded", device, s->topo.local_rank,
                                    &s->be, &s->be_state, &s->device, err);
    if (st == FG_OK && (!s->be->axpy || !s->be->sum_squares || !s->be->scale || !s->be->fill))
        return fg_error_set(err, FG_INCOMPATIBLE, "strategy.sharded: the backend lacks "
                            "axpy/sum_squares/scale/fill");
    return st;
}

static fg_status sh_init(const fg_host *host, void **state, fg_error *err)
{
    sharded *s = calloc(1, sizeof *s);
    if (!s) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.sharded: out of memory");
    s->host = host;
    int64_t device = -1, stage = 2;
    s->bucket_mb = 25;
    host->get_float(host, "bucket_mb", &s->bucket_mb);
    host->get_int(host, "device", &device);
    host->get_int(host, "stage", &stage);
    host->get_bool(host, "sharded_checkpoint", &s->per_rank_ckpt);
    s->stage = (int)stage;
    s->offload = fg_offload_wanted(host);
    fg_status st = s->offload && s->stage == 3
                 ? fg_error_set(err, FG_UNAVAILABLE, "[%s] offload_optimizer = host with stage "
                                "= 3 is not supported (the parameters themselves are sharded; "
                                "offload covers stages 1 and 2); use stage = 1 or 2",
                                host->section)
                 : bind_peers(s, device, err);
    if (st != FG_OK) {
        free(s);
        return st;
    }
    s->slot[0].layer = s->slot[1].layer = -1;
    *state = s;
    return FG_OK;
}

static void sh_deinit(void *state) { free(state); }

static fg_status sh_info(void *state, fg_strategy_info *out, fg_error *err)
{
    (void)err;
    const sharded *s = state;
    out->launch_mode = FG_LAUNCH_PROCESS_PER_DEVICE;
    out->needs_comm = 1;
    out->devices = 1;
    if (FG_HAS_FIELD(out, fg_strategy_info, world_size)) {
        out->rank = s->topo.rank;
        out->world_size = s->topo.world_size;
    }
    /* every stage keeps the f32 master of its shard under mixed precision (half replica) */
    if (FG_HAS_FIELD(out, fg_strategy_info, own_master))
        out->half_storage = out->own_master = 1;
    return FG_OK;
}

static fg_status dev_alloc(sharded *s, int64_t floats, float **p, const char *what, fg_error *err)
{
    fg_error e = {0};
    fg_status st = s->be->alloc(s->be_state, s->device, (size_t)(floats > 0 ? floats : 1) * sizeof(float),
                                (void **)p, &e);
    if (st != FG_OK) {
        *p = NULL;
        return fg_error_set(err, st, "strategy.sharded: allocating the %s (%lld floats) on "
                            "device %d: %s", what, (long long)floats, s->device, e.message);
    }
    return FG_OK;
}

/* Layer ranges, shard geometry, and the bucket and working buffer sizes. */
/* The layers with parameters and their ranges, in model order, and the model layer ->
 * that index map the layer memory hook reads. */
static fg_status plan_layers(sharded *s, fg_error *err)
{
    const fg_train_services *svc = s->svc;
    s->model_layers = svc->layer_count;
    s->param_layer = calloc((size_t)s->model_layers + 1, sizeof *s->param_layer);
    s->layer_off = calloc((size_t)s->model_layers + 1, sizeof *s->layer_off);
    s->layer_n = calloc((size_t)s->model_layers + 1, sizeof *s->layer_n);
    if (!s->param_layer || !s->layer_off || !s->layer_n)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.sharded: out of memory");
    s->layers = 0;
    for (int32_t i = 0; i < s->model_layers; i++) {
        fg_layer_desc d = {sizeof d, NULL, 0, 0, 0, 0, 0, 0};
        fg_status st = svc->layer_info(svc->ctx, i, &d, err);
        if (st != FG_OK) return st;
        s->param_layer[i] = d.param_count ? s->layers : -1;
        if (!d.param_count) continue;
        s->layer_off[s->layers] = d.param_offset;
        s->layer_n[s->layers++] = d.param_count;
    }
    return FG_OK;
}

static fg_status plan(sharded *s, fg_error *err)
{
    const fg_train_services *svc = s->svc;
    int n = s->topo.world_size;
    s->P = svc->param_count;
    int64_t per = (s->P + n - 1) / n;
    s->S = (per + SHARD_ALIGN - 1) / SHARD_ALIGN * SHARD_ALIGN;
    s->lo = (int64_t)s->topo.rank * s->S;
    s->mine = sh_piece(s, s->topo.rank, 0, s->P);
    fg_status st = plan_layers(s, err);
    if (st != FG_OK) return st;
    s->counts = calloc((size_t)n, sizeof *s->counts);
    if (!s->counts) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.sharded: out of memory");
    double elems = s->bucket_mb * 1024.0 * 1024.0 / sizeof(float);
    s->bucket_elems = elems < 1 ? 1 : (int64_t)elems;
    /* A bucket buffer holds at least one layer with the padding above it. */
    s->cap = s->bucket_elems;
    s->work_cap = 1;
    for (int k = 0; k < s->layers; k++) {
        int64_t top = k + 1 < s->layers ? s->layer_off[k + 1] : s->P;
        if (top - s->layer_off[k] > s->cap) s->cap = top - s->layer_off[k];
        if (s->layer_n[k] > s->work_cap) s->work_cap = s->layer_n[k];
    }
    if (s->cap > s->P) s->cap = s->P > 0 ? s->P : 1;
    s->max_ar = (int)(s->P / s->bucket_elems) + 2;
    return FG_OK;
}

/* Floats that hold n half elements (rounded up). */
static int64_t half_floats(int64_t n) { return (n + 1) / 2; }

static fg_status alloc_buffers(sharded *s, fg_error *err)
{
    const fg_train_services *svc = s->svc;
    fg_status st = dev_alloc(s, 1, &s->scalar, "norm scalar", err);
    int64_t mine = s->gsz == 2 ? half_floats(s->mine) : s->mine;
    int64_t cap = s->gsz == 2 ? half_floats(s->cap) : s->cap;
    int64_t pmine = s->psz == 2 ? half_floats(s->mine) : s->mine;
    int64_t work = s->psz == 2 ? half_floats(s->work_cap) : s->work_cap;
    if (st == FG_OK && s->stage == 1 && !(s->ar_req = calloc((size_t)s->max_ar, sizeof *s->ar_req)))
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.sharded: out of memory");
    if (st == FG_OK && s->stage >= 2) st = dev_alloc(s, mine, &s->gshard, "gradient shard", err);
    for (int i = 0; st == FG_OK && s->stage >= 2 && i < 2; i++)
        st = dev_alloc(s, cap, &s->bk[i].buf, "gradient bucket buffer", err);
    if (st == FG_OK && s->stage == 3) st = dev_alloc(s, pmine, &s->pshard, "parameter shard", err);
    for (int i = 0; st == FG_OK && s->stage == 3 && i < 2; i++)
        st = dev_alloc(s, work, &s->slot[i].buf, "working parameter buffer", err);
    if (st == FG_OK && s->stage == 3 && !s->master)
        st = svc->read_init_params(svc->ctx, s->replica, s->lo, s->mine, s->pshard, err);
    if (st == FG_OK && s->stage == 3 && s->master && s->mine) /* the half working shard */
        st = s->be->cast(s->be_state, s->queue, s->pdt, FG_F32, s->pshard, s->master,
                         (size_t)s->mine, err);
    return st;
}

/* Every rank starts from rank 0's parameters (equal by seed already: this catches a rank
 * whose config differs in the seed). Stage 3 reads its shard from the same seeded values. */
static fg_status broadcast_params(sharded *s, fg_error *err)
{
    fg_status st = s->be->queue_sync(s->be_state, s->queue, err);
    if (st != FG_OK || s->stage == 3) return st;
    return s->comm->broadcast(s->comm_state, NULL, s->params, (size_t)s->P, s->pdt, 0, err);
}

/* The replica's storage dtypes. Half ones come only to stage 1 (the only stage that
 * declares half storage) under a mixed mode whose master this rank keeps for its shard:
 * the f32 master shard starts from the seeded (or resumed) parameters. */
static fg_status setup_storage(sharded *s, fg_error *err)
{
    const fg_train_services *svc = s->svc;
    int typed = FG_HAS_FIELD(svc, fg_train_services, param_dtype);
    s->pdt = typed ? svc->param_dtype : FG_F32;
    s->gdt = typed ? svc->grad_dtype : FG_F32;
    s->psz = fg_dtype_size((fg_dtype)s->pdt);
    s->gsz = fg_dtype_size((fg_dtype)s->gdt);
    if (s->pdt == FG_F32 && s->gdt == FG_F32) return FG_OK;
    int owned = FG_HAS_FIELD(svc, fg_train_services, strategy_master) && svc->strategy_master;
    if (!owned || s->pdt != s->gdt)
        return fg_error_set(err, FG_UNAVAILABLE, "[%s] stage = %d: %s parameters with %s "
                            "gradients%s are not supported; strategy.sharded runs half storage "
                            "under a mixed mode (bf16-mixed, fp16-mixed) only",
                            s->host->section, s->stage, fg_dtype_name((fg_dtype)s->pdt),
                            fg_dtype_name((fg_dtype)s->gdt),
                            owned ? "" : " and no f32 master (a 'true' half mode)");
    const uint32_t half[2] = {s->gdt, s->gdt}, to_half[2] = {s->pdt, FG_F32};
    if (!fg_backend_can(s->be, s->be_state, FG_OP_CAST, to_half) ||
        !fg_backend_can(s->be, s->be_state, FG_OP_SCALE, half) ||
        !fg_backend_can(s->be, s->be_state, FG_OP_SUM_SQUARES, half) ||
        !fg_backend_can(s->be, s->be_state, FG_OP_CLAMP, half) ||
        !fg_backend_can(s->be, s->be_state, FG_OP_AXPY, half))
        return fg_error_set(err, FG_INCOMPATIBLE, "strategy.sharded: half storage needs the "
                            "backend's cast, scale, sum_squares, clamp and axpy in %s",
                            fg_dtype_name((fg_dtype)s->gdt));
    fg_status st = FG_OK; /* offloading, the master shard is the host's (sharded_offload.c) */
    if (!s->offload) st = dev_alloc(s, s->mine, &s->master, "f32 master shard", err);
    if (st == FG_OK && !s->offload)
        st = svc->read_init_params(svc->ctx, s->replica, s->lo, s->mine, s->master, err);
    if (st == FG_OK && s->stage >= 2)
        st = dev_alloc(s, half_floats(s->cap), &s->zeros, "zero padding", err);
    if (st == FG_OK && s->stage >= 2)
        st = s->be->fill(s->be_state, s->queue, FG_F32, s->zeros, 0.0f,
                         (size_t)half_floats(s->cap), err);
    return st;
}

/* A core that does not honour own_master (older, or without strategy_master) keeps the f32
 * master whole in the replica with a half working copy beside it (master_bytes > 0). Stage
 * 1 runs on that as ddp does. Stage 2 hands the layers their parameters through the layer
 * memory hook, which then carries f32 only: refused here, at setup, rather than at the
 * first forward. (Stage 3's replica is refused by the core when it is created.) */
static fg_status refuse_half_layers(sharded *s, fg_error *err)
{
    fg_memory_report m = {sizeof m, 0, 0, 0, 0, 0, 0, 0};
    fg_status st = s->svc->memory(s->svc->ctx, s->replica, &m, err);
    if (st != FG_OK || s->stage == 1 || m.master_bytes == 0) return st;
    return fg_error_set(err, FG_UNAVAILABLE, "[%s] stage = %d with half working parameters "
                        "(mixed precision): the layers' parameters come through the layer "
                        "memory hook, which carries f32 only; use stage = 1 (f32 master "
                        "weights whole on every rank, optimizer state sharded) or precision "
                        "fp32", s->host->section, s->stage);
}

static fg_status sh_setup(void *state, const fg_train_services *svc, fg_error *err)
{
    sharded *s = state;
    s->svc = svc;
    fg_status st = plan(s, err);
    if (st != FG_OK) return st;
    /* rank r draws its dropout masks from stream r, as under ddp */
    fg_stage_spec spec = {sizeof spec, .device = s->device, .max_batch = svc->max_batch,
                          .no_params = s->stage == 3, .no_grads = s->stage != 1, .opt_range = 1,
                          .opt_offset = s->lo, .opt_count = s->offload ? 0 : s->mine,
                          .rng_stream = (uint64_t)s->topo.rank};
    st = svc->create(svc->ctx, &spec, &s->replica, err);
    if (st != FG_OK) return st;
    st = refuse_half_layers(s, err);
    if (st != FG_OK) return st;
    uint32_t dt;
    int64_t at, count;
    s->queue = svc->queue(svc->ctx, s->replica);
    s->params = svc->region(svc->ctx, s->replica, FG_REGION_PARAMS, 0, &dt, &at, &count);
    s->grads = svc->region(svc->ctx, s->replica, FG_REGION_GRADS, 0, &dt, &at, &count);
    st = setup_storage(s, err);
    if (st == FG_OK) st = sh_offload_setup(s, err);
    if (st == FG_OK) st = alloc_buffers(s, err);
    if (st == FG_OK) st = broadcast_params(s, err);
    s->buffers = (fg_plugin_rank0_buffers){.be = s->be, .be_state = s->be_state,
                                           .comm = s->comm, .comm_state = s->comm_state,
                                           .device = s->device, .rank = s->topo.rank,
                                           .world_size = s->topo.world_size};
    fg_plugin_rank0_buffers_bind(&s->buffers, svc, s->replica);
    s->allreduce = (fg_plugin_comm_allreduce){.comm = s->comm, .comm_state = s->comm_state,
                                              .be = s->be, .be_state = s->be_state,
                                              .who = "strategy.sharded"};
    if (FG_HAS_FIELD(svc, fg_train_services, set_replica_allreduce)) /* a 1.8 host */
        svc->set_replica_allreduce(svc->ctx, s->replica, fg_plugin_comm_allreduce_sum,
                                   &s->allreduce);
    if (st == FG_OK) st = fg_plugin_rank0_buffers_sync(&s->buffers, err);
    if (st != FG_OK) return st;
    if (s->stage == 1) svc->set_grad_ready_hook(svc->ctx, s->replica, sh_on_grad_ready, s);
    else svc->set_layer_memory_hook(svc->ctx, s->replica, sh_memory_hook, s);
    if (s->topo.rank == 0)
        s->host->log(s->host, FG_LOG_INFO, "stage %d on %d ranks: shards of %lld of %lld "
                     "floats, buckets of %lld floats, bucket buffers 2 x %lld floats, working "
                     "parameter buffers 2 x %lld floats", s->stage, s->topo.world_size,
                     (long long)s->S, (long long)s->P, (long long)s->bucket_elems,
                     (long long)(s->stage >= 2 ? s->cap : 0),
                     (long long)(s->stage == 3 ? s->work_cap : 0));
    return FG_OK;
}

static void sh_teardown(void *state)
{
    sharded *s = state;
    if (!s->svc) return;
    sh_drain(s);
    sh_eval_release(s);
    if (s->topo.rank == 0) fg_offload_log_totals(s->off);
    fg_offload_destroy(s->off);
    s->off = NULL;
    if (s->replica) fg_plugin_rank0_buffers_report(&s->buffers, s->host);
    if (s->replica) {
        if (s->stage == 1) s->svc->set_grad_ready_hook(s->svc->ctx, s->replica, NULL, NULL);
        else s->svc->set_layer_memory_hook(s->svc->ctx, s->replica, NULL, NULL);
        s->svc->destroy(s->svc->ctx, s->replica);
    }
    float *bufs[] = {s->scalar, s->gshard, s->bk[0].buf, s->bk[1].buf, s->pshard, s->slot[0].buf,
                     s->slot[1].buf, s->master, s->zeros};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) s->be->free(s->be_state, s->device, bufs[i]);
    free(s->layer_off);
    free(s->layer_n);
    free(s->param_layer);
    free(s->counts);
    free(s->ar_req);
    s->svc = NULL;
    s->replica = NULL;
}

static fg_status fwd_bwd(sharded *s, const fg_batch *batch, float grad_scale, int accumulate,
                         fg_error *err)
{
    const fg_train_services *svc = s->svc;
    int64_t reduced = s->allreduce.calls;
    fg_status st = svc->forward(svc->ctx, s->replica, 0, batch, 0, NULL, 1, err);
    /* batch norm under [model] sync_batchnorm updated every rank's running statistics from
     * the same sums: they stay equal without rank 0's broadcast */
    if (s->allreduce.calls == reduced) s->buffers.stale = s->buffers.data != NULL;
    return st == FG_OK ? svc->backward(svc->ctx, s->replica, 0, NULL, grad_scale, accumulate, err)
                       : st;
}

static fg_status sh_train_step(void *state, const fg_batch *batch, int micro_index, int final,
                               float grad_scale, fg_error *err)
{
    sharded *s = state;
    fg_status st;
    if (s->stage == 1) {
        sh_ar_begin(s, final != 0);
        st = fwd_bwd(s, batch, grad_scale, micro_index > 0, err);
        if (!final) return st;
        if (st != FG_OK) {
            sh_drain(s);
            return st;
        }
        return sh_ar_flush(s, err);
    }
    /* stages 2-3: every micro-batch is reduced; the shard accumulates */
    sh_rs_begin(s, micro_index);
    st = fwd_bwd(s, batch, grad_scale, 0, err);
    if (st == FG_OK) st = sh_rs_flush(s, err);
    if (st != FG_OK) sh_drain(s);
    return st;
}

/* This rank's reduced gradients: f32, or half (gdt) in stage 1 under mixed precision. */
static float *shard_grads(sharded *s)
{
    return s->stage == 1 ? sh_at(s->grads, s->lo, s->gsz) : s->gshard;
}

static fg_status scale_shard(sharded *s, float factor, fg_error *err)
{
    return s->be->scale(s->be_state, s->queue, s->gdt, shard_grads(s), factor, (size_t)s->mine,
                        err);
}

static fg_status sh_sync_grads(void *state, fg_error *err)
{
    sharded *s = state;
    if (s->synced) return FG_OK;
    fg_status st = s->stage == 1 ? sh_ar_wait(s, err) : sh_rs_wait_all(s, err);
    if (st == FG_OK && s->topo.world_size > 1 && s->mine)
        st = scale_shard(s, 1.0f / (float)s->topo.world_size, err);
    s->synced = st == FG_OK;
    return st;
}

static fg_status sh_optimizer_step(void *state, const fg_step_args *args, fg_error *err)
{
    sharded *s = state;
    fg_status st = sh_sync_grads(s, err);
    s->steps++;
    s->synced = 0;
    sh_eval_release(s);
    float *params = s->master ? s->master : s->stage == 3 ? s->pshard : s->params + s->lo;
    if (st == FG_OK && s->off)
        st = sh_offload_step(s, args, err); /* the working shard comes back from the host */
    else if (st == FG_OK)
        st = s->svc->optimizer_step(s->svc->ctx, s->replica, args, s->lo, s->mine, params,
                                    shard_grads(s), err);
    /* mixed precision: the updated f32 master shard, rounded, is this rank's working shard */
    if (st == FG_OK && s->master && s->mine)
        st = s->be->cast(s->be_state, s->queue, s->pdt, FG_F32,
                         s->stage == 3 ? (void *)s->pshard : sh_at(s->params, s->lo, s->psz),
                         s->master, (size_t)s->mine, err);
    if (s->stage == 3) sh_slots_invalidate(s);
    else if (st == FG_OK) st = sh_gather_params(s, shard_grads(s), err);
    return st;
}

/* The shards' sums of squares, summed across ranks: the norm of the whole gradient. */
static fg_status sh_grad_norm_sq(void *state, double *out, fg_error *err)
{
    sharded *s = state;
    float host = 0;
    fg_status st = FG_OK;
    if (s->mine) {
        st = s->be->sum_squares(s->be_state, s->queue, s->gdt, shard_grads(s), (size_t)s->mine,
                                s->scalar, err);
        if (st == FG_OK) st = s->be->copy(s->be_state, s->queue, &host, -1, s->scalar, s->device, sizeof host, err);
        if (st == FG_OK) st = s->be->queue_sync(s->be_state, s->queue, err);
    }
    double sum = host;
    if (st == FG_OK) st = s->comm->all_reduce(s->comm_state, NULL, &sum, 1, FG_F64, FG_REDUCE_SUM, err);
    *out = sum;
    return st;
}

static fg_status sh_scale_grads(void *state, float factor, float clamp, fg_error *err)
{
    sharded *s = state;
    fg_status st = FG_OK;
    if (!s->mine) return FG_OK;
    if (factor != 1.0f) st = scale_shard(s, factor, err);
    if (st == FG_OK && clamp > 0) {
        if (!FG_HAS_FIELD(s->be, fg_backend_vtable, clamp) || !s->be->clamp)
            return fg_error_set(err, FG_UNAVAILABLE, "the backend cannot clamp gradients "
                                "(gradient_clip_algorithm = value); use norm");
        st = s->be->clamp(s->be_state, s->queue, s->gdt, shard_grads(s), -clamp, clamp,
                          (size_t)s->mine, err);
    }
    return st;
}

static fg_status sh_eval_step(void *state, const fg_batch *batch, fg_error *err)
{
    sharded *s = state;
    fg_status st = s->stage == 3 ? sh_eval_gather(s, err) : FG_OK;
    return st == FG_OK ? s->svc->forward(s->svc->ctx, s->replica, 0, batch, 0, NULL, 0, err) : st;
}

static fg_status sh_read_metrics(void *state, int reset, fg_step_metrics *out, fg_error *err)
{
    sharded *s = state;
    fg_status st = s->svc->read_metrics(s->svc->ctx, s->replica, reset, out, err);
    if (st != FG_OK || s->topo.world_size == 1) return st;
    st = fg_plugin_sum_metrics(s->comm, s->comm_state, out, err);
    if (st == FG_OK && s->buffers.stale) st = fg_plugin_rank0_buffers_sync(&s->buffers, err);
    return st;
}

/* Stages 1-2 keep the whole model's parameters in the replica; stage 3 does not. */
static void *sh_primary(void *state)
{
    sharded *s = state;
    return s->stage < 3 ? s->replica : NULL;
}

FG_PLUGIN_DEFINE_VTABLE(fg_strategy_vtable, FG_KIND_STRATEGY, 0, "sharded", "1.0.0",
                        "ZeRO sharding, one process per device: optimizer state (stage 1), "
                        "gradients (2) and parameters (3) split across ranks",
                        FG_PLUGIN_OPTIONS(options), sh_init, sh_deinit,
                        FG_PLUGIN_STRATEGY_STATE_ENTRIES(sh_),
                        .shard_describe = sh_shard_describe,
                        .shard_read = sh_shard_read);
