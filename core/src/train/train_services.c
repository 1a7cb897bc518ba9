/* Stages as a strategy sees them: layers [first, first + count) of the model on one device
 * (the whole model is one stage) with the batch staging, metric scalars, optimizer and
 * activation arenas one training step needs. This file creates them and answers where
 * their memory is; train_stage_step.c runs their steps. Everything is allocated at
 * creation; a step only enqueues work. */
#include "train_stage.h"

#include <stdlib.h>
#include <string.h>

#include "init.h"
#include "train_stage_step.h"

#define CTX(p) ((fg_train_ctx *)(p))

static fg_status layer_info(void *ctx, int32_t layer, fg_layer_desc *out, fg_error *err)
{
    const fg_model *m = CTX(ctx)->model;
    if (layer < 0 || (size_t)layer >= fg_model_layer_count(m))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "layer %d: the model has %zu layers",
                            (int)layer, fg_model_layer_count(m));
    const fg_layer *l = fg_model_layer(m, (size_t)layer);
    size_t params = 0;
    for (int j = 0; j < l->param_count; j++)
        params += fg_model_tensor(m, l->param_tensor[j])->numel;
    size_t o = fg_shape_numel(&l->out);
    out->name = l->name;
    out->param_offset = out->param_count = 0;
    if (l->param_count) {
        const fg_tensor_info *a = fg_model_tensor(m, l->param_tensor[0]);
        const fg_tensor_info *b = fg_model_tensor(m, l->param_tensor[l->param_count - 1]);
        out->param_offset = (int64_t)a->offset;
        out->param_count = (int64_t)(b->offset + b->numel - a->offset);
    }
    out->param_bytes = (int64_t)(params * sizeof(float));
    out->activation_bytes = (int64_t)(((l->ops->flags & FG_LAYER_ALIAS) ? 0 : o * sizeof(float)) +
                                      l->aux_per_sample);
    out->out_elems = (int64_t)o;
    if (FG_HAS_FIELD(out, fg_layer_desc, flops))
        out->flops = l->ops->flops ? l->ops->flops(l) : (int64_t)o;
    return FG_OK;
}

/* Links s at the end of ctx's live stages; unlink takes it out. */
static void link_live(fg_train_ctx *c, fg_train_stage *s)
{
    fg_train_stage **at = &c->live;
    while (*at) at = &(*at)->next_live;
    *at = s;
}

static void unlink_live(fg_train_ctx *c, fg_train_stage *s)
{
    for (fg_train_stage **at = &c->live; *at; at = &(*at)->next_live)
        if (*at == s) {
            *at = s->next_live;
            return;
        }
}

int fg_train_live_stages(const fg_train_ctx *c, void **stages, int max)
{
    int n = 0;
    for (fg_train_stage *s = c->live; s; s = s->next_live, n++)
        if (n < max) stages[n] = s;
    return n;
}

static void stage_destroy(void *ctx, void *stage)
{
    fg_train_ctx *c = CTX(ctx);
    fg_train_stage *s = stage;
    if (!s) return;
    unlink_live(c, s);
    if (s->syncs && !s->allreduce) c->unserved_stages--;
    if (s->queue) c->be->queue_sync(c->bs, s->queue, NULL);
    fg_optimizer_destroy(s->opt);
    fg_batch_copier_destroy(s->copier);
    if (s->graph) c->be->graph_destroy(c->bs, s->graph);
    fg_pinned_ring_fini(&s->graph_ring);
    void *blocks[] = {s->x_act, s->metrics_dev, s->scratch_dev, s->graph_x, s->graph_y,
                      s->graph_values_dev, s->scaler_dev};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        if (blocks[i]) c->be->free(c->bs, s->device, blocks[i]);
    for (int i = s->chunks - 1; s->arena && i >= 0; i--) /* sharers before the owner */
        fg_replica_destroy(s->arena[i]);
    if (s->queue) c->be->queue_destroy(c->bs, s->queue);
    free(s->arena);
    free(s->rows);
    free(s);
}

