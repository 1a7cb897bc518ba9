/* Pipeline stages as a strategy sees them (fg_train_services.stage_*): layers
 * [first, first + count) of the model on one device, holding only their slice of the
 * parameters, gradients, optimizer state and buffers, with one activation arena per
 * micro-batch in flight. Everything is allocated at creation; a step only enqueues work. */
#include <stdlib.h>
#include <string.h>

#include "batch_copy.h"
#include "optimizer.h"
#include "train_services.h"

typedef struct train_stage {
    int device;
    int max_batch;          /* samples of one micro-batch */
    int chunks;             /* activation arenas */
    int is_first, is_last;  /* the model's input / loss are here */
    fg_replica **arena;     /* (chunks): [0] owns the slices, the others share them */
    int *rows;              /* (chunks): samples of each chunk's last forward */
    fg_optimizer *opt;
    void *queue;
    size_t param_lo, param_n, buffer_lo, buffer_n; /* floats of the model's flat regions */
    size_t in_elems;        /* floats per sample at the stage's input */
    fg_batch_copier *copier; /* an area per chunk: (max_batch, in...) samples on the first
                              * stage, (max_batch) labels on the last; NULL on the others */
    float *metrics_dev;     /* (2): loss sum, correct predictions */
    float *scratch_dev;     /* (1): a reduction result */
    double count;           /* samples since the last metrics reset (last stage) */
} train_stage;

#define CTX(p) ((fg_train_ctx *)(p))

static fg_status layer_info(void *ctx, int32_t layer, const char **name, int64_t *param_bytes,
                            int64_t *activation_bytes, int64_t *out_elems, fg_error *err)
{
    const fg_model *m = CTX(ctx)->model;
    if (layer < 0 || (size_t)layer >= fg_model_layer_count(m))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "layer %d: the model has %zu layers",
                            (int)layer, fg_model_layer_count(m));
    const fg_layer *l = fg_model_layer(m, (size_t)layer);
    size_t params = 0;
    for (int j = 0; j < l->param_count; j++)
        params += fg_model_tensor(m, l->param_tensor[j])->numel;
    size_t out = fg_shape_numel(&l->out);
    *name = l->name;
    *param_bytes = (int64_t)(params * sizeof(float));
    *activation_bytes = (int64_t)(((l->ops->flags & FG_LAYER_ALIAS) ? 0 : out * sizeof(float)) +
                                  l->aux_per_sample);
    *out_elems = (int64_t)out;
    return FG_OK;
}

static void stage_destroy(void *ctx, void *stage)
{
    fg_train_ctx *c = CTX(ctx);
    train_stage *s = stage;
    if (!s) return;
    if (s->queue) c->be->queue_sync(c->bs, s->queue, NULL);
    fg_optimizer_destroy(s->opt);
    fg_batch_copier_destroy(s->copier);
    void *blocks[] = {s->metrics_dev, s->scratch_dev};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        if (blocks[i]) c->be->free(c->bs, s->device, blocks[i]);
    for (int i = s->chunks - 1; s->arena && i >= 0; i--) /* sharers before the owner */
        fg_replica_destroy(s->arena[i]);
    if (s->queue) c->be->queue_destroy(c->bs, s->queue);
    free(s->arena);
    free(s->rows);
    free(s);
}

static fg_status stage_alloc(fg_train_ctx *c, train_stage *s, size_t bytes, void **p,
                             fg_error *err)
{
    return bytes ? c->be->alloc(c->bs, s->device, bytes, p, err) : FG_OK;
}

