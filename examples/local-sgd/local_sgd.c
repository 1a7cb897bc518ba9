/* strategy.local_sgd: local SGD (periodic parameter averaging), an out-of-tree example.
 *
 * Each rank trains its own replica on its shard of the data and steps alone; every `k`
 * optimizer steps the parameters are averaged across ranks with one all_reduce. With
 * k = 1 and plain SGD this is data parallel; a larger k trades gradient freshness for k
 * times fewer collectives. Optimizer state (momentum) stays local, as in Lin et al.,
 * "Don't Use Large Mini-Batches, Use Local SGD" (2020). The final model is rank 0's,
 * averaged at the last multiple of k.
 *
 * It needs nothing but the SDK headers: the core hands it the model as replicas
 * (fg_train_services) and the [comm] plugin does the collectives. */
#include <stdlib.h>

#include "fulgur/backend.h"
#include "fulgur/comm.h"
#include "fulgur/strategy.h"

typedef struct local_sgd {
    const fg_host *host;
    const fg_comm_vtable *comm;
    void *comm_state;
    const fg_backend_vtable *be;
    void *be_state;
    fg_comm_topology topo;
    int64_t k;
    int device;
    const fg_train_services *svc;
    void *replica;
    int64_t steps;
    int64_t averages;
} local_sgd;

static const fg_option options[] = {
    {"k", FG_OPT_INT, "8", 1, 1000000, NULL, "average the parameters across ranks every k steps"},
    {"device", FG_OPT_INT, "-1", -1, 4096, NULL,
     "backend device of this rank; -1: local rank modulo the backend's device count"},
};

static fg_status find_peers(local_sgd *s, int64_t device, fg_error *err)
{
    const fg_host *h = s->host;
    const void *vt = NULL;
    fg_error e = {0};
    if (h->find_plugin(h, FG_KIND_COMM, &vt, &s->comm_state, &e) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "strategy.local_sgd needs a [comm] "
                            "section (name = mpi); run it with mpirun -n N fulgur fit CONFIG");
    s->comm = vt;
    if (!s->comm->topology || !s->comm->all_reduce || !s->comm->broadcast)
        return fg_error_set(err, FG_INCOMPATIBLE, "strategy.local_sgd: the comm lacks "
                            "topology/all_reduce/broadcast");
    s->topo.struct_size = sizeof s->topo;
    fg_status st = s->comm->topology(s->comm_state, &s->topo, err);
    if (st != FG_OK) return st;
    if (h->find_plugin(h, FG_KIND_BACKEND, &vt, &s->be_state, err) != FG_OK) return FG_NOT_FOUND;
    s->be = vt;
    int count = 1;
    if (s->be->device_count && (st = s->be->device_count(s->be_state, &count, err)) != FG_OK) return st;
    if (count < 1) count = 1;
    if (device >= count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] device = %lld, the backend has %d",
                            h->section, (long long)device, count);
    s->device = device >= 0 ? (int)device : s->topo.local_rank % count;
    return FG_OK;
}

static fg_status lsgd_init(const fg_host *host, void **state, fg_error *err)
{
    local_sgd *s = calloc(1, sizeof *s);
    if (!s) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.local_sgd: out of memory");
    s->host = host;
    s->k = 8;
    int64_t device = -1;
    host->get_int(host, "k", &s->k);
    host->get_int(host, "device", &device);
    fg_status st = find_peers(s, device, err);
    if (st != FG_OK) {
        free(s);
        return st;
    }
    *state = s;
    return FG_OK;
}

static void lsgd_deinit(void *state) { free(state); }

static fg_status lsgd_info(void *state, fg_strategy_info *out, fg_error *err)
{
    (void)err;
    const local_sgd *s = state;
    out->launch_mode = FG_LAUNCH_PROCESS_PER_DEVICE;
    out->needs_comm = 1;
    out->devices = 1;
    if (FG_HAS_FIELD(out, fg_strategy_info, world_size)) {
        out->rank = s->topo.rank;
        out->world_size = s->topo.world_size;
    }
    return FG_OK;
}

/* The replica's parameters: device memory of *dtype holding *count elements, waited for
 * (the comm reads host memory on the CPU backend). */
static fg_status params_ready(local_sgd *s, void **p, uint32_t *dtype, int64_t *count,
                              fg_error *err)
{
    const fg_train_services *svc = s->svc;
    int64_t offset;
    *p = svc->region(svc->ctx, s->replica, FG_REGION_PARAMS, 0, dtype, &offset, count);
    if (!*p) return fg_error_set(err, FG_INTERNAL, "local_sgd: the replica holds no parameters");
    return s->be->queue_sync(s->be_state, svc->queue(svc->ctx, s->replica), err);
}

