/* Replicas as a strategy sees them: the model on a device plus the batch staging, metric
 * scalars and optimizer that one training step needs. Everything is allocated at
 * creation; a step only enqueues work. */
#include "train_services.h"

#include <stdlib.h>
#include <string.h>

#include "batch_copy.h"
#include "init.h"
#include "optimizer.h"
#include "step_sink.h"

typedef struct train_replica {
    fg_replica *replica;
    fg_optimizer *opt;
    void *queue;
    int device;
    int max_batch;
    fg_batch_copier *copier; /* the batch's device copy: (max_batch, sample...) samples,
                              * (max_batch) labels */
    float *metrics_dev; /* (2): loss sum, correct predictions */
    float *scratch_dev; /* (1): a reduction result */
    double count;       /* samples since the last metrics reset: known on the host */
    void (*grad_ready)(void *user, int64_t offset, int64_t count);
    void *grad_ready_user;
    fg_replica_spec spec;   /* what this replica holds (a plain one: everything) */
    int *param_index;       /* (layers) index among the layers with parameters, or -1 */
    fg_layer_memory_hook mem_hook;
    void *mem_user;
    void *x_act;        /* (max_batch, sample...) in a half activation dtype; else NULL */
    int64_t cast_tag;   /* ctx step_number when the working parameters were last cast */
} train_replica;

#define CTX(p) ((fg_train_ctx *)(p))

static void replica_destroy(void *ctx, void *replica)
{
    train_replica *t = replica;
    fg_train_ctx *c = CTX(ctx);
    if (!t) return;
    if (t->queue) c->be->queue_sync(c->bs, t->queue, NULL);
    fg_optimizer_destroy(t->opt);
    fg_batch_copier_destroy(t->copier);
    if (t->x_act) c->be->free(c->bs, t->device, t->x_act);
    if (t->metrics_dev) c->be->free(c->bs, t->device, t->metrics_dev);
    if (t->scratch_dev) c->be->free(c->bs, t->device, t->scratch_dev);
    fg_replica_destroy(t->replica);
    if (t->queue) c->be->queue_destroy(c->bs, t->queue);
    free(t->param_index);
    free(t);
}

/* A replica with half activations takes its batch through x_act. */
static fg_status alloc_x_act(fg_train_ctx *c, train_replica *t, size_t sample, fg_error *err)
{
    t->cast_tag = INT64_MIN; /* the working parameters are cast before the first forward */
    uint32_t act = fg_replica_act_dtype(t->replica);
    if (act == FG_F32) return FG_OK;
    size_t bytes = (size_t)t->max_batch * sample * fg_dtype_size((fg_dtype)act);
    return c->be->alloc(c->bs, t->device, bytes, &t->x_act, err);
}

static fg_status replica_create_spec(void *ctx, int device, int max_batch,
                                     const fg_replica_spec *spec, void **out, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    size_t params = fg_model_params_size(c->model);
    if (spec->opt_offset < 0 || spec->opt_count < 0 || (size_t)spec->opt_offset > params ||
        (size_t)spec->opt_count > params - (size_t)spec->opt_offset)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "replica optimizer range [%lld, %lld) is "
                            "outside the %zu parameters", (long long)spec->opt_offset,
                            (long long)(spec->opt_offset + spec->opt_count), params);
    train_replica *t = calloc(1, sizeof *t);
    if (!t) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory creating a replica");
    t->device = device;
    t->max_batch = max_batch;
    t->spec = *spec;
    size_t sample = fg_shape_numel(fg_model_input_shape(c->model));
    unsigned flags = (spec->full_params ? 0 : FG_REPLICA_NO_PARAMS) |
                     (spec->full_grads ? 0 : FG_REPLICA_NO_GRADS);
    fg_status st = c->be->queue_create(c->bs, device, &t->queue, err);
    if (st == FG_OK)
        st = fg_replica_create_flags(c->model, c->be, c->bs, device, max_batch, flags, &t->replica, err);
    fg_batch_copier_options co = {c->be, c->bs, device, t->queue, c->fence_count, 1,
                                  (size_t)max_batch * sample * sizeof(float),
                                  (size_t)max_batch * (size_t)fg_model_positions(c->model) *
                                      sizeof(int32_t)};
    if (st == FG_OK) st = fg_batch_copier_create(&co, &t->copier, err);
    if (st == FG_OK) st = alloc_x_act(c, t, sample, err);
    if (st == FG_OK) st = c->be->alloc(c->bs, device, 2 * sizeof(float), (void **)&t->metrics_dev, err);
    if (st == FG_OK) st = c->be->alloc(c->bs, device, sizeof(float), (void **)&t->scratch_dev, err);
    if (st == FG_OK)
        st = fg_optimizer_create(c->cfg, c->be, c->bs, device, (size_t)spec->opt_count, &t->opt, err);
    if (st == FG_OK)
        st = fg_optimizer_set_dtypes(t->opt, c->own_master ? FG_F32
                                                           : fg_replica_param_dtype(t->replica),
                                     fg_replica_grad_dtype(t->replica), err);
    if (st == FG_OK) st = fg_replica_upload(t->replica, t->queue, c->init_params, c->init_buffers, err);
    if (st == FG_OK) st = c->be->fill(c->bs, t->queue, FG_F32, t->metrics_dev, 0.0f, 2, err);
    if (st == FG_OK) st = c->be->queue_sync(c->bs, t->queue, err);
    if (st != FG_OK) {
        replica_destroy(ctx, t);
        return st;
    }
    fg_replica_set_seed(t->replica, c->seed);
    *out = t;
    return FG_OK;
}