/* The spec with its defaults filled in, checked against the model. */
static fg_status resolve_spec(const fg_train_ctx *c, const fg_stage_spec *in,
                              fg_stage_spec *out, fg_error *err)
{
    size_t layers = fg_model_layer_count(c->model);
    *out = *in;
    if (!out->layer_count) out->layer_count = (int32_t)layers - out->first_layer;
    if (!out->chunks) out->chunks = 1;
    if (out->first_layer < 0 || out->layer_count < 1 ||
        (size_t)out->first_layer + (size_t)out->layer_count > layers)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "stage of layers [%d, %d): the model "
                            "has %zu layers", (int)out->first_layer,
                            (int)(out->first_layer + out->layer_count), layers);
    if (out->chunks < 1 || out->max_batch < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "a stage needs chunks >= 1 and "
                            "max_batch >= 1, not %d and %d", (int)out->chunks,
                            (int)out->max_batch);
    int whole = out->first_layer == 0 && (size_t)out->layer_count == layers;
    if ((out->no_params || out->no_grads) && (!whole || out->chunks != 1))
        return fg_error_set(err, FG_UNAVAILABLE, "a stage without its own parameters or "
                            "gradients (no_params, no_grads) must be the whole model with "
                            "one chunk");
    return FG_OK;
}

/* The optimizer's range: the spec's, inside the stage's parameters. */
static fg_status resolve_opt_range(fg_train_stage *s, fg_error *err)
{
    s->opt_lo = s->param_lo;
    s->opt_n = s->param_n;
    if (!s->spec.opt_range) return FG_OK;
    int64_t lo = s->spec.opt_offset, n = s->spec.opt_count;
    if (lo < (int64_t)s->param_lo || n < 0 || lo + n > (int64_t)(s->param_lo + s->param_n))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "stage optimizer range [%lld, %lld) is "
                            "outside its parameters [%zu, %zu)", (long long)lo,
                            (long long)(lo + n), s->param_lo, s->param_lo + s->param_n);
    s->opt_lo = (size_t)lo;
    s->opt_n = (size_t)n;
    return FG_OK;
}

static fg_status stage_alloc(fg_train_ctx *c, fg_train_stage *s, size_t bytes, void **p,
                             fg_error *err)
{
    return bytes ? c->be->alloc(c->bs, s->device, bytes, p, err) : FG_OK;
}

/* The arenas (the first owns the parameter slices). */
static fg_status create_arenas(fg_train_ctx *c, fg_train_stage *s, fg_error *err)
{
    const fg_stage_spec *p = &s->spec;
    unsigned flags = (p->no_params ? FG_REPLICA_NO_PARAMS : 0) |
                     (p->no_grads ? FG_REPLICA_NO_GRADS : 0);
    if (flags) /* resolve_spec admits it for the whole model, one chunk */
        return fg_replica_create_flags(c->model, c->be, c->bs, s->device, s->max_batch, flags,
                                       &s->arena[0], err);
    fg_status st = FG_OK;
    for (int i = 0; st == FG_OK && i < s->chunks; i++)
        st = fg_replica_create_range(c->model, c->be, c->bs, s->device, s->max_batch,
                                     (size_t)p->first_layer, (size_t)p->layer_count,
                                     i ? s->arena[0] : NULL, &s->arena[i], err);
    return st;
}

/* The strategy keeps the f32 master (the model says so, trainer_precision.c): the optimizer
 * updates its f32 parameters from the half gradients. */
static int strategy_master(const fg_train_ctx *c)
{
    return fg_model_master_owner(c->model) == FG_MASTER_STRATEGY;
}

/* The batch copier, metric scalars, the half batch of a half activation dtype and the
 * optimizer. */
static fg_status create_buffers(fg_train_ctx *c, fg_train_stage *s, fg_error *err)
{
    size_t rows = (size_t)s->max_batch;
    fg_batch_copier_options co = {c->be, c->bs, s->device, s->queue, c->fence_count, s->chunks,
                                  s->is_first ? rows * s->in_elems * sizeof(float) : 0,
                                  s->is_last ? rows * (size_t)fg_model_positions(c->model) *
                                                   sizeof(int32_t) : 0};
    fg_status st = s->is_first || s->is_last ? fg_batch_copier_create(&co, &s->copier, err) : FG_OK;
    uint32_t act = fg_replica_act_dtype(s->arena[0]);
    if (st == FG_OK && act != FG_F32)
        st = stage_alloc(c, s, rows * s->in_elems * fg_dtype_size((fg_dtype)act), &s->x_act, err);
    if (st == FG_OK) st = stage_alloc(c, s, 2 * sizeof(float), (void **)&s->metrics_dev, err);
    if (st == FG_OK) st = stage_alloc(c, s, 2 * sizeof(float), (void **)&s->scratch_dev, err);
    if (st == FG_OK)
        st = fg_optimizer_create_with(c->optim, c->be, c->bs, s->device, s->opt_n, &s->opt, err);
    if (st == FG_OK && c->decay_runs)
        st = fg_optimizer_set_decay_runs(s->opt, c->decay_runs, c->decay_run_count, s->opt_lo,
                                         err);
    if (st == FG_OK)
        st = fg_optimizer_set_dtypes(s->opt,
                                     strategy_master(c) ? FG_F32
                                                        : fg_replica_param_dtype(s->arena[0]),
                                     fg_replica_grad_dtype(s->arena[0]), err);
    return st;
}

