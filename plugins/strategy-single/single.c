/* strategy.single: one replica on one device; the step is forward, backward, update
 * (on the device, or on the host under offload_optimizer = host). */
#include <stdlib.h>

#include "fulgur/strategy.h"
#include "offload_optimizer.h"
#include "replica_state.h"

typedef struct single {
    const fg_host *host;
    const fg_train_services *svc;
    int device;
    void *replica;
    int offload;             /* offload_optimizer = host */
    fg_offload *off;         /* its host master and state */
    void *params, *grads;    /* the replica's working params and gradients (offload) */
    fg_plugin_replica_state ckpt;
} single;

static const fg_option options[] = {
    {"device", FG_OPT_INT, "0", 0, 4096, NULL, "index of the backend device to train on"},
    FG_OFFLOAD_OPTION,
};

static fg_status single_init(const fg_host *host, void **state, fg_error *err)
{
    single *s = calloc(1, sizeof *s);
    if (!s) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.single: out of memory");
    s->host = host;
    int64_t device = 0;
    host->get_int(host, "device", &device);
    s->device = (int)device;
    s->offload = fg_offload_wanted(host);
    *state = s;
    return FG_OK;
}

static void single_deinit(void *state) { free(state); }

static fg_status single_info(void *state, fg_strategy_info *out, fg_error *err)
{
    out->launch_mode = FG_LAUNCH_ONE_PROCESS;
    out->needs_comm = 0;
    out->devices = 1;
    if (FG_HAS_FIELD(out, fg_strategy_info, world_size)) {
        out->rank = 0;
        out->world_size = 1;
    }
    /* Gradients and parameters reach it only through the services (clipping, optimizer,
     * checkpoints), which handle half storage. */
    if (FG_HAS_FIELD(out, fg_strategy_info, half_storage)) out->half_storage = 1;
    /* Offloading, the f32 master is the host's (own_master: the device keeps the half
     * working copy alone), and the update reads the host's copy of the gradients: the
     * trainer clips them on the device before it (the host path, no primary_grads). */
    const single *s = state;
    if (s->offload && FG_HAS_FIELD(out, fg_strategy_info, own_master)) out->own_master = 1;
    /* one replica: its gradients are the model's, its update the only one */
    if (FG_HAS_FIELD(out, fg_strategy_info, primary_grads)) out->primary_grads = !s->offload;
    return FG_OK;
}

static fg_status find_backend(single *s, const fg_backend_vtable **be, void **bs, fg_error *err)
{
    const void *vt = NULL;
    fg_error e = {0};
    if (s->host->find_plugin(s->host, FG_KIND_BACKEND, &vt, bs, &e) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "strategy.single: %s", e.message);
    *be = vt;
    return FG_OK;
}

/* offload_optimizer = host: the replica keeps no optimizer state; the host keeps the f32
 * master and the state. A "true" half mode has no master to keep: refused. */
static fg_status setup_offload(single *s, fg_error *err)
{
    const fg_train_services *svc = s->svc;
    fg_offload_spec o = {.host = s->host, .who = "strategy.single",
                         .svc = svc, .stage = s->replica, .device = s->device, .lo = 0,
                         .count = svc->param_count};
    fg_status st = find_backend(s, &o.be, &o.be_state, err);
    if (st != FG_OK) return st;
    int64_t at, n;
    s->params = svc->region(svc->ctx, s->replica, FG_REGION_PARAMS, 0, &o.pdt, &at, &n);
    s->grads = svc->region(svc->ctx, s->replica, FG_REGION_GRADS, 0, &o.gdt, &at, &n);
    int owned = FG_HAS_FIELD(svc, fg_train_services, strategy_master) && svc->strategy_master;
    if (o.pdt != FG_F32 && !owned)
        return fg_error_set(err, FG_UNAVAILABLE, "[%s] offload_optimizer = host keeps an f32 "
                            "master of %s parameters, which a 'true' half precision mode does "
                            "not have; use bf16-mixed or fp16-mixed", s->host->section,
                            fg_dtype_name((fg_dtype)o.pdt));
    st = fg_offload_check_grad_dtype(s->host, "strategy.single", o.gdt, err);
    if (st == FG_OK) st = fg_offload_create(&o, &s->off, err);
    if (st != FG_OK) return st;
    s->ckpt.offload = s->off;
    fg_offload_log_setup(s->off);
    return FG_OK;
}