static fg_status replica_create(void *ctx, int device, int max_batch, void **out, fg_error *err)
{
    fg_replica_spec all = {sizeof all, 1, 1, 0, (int64_t)fg_model_params_size(CTX(ctx)->model)};
    return replica_create_spec(ctx, device, max_batch, &all, out, err);
}

static float *replica_params(void *ctx, void *r) { return fg_replica_params(((train_replica *)r)->replica); }
static float *replica_grads(void *ctx, void *r) { return fg_replica_grads(((train_replica *)r)->replica); }
static void *replica_queue(void *ctx, void *r) { return ((train_replica *)r)->queue; }

/* The batch on the device: *x its samples, *y its labels (data/batch_copy.h). */
static fg_status upload_batch(train_replica *t, const fg_batch *b, float **x, int32_t **y,
                              fg_error *err)
{
    if (b->count < 1 || b->count > t->max_batch)
        return fg_error_set(err, FG_INTERNAL, "batch of %d samples, the replica holds 1..%d",
                            (int)b->count, t->max_batch);
    return fg_batch_copier_upload(t->copier, 0, b, x, y, err);
}

/* With timing on: waits for the queue, adds the time since *since to phase p, moves
 * *since to now. The host clock is right once the queue is idle (the CPU backend's ops
 * are synchronous; an asynchronous one is waited for here, only while timing). */
static fg_status phase_end(fg_train_ctx *c, train_replica *t, fg_phase p, double *since,
                           fg_status st, fg_error *err)
{
    if (!c->timing || st != FG_OK) return st;
    st = c->be->queue_sync(c->bs, t->queue, err);
    double now = fg_now_seconds();
    fg_step_sink_phase(c->sink, p, now - *since);
    *since = now;
    return st;
}

/* Half precision: the working parameters are cast from the f32 ones once per optimizer
 * step (the first forward after it), and the batch into the activation dtype. *x is what
 * the forward reads. */
static fg_status precision_inputs(fg_train_ctx *c, train_replica *t, const fg_batch *b,
                                  const float *x_dev, const float **x, fg_error *err)
{
    *x = x_dev;
    fg_status st = FG_OK;
    if (t->cast_tag != c->step_number) {
        st = fg_replica_cast_params(t->replica, t->queue, err);
        t->cast_tag = c->step_number;
    }
    if (st != FG_OK || !t->x_act || fg_model_input_dtype(c->model) == FG_I32) return st;
    *x = t->x_act;
    return c->be->cast(c->bs, t->queue, fg_replica_act_dtype(t->replica), FG_F32, t->x_act,
                       x_dev, (size_t)b->count * (size_t)b->sample_elems, err);
}