/* Stream 0 keeps the run's seed (single-process results are unchanged); stream k > 0
 * draws from a key derived from (seed, k), independent of every other stream. */
static uint64_t stream_seed(const fg_train_ctx *c, uint64_t stream)
{
    return stream ? fg_rng_key(c->seed, 0x72616e6b00000000ull + stream) : c->seed;
}

/* Whether layers [first, first + count) hold one that calls the replica all-reduce. */
static int stage_syncs(const fg_model *m, const fg_stage_spec *p)
{
    size_t end = p->layer_count ? (size_t)(p->first_layer + p->layer_count)
                                : fg_model_layer_count(m);
    for (size_t i = (size_t)p->first_layer; i < end; i++)
        if (fg_model_layer(m, i)->sync_stats) return 1;
    return 0;
}

/* [model] batch_groups: replicas of the whole model, a batch each; a pipeline's part or
 * micro-batch sees neither all of a group nor the groups' order. */
static fg_status stage_batch_groups(fg_train_ctx *c, fg_train_stage *s, fg_error *err)
{
    int groups = fg_model_batch_groups(c->model);
    if (groups <= 1)
        return FG_OK;
    if (!s->is_first || !s->is_last || s->chunks > 1)
        return fg_error_set(err, FG_UNAVAILABLE,
                            "%s: [model] batch_groups = %d: a stage of layers [%d, %d) in %d "
                            "micro-batch(es) cannot take the batch's sums group by group; use "
                            "strategy single, or dp with %d devices",
                            fg_config_origin(c->cfg, "model", "batch_groups"), groups,
                            s->spec.first_layer, s->spec.first_layer + s->spec.layer_count,
                            s->chunks, groups);
    fg_status st = FG_OK;
    for (int i = 0; st == FG_OK && i < s->chunks; i++)
        st = fg_replica_set_batch_groups(s->arena[i], c->batch_groups, err);
    return st;
}

static fg_status stage_create(void *ctx, const fg_stage_spec *spec, void **out, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    *out = NULL;
    fg_stage_spec p;
    fg_status st = resolve_spec(c, spec, &p, err);
    if (st != FG_OK) return st;
    fg_train_stage *s = calloc(1, sizeof *s);
    if (!s || !(s->arena = calloc((size_t)p.chunks, sizeof *s->arena)) ||
        !(s->rows = calloc((size_t)p.chunks, sizeof *s->rows))) {
        stage_destroy(ctx, s);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory creating a stage");
    }
    s->spec = p;
    s->device = p.device;
    s->max_batch = p.max_batch;
    s->chunks = p.chunks;
    s->is_first = p.first_layer == 0;
    s->is_last = (size_t)(p.first_layer + p.layer_count) == fg_model_layer_count(c->model);
    s->in_elems = fg_shape_numel(&fg_model_layer(c->model, (size_t)p.first_layer)->in);
    s->cast_version = UINT64_MAX; /* the working parameters are cast before the first forward */
    st = c->be->queue_create(c->bs, p.device, &s->queue, err);
    if (st == FG_OK) st = create_arenas(c, s, err);
    if (st == FG_OK) st = stage_batch_groups(c, s, err);
    if (st == FG_OK) {
        fg_replica_param_range(s->arena[0], &s->param_lo, &s->param_n);
        fg_replica_buffer_range(s->arena[0], &s->buffer_lo, &s->buffer_n);
        st = resolve_opt_range(s, err);
    }
    if (st == FG_OK) st = create_buffers(c, s, err);
    if (st == FG_OK)
        st = fg_replica_upload(s->arena[0], s->queue, c->init_params, c->init_buffers, err);
    if (st == FG_OK) st = c->be->fill(c->bs, s->queue, FG_F32, s->metrics_dev, 0.0f, 2, err);
    if (st == FG_OK) st = c->be->queue_sync(c->bs, s->queue, err);
    if (st != FG_OK) {
        stage_destroy(ctx, s);
        return st;
    }
    for (int i = 0; i < s->chunks; i++) {
        fg_replica_set_seed(s->arena[i], stream_seed(c, p.rng_stream));
        fg_replica_set_need_input_grad(s->arena[i], !s->is_first);
    }
    s->syncs = stage_syncs(c->model, &p);
    c->unserved_stages += s->syncs;
    link_live(c, s);
    *out = s;
    return FG_OK;
}

