/* strategy.model-parallel: pipeline stages on the devices of one process (mp.h says how a
 * step runs). Checkpoints are the plain model, gathered from the stages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"
#include "plugin_created.h"
#include "strategy_entries.h"
#include "stage_metrics.h"

static const fg_option options[] = {
    {"split", FG_OPT_LIST, "", 1, 0, NULL,
     "layers that start a new stage, in model order (split = conv2, fc1: three stages); "
     "empty: `stages` stages balanced as `balance` says"},
    {"balance", FG_OPT_ENUM, "flops", 1, 0, "flops|memory",
     "what an unsplit pipeline evens out: each stage's forward FLOPs (its share of the "
     "step's time), or its bytes of parameters, gradients, optimizer state and activations "
     "(what fits on a device)"},
    {"stages", FG_OPT_INT, "0", 0, MP_MAX_STAGES, NULL,
     "stages when split is empty, stage s on device s; 0: one per backend device"},
    {"chunks", FG_OPT_INT, "1", 1, MP_MAX_CHUNKS, NULL,
     "micro-batches each batch is cut into (GPipe): more keep the stages busier; batch norm "
     "then normalises over each micro-batch"},
    {"dp_replicas", FG_OPT_INT, "1", 1, 64, NULL,
     "data-parallel copies of the pipeline on the next devices: each batch is split over "
     "them, gradients summed into the first, parameters copied back"},
};

/* "fc2, fc3": two layers start stages after the first one's. */
static int split_stages(const char *split)
{
    int n = 2;
    for (const char *p = split; *p; p++) n += *p == ',';
    return n;
}

static fg_status read_keys(mp *d, fg_error *err)
{
    const fg_host *h = d->host;
    int64_t stages = 0, chunks = 1, replicas = 1;
    d->split = "";
    h->get_string(h, "split", &d->split);
    const char *balance = "flops";
    h->get_string(h, "balance", &balance);
    d->balance_memory = strcmp(balance, "memory") == 0;
    h->get_int(h, "stages", &stages);
    h->get_int(h, "chunks", &chunks);
    h->get_int(h, "dp_replicas", &replicas);
    d->replicas = (int)replicas;
    d->stages = (int)stages;
    d->chunks = (int)chunks;
    return FG_OK;
}

static fg_status bind_backend(mp *d, fg_error *err)
{
    const fg_host *h = d->host;
    const void *vt = NULL;
    fg_error e = {0};
    if (h->find_plugin(h, FG_KIND_BACKEND, &vt, &d->be_state, &e) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "strategy.model-parallel: %s", e.message);
    d->be = vt;
    if (!d->be->device_count || !d->be->copy || !d->be->alloc || !d->be->queue_sync)
        return fg_error_set(err, FG_INCOMPATIBLE, "strategy.model-parallel: the backend lacks "
                            "device_count, alloc, copy or queue_sync");
    return d->be->device_count(d->be_state, &d->device_count, err);
}

static fg_status mp_init(const fg_host *host, void **state, fg_error *err)
{
    mp *d = calloc(1, sizeof *d);
    if (!d) return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.model-parallel: out of memory");
    d->host = host;
    fg_status st = read_keys(d, err);
    if (st == FG_OK) st = bind_backend(d, err);
    return FG_PLUGIN_CREATED(st, d, state, free);
}

static void mp_deinit(void *state) { free(state); }

/* Before setup the plan is not made: the devices it will take. */
static fg_status mp_info(void *state, fg_strategy_info *out, fg_error *err)
{
    (void)err;
    const mp *d = state;
    int per = d->replicas > 0 ? d->device_count / d->replicas : d->device_count;
    int stages = d->s ? d->stages : *d->split ? split_stages(d->split)
               : d->stages ? d->stages : per > 0 ? per : 1;
    int devices = stages * d->replicas;
    out->launch_mode = FG_LAUNCH_ONE_PROCESS;
    out->needs_comm = 0;
    out->devices = devices;
    if (FG_HAS_FIELD(out, fg_strategy_info, world_size)) {
        out->rank = 0;
        out->world_size = 1;
    }
    return FG_OK;
}

/* Floats per sample at the output of layer i (i = -1: the model's input is not needed). */
static int64_t out_elems(const fg_train_services *svc, int i)
{
    fg_layer_desc l = {sizeof l, NULL, 0, 0, 0, 0, 0, 0};
    if (i < 0 || svc->layer_info(svc->ctx, i, &l, NULL) != FG_OK) return 0;
    return l.out_elems;
}

/* The replica all-reduce of a pipeline run whole on one copy (chunks = 1, dp_replicas = 1):
 * each layer lives on one stage, which sees the whole batch, so the sum over the replicas
 * holding it is its own and nothing moves. With micro-batches or copies the layer's
 * statistics would need the others' in the middle of a pipelined forward: no all-reduce
 * is offered then, and the trainer refuses [model] sync_batchnorm. */
static fg_status whole_batch_allreduce(void *user, void *queue, double *buf, int64_t count,
                                       fg_error *err)
{
    (void)user, (void)queue, (void)buf, (void)count, (void)err;
    return FG_OK;
}