static fg_status forward_backward(void *ctx, void *replica, const fg_batch *b, float grad_scale,
                                  int accumulate, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    double mark = c->timing ? fg_now_seconds() : 0;
    float *x_dev = NULL;
    int32_t *y_dev = NULL;
    fg_status st = upload_batch(t, b, &x_dev, &y_dev, err);
    st = phase_end(c, t, FG_PHASE_H2D, &mark, st, err);
    const float *x = NULL;
    if (st == FG_OK) st = precision_inputs(c, t, b, x_dev, &x, err);
    if (st != FG_OK) return st;
    fg_replica_set_step(t->replica, c->micro_step);
    st = fg_replica_forward(t->replica, t->queue, x, y_dev, b->count, 1,
                            &t->metrics_dev[0], &t->metrics_dev[1], err);
    st = phase_end(c, t, FG_PHASE_FORWARD, &mark, st, err);
    if (st == FG_OK)
        st = fg_replica_backward(t->replica, t->queue, b->count, grad_scale, accumulate, err);
    if (st == FG_OK) st = fg_batch_copier_done(t->copier, 0, err);
    st = phase_end(c, t, FG_PHASE_BACKWARD, &mark, st, err);
    t->count += b->count;
    return st;
}

static fg_status evaluate(void *ctx, void *replica, const fg_batch *b, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    float *x_dev = NULL;
    int32_t *y_dev = NULL;
    fg_status st = upload_batch(t, b, &x_dev, &y_dev, err);
    const float *x = NULL;
    if (st == FG_OK) st = precision_inputs(c, t, b, x_dev, &x, err);
    if (st == FG_OK)
        st = fg_replica_forward(t->replica, t->queue, x, y_dev, b->count, 0,
                                &t->metrics_dev[0], &t->metrics_dev[1], err);
    if (st == FG_OK) st = fg_batch_copier_done(t->copier, 0, err);
    t->count += b->count;
    return st;
}

static fg_status optimizer_step(void *ctx, void *replica, int64_t offset, int64_t count, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    if (c->skip_update) return FG_OK; /* the loss scaler skips this step */
    /* Several ranges may make one step (sharded strategies): the counter moves once. */
    if (fg_optimizer_get_step(t->opt) < c->step_number) {
        fg_optimizer_set_step(t->opt, c->step_number - 1);
        fg_optimizer_begin_step(t->opt);
    }
    double mark = c->timing ? fg_now_seconds() : 0;
    fg_status st = fg_optimizer_step(t->opt, t->queue, c->lr, fg_replica_params(t->replica),
                                     fg_replica_grads(t->replica), (size_t)offset, (size_t)count,
                                     err);
    return phase_end(c, t, FG_PHASE_OPTIMIZER, &mark, st, err);
}

static fg_status read_metrics(void *ctx, void *replica, int reset, fg_step_metrics *out, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    float host[2];
    fg_status st = c->be->copy(c->bs, t->queue, host, -1, t->metrics_dev, t->device, sizeof host, err);
    if (st == FG_OK) st = c->be->queue_sync(c->bs, t->queue, err);
    if (st != FG_OK) return st;
    out->loss_sum = host[0];
    out->correct = host[1];
    out->count = t->count;
    if (reset) {
        t->count = 0;
        st = c->be->fill(c->bs, t->queue, FG_F32, t->metrics_dev, 0.0f, 2, err);
    }
    return st;
}

static void grad_ready_trampoline(void *user, size_t offset, size_t count)
{
    train_replica *t = user;
    t->grad_ready(t->grad_ready_user, (int64_t)offset, (int64_t)count);
}

static void set_grad_ready_hook(void *ctx, void *replica,
                                void (*fn)(void *user, int64_t offset, int64_t count), void *user)
{
    train_replica *t = replica;
    t->grad_ready = fn;
    t->grad_ready_user = user;
    fg_replica_set_grad_ready_hook(t->replica, fn ? grad_ready_trampoline : NULL, fn ? t : NULL);
}

static fg_status grad_norm_sq(void *ctx, void *replica, int64_t offset, int64_t count,
                              double *out, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    float host = 0.0f;
    uint32_t dt = fg_replica_grad_dtype(t->replica);
    const char *g = (const char *)fg_replica_grads(t->replica) +
                    (size_t)offset * fg_dtype_size((fg_dtype)dt);
    fg_status st = c->be->sum_squares(c->bs, t->queue, dt, g, (size_t)count, t->scratch_dev, err);
    if (st == FG_OK) st = c->be->copy(c->bs, t->queue, &host, -1, t->scratch_dev, t->device, sizeof host, err);
    if (st == FG_OK) st = c->be->queue_sync(c->bs, t->queue, err);
    *out = host;
    return st;
}