/* The arenas (the first owns the parameter slices) and the stage's own buffers. */
static fg_status stage_memory_create(fg_train_ctx *c, train_stage *s, size_t first,
                                     size_t count, fg_error *err)
{
    fg_status st = FG_OK;
    for (int i = 0; st == FG_OK && i < s->chunks; i++)
        st = fg_replica_create_range(c->model, c->be, c->bs, s->device, s->max_batch, first,
                                     count, i ? s->arena[0] : NULL, &s->arena[i], err);
    if (st != FG_OK) return st;
    fg_replica_param_range(s->arena[0], &s->param_lo, &s->param_n);
    fg_replica_buffer_range(s->arena[0], &s->buffer_lo, &s->buffer_n);
    size_t rows = (size_t)s->max_batch;
    fg_batch_copier_options co = {c->be, c->bs, s->device, s->queue, c->fence_count, s->chunks,
                                  s->is_first ? rows * s->in_elems * sizeof(float) : 0,
                                  s->is_last ? rows * (size_t)fg_model_positions(c->model) *
                                                   sizeof(int32_t) : 0};
    if (s->is_first || s->is_last) st = fg_batch_copier_create(&co, &s->copier, err);
    if (st == FG_OK) st = stage_alloc(c, s, 2 * sizeof(float), (void **)&s->metrics_dev, err);
    if (st == FG_OK) st = stage_alloc(c, s, sizeof(float), (void **)&s->scratch_dev, err);
    if (st == FG_OK)
        st = fg_optimizer_create(c->cfg, c->be, c->bs, s->device, s->param_n, &s->opt, err);
    return st;
}

static fg_status stage_create(void *ctx, int device, int max_batch, int32_t first_layer,
                              int32_t layer_count, int32_t chunks, void **out, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    size_t layers = fg_model_layer_count(c->model);
    *out = NULL;
    if (first_layer < 0 || layer_count < 1 || (size_t)first_layer + (size_t)layer_count > layers)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "stage of layers [%d, %d): the model "
                            "has %zu layers", (int)first_layer,
                            (int)(first_layer + layer_count), layers);
    if (chunks < 1 || max_batch < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "a stage needs chunks >= 1 and "
                            "max_batch >= 1, not %d and %d", (int)chunks, max_batch);
    train_stage *s = calloc(1, sizeof *s);
    if (!s || !(s->arena = calloc((size_t)chunks, sizeof *s->arena)) ||
        !(s->rows = calloc((size_t)chunks, sizeof *s->rows))) {
        stage_destroy(ctx, s);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory creating a stage");
    }
    s->device = device;
    s->max_batch = max_batch;
    s->chunks = chunks;
    s->is_first = first_layer == 0;
    s->is_last = (size_t)first_layer + (size_t)layer_count == layers;
    s->in_elems = fg_shape_numel(&fg_model_layer(c->model, (size_t)first_layer)->in);
    fg_status st = c->be->queue_create(c->bs, device, &s->queue, err);
    if (st == FG_OK)
        st = stage_memory_create(c, s, (size_t)first_layer, (size_t)layer_count, err);
    if (st == FG_OK)
        st = fg_replica_upload(s->arena[0], s->queue, c->init_params, c->init_buffers, err);
    if (st == FG_OK) st = c->be->fill(c->bs, s->queue, FG_F32, s->metrics_dev, 0.0f, 2, err);
    if (st == FG_OK) st = c->be->queue_sync(c->bs, s->queue, err);
    if (st != FG_OK) {
        stage_destroy(ctx, s);
        return st;
    }
    for (int i = 0; i < chunks; i++) {
        fg_replica_set_seed(s->arena[i], c->seed);
        fg_replica_set_need_input_grad(s->arena[i], !s->is_first);
    }
    *out = s;
    return FG_OK;
}

static void *stage_queue(void *ctx, void *stage)
{
    (void)ctx;
    return ((train_stage *)stage)->queue;
}

static void stage_range(void *ctx, void *stage, int64_t *param_offset, int64_t *param_count,
                        int64_t *buffer_offset, int64_t *buffer_count)
{
    (void)ctx;
    const train_stage *s = stage;
    *param_offset = (int64_t)s->param_lo;
    *param_count = (int64_t)s->param_n;
    *buffer_offset = (int64_t)s->buffer_lo;
    *buffer_count = (int64_t)s->buffer_n;
}

static fg_status check_chunk(const train_stage *s, int32_t chunk, int rows, fg_error *err)
{
    if (chunk < 0 || chunk >= s->chunks)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "micro-batch %d: the stage holds %d",
                            (int)chunk, s->chunks);
    if (rows < 1 || rows > s->max_batch)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "micro-batch of %d samples: the stage "
                            "holds 1..%d", rows, s->max_batch);
    return FG_OK;
}

/* Copies what this stage reads of the batch into chunk's area of the copier: samples on
 * the first stage (*x), labels on the last (*y). */