static fg_status create_stage(mp *d, mp_stage *g, fg_error *err)
{
    const fg_train_services *svc = d->svc;
    fg_stage_spec spec = {sizeof spec, .device = g->device, .max_batch = d->micro,
                          .first_layer = g->first_layer, .layer_count = g->layer_count,
                          .chunks = d->chunks};
    fg_status st = svc->create(svc->ctx, &spec, &g->stage, err);
    if (st != FG_OK) return st;
    if (d->chunks == 1 && d->replicas == 1 &&
        FG_HAS_FIELD(svc, fg_train_services, set_replica_allreduce)) /* a 1.8 host */
        svc->set_replica_allreduce(svc->ctx, g->stage, whole_batch_allreduce, NULL);
    uint32_t dt;
    int64_t n;
    g->queue = svc->queue(svc->ctx, g->stage);
    g->params = svc->region(svc->ctx, g->stage, FG_REGION_PARAMS, 0, &dt, &g->param_offset,
                            &g->param_count);
    g->grads = svc->region(svc->ctx, g->stage, FG_REGION_GRADS, 0, &dt, &g->param_offset, &n);
    g->buffers = svc->region(svc->ctx, g->stage, FG_REGION_BUFFERS, 0, &dt, &g->buffer_offset,
                             &g->buffer_count);
    g->in_elems = out_elems(svc, g->first_layer - 1);
    g->out_elems = out_elems(svc, g->first_layer + g->layer_count - 1);
    size_t rows = (size_t)d->chunks * (size_t)d->micro;
    if (g->index > 0)
        st = d->be->alloc(d->be_state, g->device, rows * (size_t)g->in_elems * sizeof(float),
                          (void **)&g->recv_x, err);
    if (st == FG_OK && g->index + 1 < d->stages)
        st = d->be->alloc(d->be_state, g->device, rows * (size_t)g->out_elems * sizeof(float),
                          (void **)&g->recv_dy, err);
    if (st == FG_OK && d->replicas > 1 && g->replica == 0 && g->param_count)
        st = d->be->alloc(d->be_state, g->device, (size_t)g->param_count * sizeof(float),
                          (void **)&g->recv_grad, err);
    return st;
}