static fg_status scale_grads(void *ctx, void *replica, int64_t offset, int64_t count, float s,
                             float clamp, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    uint32_t dt = fg_replica_grad_dtype(t->replica);
    float *g = (float *)((char *)fg_replica_grads(t->replica) +
                         (size_t)offset * fg_dtype_size((fg_dtype)dt));
    fg_status st = FG_OK;
    if (s != 1.0f) st = c->be->scale(c->bs, t->queue, dt, g, s, (size_t)count, err);
    if (st == FG_OK && clamp > 0) {
        if (!FG_HAS_FIELD(c->be, fg_backend_vtable, clamp) || !c->be->clamp)
            return fg_error_set(err, FG_UNAVAILABLE, "the backend cannot clamp gradients "
                                "(gradient_clip_algorithm = value); use norm");
        st = c->be->clamp(c->bs, t->queue, dt, g, -clamp, clamp, (size_t)count, err);
    }
    return st;
}

static fg_status replica_memory(void *ctx, void *replica, fg_memory_report *out, fg_error *err)
{
    (void)err;
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    size_t sample = fg_shape_numel(fg_model_input_shape(c->model));
    size_t n = fg_model_params_size(c->model);
    out->device = t->device;
    out->param_bytes = t->spec.full_params
        ? n * fg_dtype_size((fg_dtype)fg_replica_param_dtype(t->replica)) : 0;
    out->master_bytes = 0;
    if (fg_replica_work_bytes(t->replica)) { /* half working params beside the f32 master */
        out->master_bytes = out->param_bytes;
        out->param_bytes = fg_replica_work_bytes(t->replica);
    }
    out->grad_bytes = t->spec.full_grads
        ? n * fg_dtype_size((fg_dtype)fg_replica_grad_dtype(t->replica)) : 0;
    out->optimizer_bytes = fg_optimizer_state_count(t->opt) * (size_t)t->spec.opt_count * sizeof(float);
    out->activation_bytes = fg_replica_arena_bytes(t->replica);
    out->other_bytes = fg_model_buffers_size(c->model) * sizeof(float) +
                       fg_batch_copier_device_bytes(t->copier) + 3 * sizeof(float);
    if (t->x_act) /* the batch again, in the activation dtype */
        out->other_bytes += (size_t)t->max_batch * sample *
                            fg_dtype_size((fg_dtype)fg_replica_act_dtype(t->replica));
    return FG_OK;
}

fg_replica *fg_train_replica_model(const void *r) { return ((const train_replica *)r)->replica; }
fg_optimizer *fg_train_replica_optimizer(const void *r) { return ((const train_replica *)r)->opt; }
void *fg_train_replica_queue(const void *r) { return ((const train_replica *)r)->queue; }

int fg_train_replica_device(const void *replica) { return ((const train_replica *)replica)->device; }

/* ---- sharded state (strategy.sharded) ------------------------------------------------ */

static fg_status optimizer_step_at(void *ctx, void *replica, float *params, const float *grads,
                                   int64_t offset, int64_t count, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    if (c->skip_update) return FG_OK; /* the loss scaler skips this step */
    int64_t rel = offset - t->spec.opt_offset;
    if (rel < 0 || count < 0 || rel + count > t->spec.opt_count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "optimizer step over [%lld, %lld) is "
                            "outside the replica's optimizer range [%lld, %lld)",
                            (long long)offset, (long long)(offset + count),
                            (long long)t->spec.opt_offset,
                            (long long)(t->spec.opt_offset + t->spec.opt_count));
    if (fg_optimizer_get_step(t->opt) < c->step_number) {
        fg_optimizer_set_step(t->opt, c->step_number - 1);
        fg_optimizer_begin_step(t->opt);
    }
    return fg_optimizer_step_at(t->opt, t->queue, c->lr, params, grads, (size_t)rel,
                                (size_t)count, err);
}

static int32_t param_ranges(void *ctx, int64_t *offsets, int64_t *counts, int32_t capacity)
{
    const fg_model *m = CTX(ctx)->model;
    int32_t n = 0;
    for (size_t i = 0; i < fg_model_layer_count(m); i++) {
        const fg_layer *l = fg_model_layer(m, i);
        if (!l->param_count) continue;
        if (n < capacity) {
            const fg_tensor_info *a = fg_model_tensor(m, l->param_tensor[0]);
            const fg_tensor_info *b = fg_model_tensor(m, l->param_tensor[l->param_count - 1]);
            offsets[n] = (int64_t)a->offset;
            counts[n] = (int64_t)(b->offset + b->numel - a->offset);
        }
        n++;
    }
    return n;
}