static fg_status upload_chunk(train_stage *s, int32_t chunk, const fg_batch *b,
                              const float **x, const int32_t **y, fg_error *err)
{
    *y = NULL;
    if (!s->copier) return FG_OK;
    if (s->is_first && (size_t)b->sample_elems != s->in_elems)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "a sample has %lld values, the "
                            "model's input %zu", (long long)b->sample_elems, s->in_elems);
    float *xs = NULL;
    int32_t *ys = NULL;
    fg_status st = fg_batch_copier_upload(s->copier, chunk, b, &xs, &ys, err);
    if (s->is_first) *x = xs;
    *y = ys;
    return st;
}

static fg_status stage_forward(void *ctx, void *stage, int32_t chunk, const fg_batch *b,
                               int64_t first_sample, const float *x_dev, int training,
                               fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_stage *s = stage;
    fg_status st = check_chunk(s, chunk, b->count, err);
    if (st != FG_OK) return st;
    if (!s->is_first && !x_dev)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "stage_forward: a stage after the first "
                            "needs its input activations (x_dev)");
    const int32_t *y = NULL;
    st = upload_chunk(s, chunk, b, &x_dev, &y, err);
    if (st != FG_OK) return st;
    fg_replica *r = s->arena[chunk];
    fg_replica_set_step(r, c->micro_step);
    fg_replica_set_sample_offset(r, (uint64_t)first_sample);
    s->rows[chunk] = b->count;
    st = fg_replica_forward(r, s->queue, x_dev, y, b->count, training, &s->metrics_dev[0],
                            &s->metrics_dev[1], err);
    if (s->is_last) s->count += b->count;
    /* evaluation reads the chunk's copy no further; training's backward does */
    if (st == FG_OK && !training && s->copier) st = fg_batch_copier_done(s->copier, chunk, err);
    return st;
}

static fg_status stage_backward(void *ctx, void *stage, int32_t chunk, const float *dy_dev,
                                float grad_scale, int accumulate, fg_error *err)
{
    (void)ctx;
    train_stage *s = stage;
    fg_status st = check_chunk(s, chunk, s->rows[chunk] ? s->rows[chunk] : 1, err);
    if (st != FG_OK) return st;
    fg_replica *r = s->arena[chunk];
    if (!s->is_last && !dy_dev)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "stage_backward: a stage before the last "
                            "needs the gradient at its output (dy_dev)");
    st = s->is_last ? fg_replica_backward(r, s->queue, s->rows[chunk], grad_scale, accumulate, err)
                    : fg_replica_backward_from(r, s->queue, dy_dev, s->rows[chunk], accumulate, err);
    if (st == FG_OK && s->copier) st = fg_batch_copier_done(s->copier, chunk, err);
    return st;
}

static const float *stage_output(void *ctx, void *stage, int32_t chunk)
{
    (void)ctx;
    const train_stage *s = stage;
    return chunk >= 0 && chunk < s->chunks ? fg_replica_output(s->arena[chunk]) : NULL;
}

static const float *stage_input_grad(void *ctx, void *stage, int32_t chunk)
{
    (void)ctx;
    const train_stage *s = stage;
    return chunk >= 0 && chunk < s->chunks ? fg_replica_input_grad(s->arena[chunk]) : NULL;
}

static fg_status stage_optimizer_step(void *ctx, void *stage, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_stage *s = stage;
    /* The step counter follows the trainer's (a resumed run sets it through the ctx). */
    if (fg_optimizer_get_step(s->opt) < c->step_number) {
        fg_optimizer_set_step(s->opt, c->step_number - 1);
        fg_optimizer_begin_step(s->opt);
    }
    return fg_optimizer_step(s->opt, s->queue, c->lr, fg_replica_params(s->arena[0]),
                             fg_replica_grads(s->arena[0]), 0, s->param_n, err);
}

static fg_status stage_read_metrics(void *ctx, void *stage, int reset, fg_step_metrics *out,
                                    fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_stage *s = stage;
    float host[2];
    fg_status st = c->be->copy(c->bs, s->queue, host, -1, s->metrics_dev, s->device,
                               sizeof host, err);
    if (st == FG_OK) st = c->be->queue_sync(c->bs, s->queue, err);
    if (st != FG_OK) return st;
    out->loss_sum = host[0];
    out->correct = host[1];
    out->count = s->count;
    if (reset) {
        s->count = 0;
        st = c->be->fill(c->bs, s->queue, FG_F32, s->metrics_dev, 0.0f, 2, err);
    }
    return st;
}

