/* Replicas as a strategy sees them: the model on a device plus the batch staging, metric
 * scalars and optimizer that one training step needs. Everything is allocated at
 * creation; a step only enqueues work. */
#include "train_services.h"

#include <stdlib.h>
#include <string.h>

#include "optimizer.h"

typedef struct train_replica {
    fg_replica *replica;
    fg_optimizer *opt;
    void *queue;
    int device;
    int max_batch;
    float *x_dev;       /* (max_batch, sample...) */
    int32_t *y_dev;     /* (max_batch) */
    float *metrics_dev; /* (2): loss sum, correct predictions */
    float *scratch_dev; /* (1): a reduction result */
    double count;       /* samples since the last metrics reset: known on the host */
    void (*grad_ready)(void *user, int64_t offset, int64_t count);
    void *grad_ready_user;
} train_replica;

#define CTX(p) ((fg_train_ctx *)(p))

static void replica_destroy(void *ctx, void *replica)
{
    train_replica *t = replica;
    fg_train_ctx *c = CTX(ctx);
    if (!t) return;
    if (t->queue) c->be->queue_sync(c->bs, t->queue, NULL);
    fg_optimizer_destroy(t->opt);
    if (t->x_dev) c->be->free(c->bs, t->device, t->x_dev);
    if (t->y_dev) c->be->free(c->bs, t->device, t->y_dev);
    if (t->metrics_dev) c->be->free(c->bs, t->device, t->metrics_dev);
    if (t->scratch_dev) c->be->free(c->bs, t->device, t->scratch_dev);
    fg_replica_destroy(t->replica);
    if (t->queue) c->be->queue_destroy(c->bs, t->queue);
    free(t);
}

static fg_status replica_create(void *ctx, int device, int max_batch, void **out, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = calloc(1, sizeof *t);
    if (!t) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory creating a replica");
    t->device = device;
    t->max_batch = max_batch;
    size_t sample = fg_shape_numel(fg_model_input_shape(c->model));
    size_t params = fg_model_params_size(c->model);
    fg_status st = c->be->queue_create(c->bs, device, &t->queue, err);
    if (st == FG_OK) st = fg_replica_create(c->model, c->be, c->bs, device, max_batch, &t->replica, err);
    if (st == FG_OK) st = c->be->alloc(c->bs, device, (size_t)max_batch * sample * sizeof(float), (void **)&t->x_dev, err);
    if (st == FG_OK) st = c->be->alloc(c->bs, device, (size_t)max_batch * sizeof(int32_t), (void **)&t->y_dev, err);
    if (st == FG_OK) st = c->be->alloc(c->bs, device, 2 * sizeof(float), (void **)&t->metrics_dev, err);
    if (st == FG_OK) st = c->be->alloc(c->bs, device, sizeof(float), (void **)&t->scratch_dev, err);
    if (st == FG_OK) st = fg_optimizer_create(c->cfg, c->be, c->bs, device, params, &t->opt, err);
    if (st == FG_OK) st = fg_replica_upload(t->replica, t->queue, c->init_params, c->init_buffers, err);
    if (st == FG_OK) st = c->be->fill(c->bs, t->queue, t->metrics_dev, 0.0f, 2, err);
    if (st == FG_OK) st = c->be->queue_sync(c->bs, t->queue, err);
    if (st != FG_OK) {
        replica_destroy(ctx, t);
        return st;
    }
    fg_replica_set_seed(t->replica, c->seed);
    *out = t;
    return FG_OK;
}

static float *replica_params(void *ctx, void *r) { return fg_replica_params(((train_replica *)r)->replica); }
static float *replica_grads(void *ctx, void *r) { return fg_replica_grads(((train_replica *)r)->replica); }
static void *replica_queue(void *ctx, void *r) { return ((train_replica *)r)->queue; }

static fg_status upload_batch(fg_train_ctx *c, train_replica *t, const fg_batch *b, fg_error *err)
{
    if (b->count < 1 || b->count > t->max_batch)
        return fg_error_set(err, FG_INTERNAL, "batch of %d samples, the replica holds 1..%d",
                            (int)b->count, t->max_batch);
    fg_status st = c->be->copy(c->bs, t->queue, t->x_dev, t->device, b->samples, -1,
                               (size_t)b->count * (size_t)b->sample_elems * sizeof(float), err);
    if (st == FG_OK)
        st = c->be->copy(c->bs, t->queue, t->y_dev, t->device, b->labels, -1,
                         (size_t)b->count * sizeof(int32_t), err);
    return st;
}