static fg_status single_setup(void *state, const fg_train_services *svc, fg_error *err)
{
    single *s = state;
    s->svc = svc;
    fg_stage_spec spec = {sizeof spec, .device = s->device, .max_batch = svc->max_batch,
                          .opt_range = s->offload, .opt_offset = 0, .opt_count = 0};
    fg_status st = svc->create(svc->ctx, &spec, &s->replica, err);
    s->ckpt = (fg_plugin_replica_state){.svc = svc, .stage = s->replica, .device = s->device};
    if (st == FG_OK) st = find_backend(s, &s->ckpt.be, &s->ckpt.be_state, err);
    return st == FG_OK && s->offload ? setup_offload(s, err) : st;
}

static void single_teardown(void *state)
{
    single *s = state;
    fg_offload_log_totals(s->off);
    fg_offload_destroy(s->off);
    s->off = NULL;
    if (s->replica) s->svc->destroy(s->svc->ctx, s->replica);
    s->replica = NULL;
}

static fg_status single_train_step(void *state, const fg_batch *batch, int micro_index,
                                   int final, float grad_scale, fg_error *err)
{
    single *s = state;
    const fg_train_services *svc = s->svc;
    fg_status st = svc->forward(svc->ctx, s->replica, 0, batch, 0, NULL, 1, err);
    return st == FG_OK ? svc->backward(svc->ctx, s->replica, 0, NULL, grad_scale, micro_index > 0, err)
                       : st;
}

static fg_status single_optimizer_step(void *state, const fg_step_args *args, fg_error *err)
{
    single *s = state;
    if (s->off) return fg_offload_step(s->off, args, s->params, s->grads, err);
    return s->svc->optimizer_step(s->svc->ctx, s->replica, args, 0, s->svc->param_count, NULL,
                                  NULL, err);
}

static fg_status single_gather_state(void *state, float *params, float *buffers,
                                     float *opt_state, fg_error *err)
{
    return fg_plugin_replica_gather(&((single *)state)->ckpt, params, buffers, opt_state, err);
}

static fg_status single_scatter_state(void *state, const float *opt_state, fg_error *err)
{
    return fg_plugin_replica_scatter(&((single *)state)->ckpt, opt_state, err);
}

static fg_status single_eval_step(void *state, const fg_batch *batch, fg_error *err)
{
    single *s = state;
    return s->svc->forward(s->svc->ctx, s->replica, 0, batch, 0, NULL, 0, err);
}

static fg_status single_read_metrics(void *state, int reset, fg_step_metrics *out, fg_error *err)
{
    single *s = state;
    return s->svc->read_metrics(s->svc->ctx, s->replica, reset, out, err);
}

static void *single_primary(void *state) { return ((single *)state)->replica; }

static fg_status single_grad_norm_sq(void *state, double *out, fg_error *err)
{
    single *s = state;
    return s->svc->grad_norm_sq(s->svc->ctx, s->replica, 0, s->svc->param_count, out, err);
}

static fg_status single_scale_grads(void *state, float factor, float clamp, fg_error *err)
{
    single *s = state;
    return s->svc->scale_grads(s->svc->ctx, s->replica, 0, s->svc->param_count, factor, clamp, err);
}

static fg_status single_memory_report(void *state, int i, fg_memory_report *out, fg_error *err)
{
    single *s = state;
    if (i != 0) return fg_error_set(err, FG_INVALID_ARGUMENT, "strategy.single drives one device, not %d", i + 1);
    return s->svc->memory(s->svc->ctx, s->replica, out, err);
}

FG_PLUGIN_DEFINE_VTABLE(fg_strategy_vtable, FG_KIND_STRATEGY, 0, "single", "1.0.0",
                        "one device, one replica: forward, backward, optimizer step",
                        FG_PLUGIN_OPTIONS(options), single_init, single_deinit,
                        .info = single_info, .setup = single_setup, .teardown = single_teardown,
                        .train_step = single_train_step, .optimizer_step = single_optimizer_step,
                        .eval_step = single_eval_step, .read_metrics = single_read_metrics,
                        .primary_replica = single_primary,
                        .sync_grads = NULL, /* one replica: nothing to reduce */
                        .grad_norm_sq = single_grad_norm_sq, .scale_grads = single_scale_grads,
                        .memory_report = single_memory_report, .gather_state = single_gather_state,
                        .scatter_state = single_scatter_state);