static void *stage_queue(void *ctx, void *stage)
{
    (void)ctx;
    return ((fg_train_stage *)stage)->queue;
}

static void *region(void *ctx, void *stage, int32_t which, int32_t slot, uint32_t *dtype,
                    int64_t *offset, int64_t *count)
{
    (void)ctx;
    const fg_train_stage *s = stage;
    const fg_replica *r = s->arena[0];
    void *p = NULL;
    size_t lo = s->param_lo, n = s->param_n;
    *dtype = FG_F32;
    switch (which) {
    case FG_REGION_PARAMS:
        p = fg_replica_params(r);
        *dtype = fg_replica_param_dtype(r);
        break;
    case FG_REGION_GRADS:
        p = fg_replica_grads(r);
        *dtype = fg_replica_grad_dtype(r);
        break;
    case FG_REGION_BUFFERS:
        p = fg_replica_buffers(r);
        lo = s->buffer_lo;
        n = s->buffer_n;
        break;
    case FG_REGION_OPT_STATE:
        if (slot >= 0 && (size_t)slot < fg_optimizer_state_count(s->opt))
            p = fg_optimizer_state(s->opt, (size_t)slot, NULL);
        lo = s->opt_lo;
        n = s->opt_n;
        break;
    default: break;
    }
    *offset = (int64_t)lo;
    *count = p ? (int64_t)n : 0;
    return p;
}

static fg_status stage_memory(void *ctx, void *stage, fg_memory_report *out, fg_error *err)
{
    (void)ctx;
    (void)err;
    const fg_train_stage *s = stage;
    const fg_replica *r = s->arena[0];
    out->device = s->device;
    out->param_bytes = fg_replica_params(r)
        ? s->param_n * fg_dtype_size((fg_dtype)fg_replica_param_dtype(r)) : 0;
    out->master_bytes = 0;
    if (fg_replica_work_bytes(r)) { /* half working params beside the f32 master */
        out->master_bytes = out->param_bytes;
        out->param_bytes = fg_replica_work_bytes(r);
    }
    out->grad_bytes = fg_replica_grads(r)
        ? s->param_n * fg_dtype_size((fg_dtype)fg_replica_grad_dtype(r)) : 0;
    out->optimizer_bytes = fg_optimizer_state_count(s->opt) * s->opt_n * sizeof(float);
    out->activation_bytes = 0;
    for (int i = 0; i < s->chunks; i++)
        out->activation_bytes += fg_replica_arena_bytes(s->arena[i]);
    out->other_bytes = s->buffer_n * sizeof(float) + 3 * sizeof(float) +
                       (s->copier ? fg_batch_copier_device_bytes(s->copier) : 0);
    if (s->x_act) /* the batch again, in the activation dtype */
        out->other_bytes += (size_t)s->max_batch * s->in_elems *
                            fg_dtype_size((fg_dtype)fg_replica_act_dtype(r));
    return FG_OK;
}

static void grad_ready_trampoline(void *user, size_t offset, size_t count)
{
    fg_train_stage *s = user;
    s->grad_ready(s->grad_ready_user, (int64_t)offset, (int64_t)count);
}

static void set_grad_ready_hook(void *ctx, void *stage,
                                void (*fn)(void *user, int64_t offset, int64_t count), void *user)
{
    (void)ctx;
    fg_train_stage *s = stage;
    s->grad_ready = fn;
    s->grad_ready_user = user;
    for (int i = 0; i < s->chunks; i++)
        fg_replica_set_grad_ready_hook(s->arena[i], fn ? grad_ready_trampoline : NULL,
                                       fn ? s : NULL);
}