static fg_status memory_trampoline(void *user, int layer, int phase, size_t offset, size_t count,
                                   float **params, float **grads, fg_error *err)
{
    train_replica *t = user;
    return t->mem_hook(t->mem_user, t->param_index[layer], phase, (int64_t)offset,
                       (int64_t)count, params, grads, err);
}

static void set_layer_memory_hook(void *ctx, void *replica, fg_layer_memory_hook fn, void *user)
{
    const fg_model *m = CTX(ctx)->model;
    train_replica *t = replica;
    if (fn && !t->param_index) {
        t->param_index = calloc(fg_model_layer_count(m) + 1, sizeof *t->param_index);
        if (!t->param_index) fn = NULL; /* the strategy's first map then fails: no memory */
        for (size_t i = 0, k = 0; t->param_index && i < fg_model_layer_count(m); i++)
            t->param_index[i] = fg_model_layer(m, i)->param_count ? (int)k++ : -1;
    }
    t->mem_hook = fn;
    t->mem_user = user;
    fg_replica_set_layer_memory_hook(t->replica, fn ? memory_trampoline : NULL, fn ? t : NULL);
}

static fg_status read_init_params(void *ctx, void *replica, int64_t offset, int64_t count,
                                  float *dst, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    if (offset < 0 || count < 0 || (size_t)(offset + count) > fg_model_params_size(c->model))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "read_init_params [%lld, %lld) is outside "
                            "the %zu parameters", (long long)offset, (long long)(offset + count),
                            fg_model_params_size(c->model));
    if (!count) return FG_OK;
    return c->be->copy(c->bs, t->queue, dst, t->device, c->init_params + offset, -1,
                       (size_t)count * sizeof(float), err);
}

static float *replica_buffers(void *ctx, void *r)
{
    (void)ctx;
    return fg_replica_buffers(((train_replica *)r)->replica);
}

static float *replica_opt_state(void *ctx, void *r, int32_t i)
{
    (void)ctx;
    const fg_optimizer *opt = ((train_replica *)r)->opt;
    return i < 0 ? NULL : fg_optimizer_state(opt, (size_t)i, NULL);
}

/* Stream 0 keeps the run's seed (single-process results are unchanged); stream k > 0
 * draws from a key derived from (seed, k), independent of every other stream. */
static void replica_set_rng_stream(void *ctx, void *r, uint64_t stream)
{
    fg_train_ctx *c = CTX(ctx);
    uint64_t seed = stream ? fg_rng_key(c->seed, 0x72616e6b00000000ull + stream) : c->seed;
    fg_replica_set_seed(((train_replica *)r)->replica, seed);
}

/* strategy.dp: a shard of a batch draws the dropout masks the whole batch would. */
static void set_sample_offset(void *ctx, void *replica, int64_t first_sample)
{
    (void)ctx;
    fg_replica_set_sample_offset(((train_replica *)replica)->replica, (uint64_t)first_sample);
}

void fg_train_services_init_shard(fg_train_ctx *c)
{
    fg_train_services *s = &c->svc;
    s->buffer_count = (int64_t)fg_model_buffers_size(c->model);
    s->replica_create_spec = replica_create_spec;
    s->optimizer_step_at = optimizer_step_at;
    s->param_ranges = param_ranges;
    s->set_layer_memory_hook = set_layer_memory_hook;
    s->read_init_params = read_init_params;
    s->replica_buffers = replica_buffers;
    s->replica_opt_state = replica_opt_state;
}

void fg_train_services_init(fg_train_ctx *c, int max_batch)
{
    fg_train_services *s = &c->svc;
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->ctx = c;
    s->param_count = (int64_t)fg_model_params_size(c->model);
    s->max_batch = max_batch;
    s->replica_create = replica_create;
    s->replica_destroy = replica_destroy;
    s->replica_params = replica_params;
    s->replica_grads = replica_grads;
    s->replica_queue = replica_queue;
    s->forward_backward = forward_backward;
    s->evaluate = evaluate;
    s->optimizer_step = optimizer_step;
    s->read_metrics = read_metrics;
    s->set_grad_ready_hook = set_grad_ready_hook;
    s->grad_norm_sq = grad_norm_sq;
    s->scale_grads = scale_grads;
    s->replica_memory = replica_memory;
    s->replica_set_rng_stream = replica_set_rng_stream;
    fg_model_storage_dtypes(c->model, &s->param_dtype, &s->grad_dtype);
    s->strategy_master = c->own_master;
    fg_train_services_init_shard(c);
    s->set_sample_offset = set_sample_offset;
    fg_train_services_init_stage(c);
}