static fg_status average_params(local_sgd *s, fg_error *err)
{
    void *p;
    uint32_t dt;
    int64_t n;
    fg_status st = params_ready(s, &p, &dt, &n, err);
    if (st == FG_OK)
        st = s->comm->all_reduce(s->comm_state, NULL, p, (size_t)n, dt, FG_REDUCE_AVG, err);
    s->averages++;
    return st;
}

static fg_status lsgd_setup(void *state, const fg_train_services *svc, fg_error *err)
{
    local_sgd *s = state;
    s->svc = svc;
    /* The whole model on this rank's device; each rank draws its own dropout masks. */
    fg_stage_spec spec = {sizeof spec, .device = s->device, .max_batch = svc->max_batch,
                          .rng_stream = (uint64_t)s->topo.rank};
    fg_status st = svc->create(svc->ctx, &spec, &s->replica, err);
    if (st != FG_OK) return st;
    /* Start equal: rank 0's parameters everywhere. */
    void *p;
    uint32_t dt;
    int64_t n;
    st = params_ready(s, &p, &dt, &n, err);
    if (st == FG_OK) st = s->comm->broadcast(s->comm_state, NULL, p, (size_t)n, dt, 0, err);
    if (st == FG_OK && s->topo.rank == 0)
        s->host->log(s->host, FG_LOG_INFO, "local SGD on %d ranks: parameters averaged every %lld "
                     "steps", s->topo.world_size, (long long)s->k);
    return st;
}

static void lsgd_teardown(void *state)
{
    local_sgd *s = state;
    if (s->replica) s->svc->destroy(s->svc->ctx, s->replica);
    if (s->topo.rank == 0 && s->steps > 0)
        s->host->log(s->host, FG_LOG_INFO, "%lld steps, %lld parameter averages",
                     (long long)s->steps, (long long)s->averages);
    s->replica = NULL;
}

static fg_status lsgd_train_step(void *state, const fg_batch *batch, int micro_index, int final,
                                 float grad_scale, fg_error *err)
{
    (void)final; /* parameters, not gradients, are synchronised: nothing to skip */
    local_sgd *s = state;
    const fg_train_services *svc = s->svc;
    fg_status st = svc->forward(svc->ctx, s->replica, 0, batch, 0, NULL, 1, err);
    return st == FG_OK ? svc->backward(svc->ctx, s->replica, 0, NULL, grad_scale, micro_index > 0, err)
                       : st;
}

/* A step the loss scaler skips (args->skip) updates nothing and does not count. */
static fg_status lsgd_optimizer_step(void *state, const fg_step_args *args, fg_error *err)
{
    local_sgd *s = state;
    fg_status st = s->svc->optimizer_step(s->svc->ctx, s->replica, args, 0, s->svc->param_count,
                                          NULL, NULL, err);
    if (st == FG_OK && !args->skip && ++s->steps % s->k == 0) st = average_params(s, err);
    return st;
}

static fg_status lsgd_eval_step(void *state, const fg_batch *batch, fg_error *err)
{
    local_sgd *s = state;
    return s->svc->forward(s->svc->ctx, s->replica, 0, batch, 0, NULL, 0, err);
}

static fg_status lsgd_read_metrics(void *state, int reset, fg_step_metrics *out, fg_error *err)
{
    local_sgd *s = state;
    fg_status st = s->svc->read_metrics(s->svc->ctx, s->replica, reset, out, err);
    if (st != FG_OK) return st;
    double sums[3] = {out->loss_sum, out->correct, out->count};
    st = s->comm->all_reduce(s->comm_state, NULL, sums, 3, FG_F64, FG_REDUCE_SUM, err);
    out->loss_sum = sums[0];
    out->correct = sums[1];
    out->count = sums[2];
    return st;
}

static void *lsgd_primary(void *state) { return ((local_sgd *)state)->replica; }

FG_PLUGIN_DEFINE_VTABLE(fg_strategy_vtable, FG_KIND_STRATEGY, 0, "local_sgd", "1.0.0",
                        "local SGD: every rank steps alone, parameters averaged every k steps",
                        FG_PLUGIN_OPTIONS(options), lsgd_init, lsgd_deinit,
                        .info = lsgd_info, .setup = lsgd_setup, .teardown = lsgd_teardown,
                        .train_step = lsgd_train_step, .optimizer_step = lsgd_optimizer_step,
                        .eval_step = lsgd_eval_step, .read_metrics = lsgd_read_metrics,
                        .primary_replica = lsgd_primary);