static fg_status memory_trampoline(void *user, int layer, int phase, size_t offset, size_t count,
                                   float **params, float **grads, fg_error *err)
{
    fg_train_stage *s = user;
    void *p = *params, *g = *grads;
    fg_status st = s->mem_hook(s->mem_user, layer, phase, (int64_t)offset, (int64_t)count,
                               &p, &g, err);
    *params = p;
    *grads = g;
    return st;
}

static void set_layer_memory_hook(void *ctx, void *stage, fg_layer_memory_hook fn, void *user)
{
    fg_train_stage *s = stage;
    if (!s->mem_hook != !fn) CTX(ctx)->mapped_stages += fn ? 1 : -1;
    s->mem_hook = fn;
    s->mem_user = user;
    for (int i = 0; i < s->chunks; i++)
        fg_replica_set_layer_memory_hook(s->arena[i], fn ? memory_trampoline : NULL,
                                         fn ? s : NULL);
}

static void set_replica_allreduce(void *ctx, void *stage, fg_replica_allreduce_fn fn,
                                  void *user)
{
    fg_train_ctx *c = CTX(ctx);
    fg_train_stage *s = stage;
    if (s->syncs && !s->allreduce != !fn) c->unserved_stages += fn ? -1 : 1;
    s->allreduce = fn;
    for (int i = 0; i < s->chunks; i++)
        fg_replica_set_allreduce(s->arena[i], fn, fn ? user : NULL);
}

static fg_status read_init_params(void *ctx, void *stage, int64_t offset, int64_t count,
                                  void *dst, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    fg_train_stage *s = stage;
    if (offset < 0 || count < 0 || (size_t)(offset + count) > fg_model_params_size(c->model))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "read_init_params [%lld, %lld) is outside "
                            "the %zu parameters", (long long)offset, (long long)(offset + count),
                            fg_model_params_size(c->model));
    if (!count) return FG_OK;
    return c->be->copy(c->bs, s->queue, dst, s->device, c->init_params + offset, -1,
                       (size_t)count * sizeof(float), err);
}

int fg_train_stage_device(const void *s) { return ((const fg_train_stage *)s)->device; }
void *fg_train_stage_queue(const void *s) { return ((const fg_train_stage *)s)->queue; }
fg_replica *fg_train_stage_model(const void *s) { return ((const fg_train_stage *)s)->arena[0]; }
fg_optimizer *fg_train_stage_optimizer(const void *s) { return ((const fg_train_stage *)s)->opt; }

void fg_train_services_init(fg_train_ctx *c, int max_batch)
{
    fg_train_services *s = &c->svc;
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->ctx = c;
    s->param_count = (int64_t)fg_model_params_size(c->model);
    s->buffer_count = (int64_t)fg_model_buffers_size(c->model);
    s->max_batch = max_batch;
    s->layer_count = (int32_t)fg_model_layer_count(c->model);
    fg_model_storage_dtypes(c->model, &s->param_dtype, &s->grad_dtype);
    s->strategy_master = strategy_master(c);
    const char *unfused = secure_getenv("FULGUR_TEST_UNFUSED_STEP");
    c->unfused = unfused && strcmp(unfused, "1") == 0;
    s->layer_info = layer_info;
    s->create = stage_create;
    s->destroy = stage_destroy;
    s->queue = stage_queue;
    s->region = region;
    s->memory = stage_memory;
    s->set_grad_ready_hook = set_grad_ready_hook;
    s->set_layer_memory_hook = set_layer_memory_hook;
    s->read_init_params = read_init_params;
    s->set_replica_allreduce = set_replica_allreduce;
    fg_train_stage_step_init(s);
}

void fg_train_services_next_micro_batch(fg_train_ctx *c, int micro)
{
    c->micro_step++;
    c->micro_in_step = micro;
}
uint64_t fg_train_services_micro_step(const fg_train_ctx *c) { return c->micro_step; }
void fg_train_services_resume_micro_step(fg_train_ctx *c, uint64_t n) { c->micro_step = n; }

void fg_train_services_set_sink(fg_train_ctx *c, struct fg_step_sink *sink, int timing)
{
    c->sink = sink;
    c->timing = timing;
}