static fg_status mp_setup(void *state, const fg_train_services *svc, fg_error *err)
{
    mp *d = state;
    d->svc = svc;
    /* The largest micro-batch: a pipeline's shard over chunks, or up to 3 for a batch too
     * small for parts of two samples (mp_split). */
    int small = svc->max_batch < 3 ? svc->max_batch : 3;
    int shard = (svc->max_batch + d->replicas - 1) / d->replicas;
    d->micro = (shard + d->chunks - 1) / d->chunks;
    if (d->micro < small) d->micro = small;
    size_t parts = (size_t)d->replicas * (size_t)d->chunks;
    if (!(d->at = calloc(parts, sizeof *d->at)) || !(d->rows = calloc(parts, sizeof *d->rows)) ||
        !(d->used = calloc((size_t)d->replicas, sizeof *d->used)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.model-parallel: out of memory");
    fg_status st = mp_plan(d, err);
    for (int s = 0; st == FG_OK && s < d->stages * d->replicas; s++)
        st = create_stage(d, &d->s[s], err);
    if (st == FG_OK) st = mp_workers_start(d, err);
    return st;
}

static void report_totals(mp *d)
{
    if (d->steps <= 0 || d->total_step_s <= 0) return;
    int all = d->stages * d->replicas;
    double busy = d->total_busy_s / ((double)all * d->total_step_s);
    double ideal = (double)(d->stages - 1) / (double)(d->chunks + d->stages - 1);
    char per[512];
    size_t used = 0;
    for (int s = 0; s < all && used < sizeof per; s++)
        used += (size_t)snprintf(per + used, sizeof per - used, "%s%.2f", s ? " " : "",
                                 1e3 * d->s[s].total_busy_s / (double)d->steps);
    d->host->log(d->host, FG_LOG_INFO, "%lld steps: %.2f ms a step in the pipeline, stages "
                 "busy %.0f%% of it (bubble %.0f%%; GPipe's bubble for %d stages and %d "
                 "micro-batches is %.0f%%); busy ms a step by stage: %s", (long long)d->steps,
                 1e3 * d->total_step_s / (double)d->steps, 100 * busy, 100 * (1 - busy),
                 d->stages, d->chunks, 100 * ideal, per);
}

static void mp_teardown(void *state)
{
    mp *d = state;
    if (!d->svc) return;
    mp_workers_stop(d);
    report_totals(d);
    for (int s = 0; d->s && s < d->stages * d->replicas; s++) {
        mp_stage *g = &d->s[s];
        if (g->recv_grad) d->be->free(d->be_state, g->device, g->recv_grad);
        if (g->recv_x) d->be->free(d->be_state, g->device, g->recv_x);
        if (g->recv_dy) d->be->free(d->be_state, g->device, g->recv_dy);
        if (g->stage) d->svc->destroy(d->svc->ctx, g->stage);
    }
    free(d->s);
    free(d->at);
    free(d->rows);
    free(d->used);
    d->s = NULL;
    d->at = d->rows = d->used = NULL;
    d->svc = NULL;
}

static fg_status mp_train_step(void *state, const fg_batch *batch, int micro_index, int final,
                               float grad_scale, fg_error *err)
{
    (void)micro_index; /* each stage accumulates after its first backward of the step */
    (void)final;
    mp *d = state;
    mp_split(d, batch, grad_scale);
    d->synced = 0;
    double t0 = mp_now();
    d->fwd_done_at = t0;
    fg_status st = mp_run(d, MP_JOB_TRAIN, err);
    double t1 = mp_now();
    d->step_s += t1 - t0;
    d->fwd_s += d->fwd_done_at - t0;
    d->bwd_s += t1 - d->fwd_done_at;
    return st;
}

/* Where the step went: the stages' busy time against stages x the pipeline's time. */
static void report_step(mp *d)
{
    double busy = 0;
    int all = d->stages * d->replicas;
    for (int s = 0; s < all; s++) {
        busy += d->s[s].busy_s;
        d->s[s].total_busy_s += d->s[s].busy_s;
        d->s[s].busy_s = 0;
    }
    d->total_busy_s += busy;
    d->total_step_s += d->step_s;
    if (d->host->metric && d->step_s > 0) {
        /* the pipeline's wall time: until the last stage's last forward, then the rest */
        d->host->metric(d->host, "time/forward_s", d->fwd_s, d->steps);
        d->host->metric(d->host, "time/backward_s", d->bwd_s, d->steps);
        d->host->metric(d->host, "time/optimizer_s", d->opt_s, d->steps);
        d->host->metric(d->host, "pipeline/bubble_frac",
                        1.0 - busy / ((double)all * d->step_s), d->steps);
    }
    d->step_s = d->fwd_s = d->bwd_s = d->opt_s = 0;
}

/* With dp_replicas: pipeline 0's stages add the others' gradients (once a step). */
static fg_status mp_sync_grads(void *state, fg_error *err)
{
    mp *d = state;
    if (d->replicas == 1 || d->synced) return FG_OK;
    fg_status st = mp_run(d, MP_JOB_REDUCE, err);
    d->synced = st == FG_OK;
    return st;
}

static fg_status mp_optimizer_step(void *state, const fg_step_args *args, fg_error *err)
{
    mp *d = state;
    d->step = *args;
    double t0 = mp_now();
    fg_status st = mp_sync_grads(d, err);
    if (st == FG_OK) st = mp_run(d, MP_JOB_STEP, err);
    if (st == FG_OK && d->replicas > 1) st = mp_run(d, MP_JOB_PULL, err);
    d->opt_s = mp_now() - t0;
    d->synced = 0;
    for (int s = 0; s < d->stages * d->replicas; s++) d->s[s].has_grads = 0;
    d->steps++;
    report_step(d);
    return st;
}

static fg_status mp_eval_step(void *state, const fg_batch *batch, fg_error *err)
{
    mp *d = state;
    mp_split(d, batch, 0.0f);
    return mp_run(d, MP_JOB_EVAL, err);
}

/* The sums of every pipeline's last stage. */
static fg_status mp_read_metrics(void *state, int reset, fg_step_metrics *out, fg_error *err)
{
    mp *d = state;
    out->loss_sum = out->correct = out->count = 0;
    fg_status st = FG_OK;
    for (int r = 0; st == FG_OK && r < d->replicas; r++)
        st = fg_plugin_add_stage_metrics(d->svc, mp_stage_at(d, r, d->stages - 1)->stage, reset,
                                         out, err);
    return st;
}

static void *mp_primary(void *state)
{
    (void)state;
    return NULL; /* no device holds the whole model: gather_state */
}

/* Pipeline 0's stages (after sync_grads they hold the sums). */
static fg_status mp_grad_norm_sq(void *state, double *out, fg_error *err)
{
    mp *d = state;
    *out = 0;
    for (int s = 0; s < d->stages; s++) {
        double part = 0;
        const mp_stage *g = &d->s[s];
        fg_status st = d->svc->grad_norm_sq(d->svc->ctx, g->stage, g->param_offset,
                                            g->param_count, &part, err);
        if (st != FG_OK) return st;
        *out += part;
    }
    return FG_OK;
}

static fg_status mp_scale_grads(void *state, float factor, float clamp, fg_error *err)
{
    mp *d = state;
    for (int s = 0; s < d->stages; s++) {
        const mp_stage *g = &d->s[s];
        fg_status st = d->svc->scale_grads(d->svc->ctx, g->stage, g->param_offset,
                                           g->param_count, factor, clamp, err);
        if (st != FG_OK) return st;
    }
    return FG_OK;
}

FG_PLUGIN_DEFINE_VTABLE(fg_strategy_vtable, FG_KIND_STRATEGY, 0, "model-parallel", "1.0.0",
                        "pipeline: layers split into stages on the devices of one process, "
                        "micro-batches on a GPipe schedule",
                        FG_PLUGIN_OPTIONS(options), mp_init, mp_deinit,
                        FG_PLUGIN_STRATEGY_STATE_ENTRIES(mp_));