static fg_status stage_grad_norm_sq(void *ctx, void *stage, double *out, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_stage *s = stage;
    float host = 0.0f;
    *out = 0;
    if (!s->param_n) return FG_OK;
    fg_status st = c->be->sum_squares(c->bs, s->queue, fg_replica_grad_dtype(s->arena[0]),
                                      fg_replica_grads(s->arena[0]), s->param_n, s->scratch_dev,
                                      err);
    if (st == FG_OK)
        st = c->be->copy(c->bs, s->queue, &host, -1, s->scratch_dev, s->device, sizeof host, err);
    if (st == FG_OK) st = c->be->queue_sync(c->bs, s->queue, err);
    *out = host;
    return st;
}

static fg_status stage_scale_grads(void *ctx, void *stage, float factor, float clamp,
                                   fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    train_stage *s = stage;
    float *g = fg_replica_grads(s->arena[0]);
    uint32_t dt = fg_replica_grad_dtype(s->arena[0]);
    fg_status st = FG_OK;
    if (!s->param_n) return FG_OK;
    if (factor != 1.0f) st = c->be->scale(c->bs, s->queue, dt, g, factor, s->param_n, err);
    if (st == FG_OK && clamp > 0) {
        if (!FG_HAS_FIELD(c->be, fg_backend_vtable, clamp) || !c->be->clamp)
            return fg_error_set(err, FG_UNAVAILABLE, "the backend cannot clamp gradients "
                                "(gradient_clip_algorithm = value); use norm");
        st = c->be->clamp(c->bs, s->queue, dt, g, -clamp, clamp, s->param_n, err);
    }
    return st;
}

static fg_status stage_memory(void *ctx, void *stage, fg_memory_report *out, fg_error *err)
{
    (void)ctx;
    (void)err;
    const train_stage *s = stage;
    size_t params = s->param_n * sizeof(float);
    out->device = s->device;
    out->param_bytes = params;
    out->master_bytes = 0;
    out->grad_bytes = params;
    out->optimizer_bytes = fg_optimizer_state_count(s->opt) * params;
    out->activation_bytes = 0;
    for (int i = 0; i < s->chunks; i++)
        out->activation_bytes += fg_replica_arena_bytes(s->arena[i]);
    out->other_bytes = s->buffer_n * sizeof(float) + 3 * sizeof(float) +
                       (s->copier ? fg_batch_copier_device_bytes(s->copier) : 0);
    return FG_OK;
}

static float *stage_params(void *ctx, void *stage)
{
    (void)ctx;
    return fg_replica_params(((train_stage *)stage)->arena[0]);
}

static float *stage_grads(void *ctx, void *stage)
{
    (void)ctx;
    return fg_replica_grads(((train_stage *)stage)->arena[0]);
}

static float *stage_buffers(void *ctx, void *stage)
{
    (void)ctx;
    return fg_replica_buffers(((train_stage *)stage)->arena[0]);
}

static float *stage_opt_state(void *ctx, void *stage, int32_t i)
{
    (void)ctx;
    const train_stage *s = stage;
    if (i < 0 || (size_t)i >= fg_optimizer_state_count(s->opt)) return NULL;
    return fg_optimizer_state(s->opt, (size_t)i, NULL);
}

void fg_train_services_init_stage(fg_train_ctx *c)
{
    fg_train_services *s = &c->svc;
    s->layer_count = (int32_t)fg_model_layer_count(c->model);
    s->layer_info = layer_info;
    s->stage_create = stage_create;
    s->stage_destroy = stage_destroy;
    s->stage_queue = stage_queue;
    s->stage_range = stage_range;
    s->stage_forward = stage_forward;
    s->stage_backward = stage_backward;
    s->stage_output = stage_output;
    s->stage_input_grad = stage_input_grad;
    s->stage_optimizer_step = stage_optimizer_step;
    s->stage_read_metrics = stage_read_metrics;
    s->stage_grad_norm_sq = stage_grad_norm_sq;
    s->stage_scale_grads = stage_scale_grads;
    s->stage_memory = stage_memory;
    s->stage_params = stage_params;
    s->stage_buffers = stage_buffers;
    s->stage_opt_state = stage_opt_state;
    s->stage_grads = stage_grads;
}