static fg_status forward_backward(void *ctx, void *replica, const fg_batch *b, float grad_scale,
                                  int accumulate, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    fg_status st = upload_batch(c, t, b, err);
    if (st != FG_OK) return st;
    fg_replica_set_step(t->replica, c->micro_step);
    st = fg_replica_forward(t->replica, t->queue, t->x_dev, t->y_dev, b->count, 1,
                            &t->metrics_dev[0], &t->metrics_dev[1], err);
    if (st == FG_OK)
        st = fg_replica_backward(t->replica, t->queue, b->count, grad_scale, accumulate, err);
    t->count += b->count;
    return st;
}

static fg_status evaluate(void *ctx, void *replica, const fg_batch *b, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    fg_status st = upload_batch(c, t, b, err);
    if (st == FG_OK)
        st = fg_replica_forward(t->replica, t->queue, t->x_dev, t->y_dev, b->count, 0,
                                &t->metrics_dev[0], &t->metrics_dev[1], err);
    t->count += b->count;
    return st;
}

static fg_status optimizer_step(void *ctx, void *replica, int64_t offset, int64_t count, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    /* Several ranges may make one step (sharded strategies): the counter moves once. */
    if (fg_optimizer_get_step(t->opt) < c->step_number) {
        fg_optimizer_set_step(t->opt, c->step_number - 1);
        fg_optimizer_begin_step(t->opt);
    }
    return fg_optimizer_step(t->opt, t->queue, c->lr, fg_replica_params(t->replica),
                             fg_replica_grads(t->replica), (size_t)offset, (size_t)count, err);
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
        st = c->be->fill(c->bs, t->queue, t->metrics_dev, 0.0f, 2, err);
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
    fg_status st = c->be->sum_squares(c->bs, t->queue, fg_replica_grads(t->replica) + offset,
                                      (size_t)count, t->scratch_dev, err);
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
    float *g = fg_replica_grads(t->replica) + offset;
    fg_status st = FG_OK;
    if (s != 1.0f) st = c->be->scale(c->bs, t->queue, g, s, (size_t)count, err);
    if (st == FG_OK && clamp > 0) {
        if (!FG_HAS_FIELD(c->be, fg_backend_vtable, clamp) || !c->be->clamp)
            return fg_error_set(err, FG_UNAVAILABLE, "the backend cannot clamp gradients "
                                "(gradient_clip_algorithm = value); use norm");
        st = c->be->clamp(c->bs, t->queue, g, -clamp, clamp, (size_t)count, err);
    }
    return st;
}

static fg_status replica_memory(void *ctx, void *replica, fg_memory_report *out, fg_error *err)
{
    (void)err;
    fg_train_ctx *c = CTX(ctx);
    train_replica *t = replica;
    size_t sample = fg_shape_numel(fg_model_input_shape(c->model));
    size_t params = fg_model_params_size(c->model) * sizeof(float);
    out->device = t->device;
    out->param_bytes = params;
    out->master_bytes = 0;
    out->grad_bytes = params;
    out->optimizer_bytes = fg_optimizer_state_count(t->opt) * params;
    out->activation_bytes = fg_replica_arena_bytes(t->replica);
    out->other_bytes = fg_model_buffers_size(c->model) * sizeof(float) +
                       (size_t)t->max_batch * (sample * sizeof(float) + sizeof(int32_t)) +
                       3 * sizeof(float);
    return FG_OK;
}

fg_replica *fg_train_replica_model(const void *r) { return ((const train_replica *)r)->replica; }
fg_optimizer *fg_train_replica_optimizer(const void *r) { return ((const train_replica *)r)->opt; }
void *fg_train_replica_queue(const void *r) { return ((const train_replica *)r)->queue; }

int fg_train_replica_device(const void *replica) { return ((const train_replica *)replica)->device; }

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
}
