/* The work of a training step on a stage of the train services: forward and backward of a
 * micro-batch, gradient norms and scaling, the optimizer update (fused where the backend
 * can: train_stage_fused.c) and the metric sums. Only
 * enqueues work, except where a host sync is the point (metrics, norms) or timing asked
 * for one. */
#include "train_stage.h"

#include "init.h"
#include "step_sink.h"
#include "train_stage_fused.h"
#include "train_stage_step.h"

#define CTX(p) ((fg_train_ctx *)(p))

/* With timing on: waits for the queue, adds the time since *since to phase p, moves
 * *since to now. The host clock is right once the queue is idle (the CPU backend's ops
 * are synchronous; an asynchronous one is waited for here, only while timing). Stages of
 * part of the model are not timed: their phases overlap across devices, and the pipeline
 * strategy reports its own times. */
static fg_status phase_end(fg_train_ctx *c, fg_train_stage *s, fg_phase p, double *since,
                           fg_status st, fg_error *err)
{
    if (!c->timing || st != FG_OK || !s->is_first || !s->is_last) return st;
    st = c->be->queue_sync(c->bs, s->queue, err);
    double now = fg_now_seconds();
    fg_step_sink_phase(c->sink, p, now - *since);
    *since = now;
    return st;
}

static fg_status check_chunk(const fg_train_stage *s, int32_t chunk, int rows, fg_error *err)
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
static fg_status upload_chunk(fg_train_stage *s, int32_t chunk, const fg_batch *b,
                              const void **x, const int32_t **y, fg_error *err)
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

/* Half precision: the working parameters are cast from the f32 ones at the first forward
 * after an optimizer update, and the batch into the activation dtype. *x is what the
 * forward reads. */
static fg_status precision_inputs(fg_train_ctx *c, fg_train_stage *s, const fg_batch *b,
                                  const void **x, fg_error *err)
{
    fg_status st = FG_OK;
    uint64_t version = c->param_version; /* one atomic load */
    if (s->cast_version != version) {
        st = fg_replica_cast_params(s->arena[0], s->queue, err);
        s->cast_version = version;
    }
    /* token ids (an embedding first) are read as they are */
    if (st != FG_OK || !s->x_act || !s->is_first || fg_model_input_dtype(c->model) == FG_I32)
        return st;
    st = c->be->cast(c->bs, s->queue, fg_replica_act_dtype(s->arena[0]), FG_F32, s->x_act, *x,
                     (size_t)b->count * (size_t)b->sample_elems, err);
    *x = s->x_act;
    return st;
}

/* The labels of b the loss counts (the loader marked [model] ignore_index's as
 * FG_IGNORED_LABEL): -1, all of them, unless the model ignores some. */
static int64_t counted_labels(const fg_train_ctx *c, const fg_train_stage *s, const fg_batch *b)
{
    const int32_t *labels = fg_batch_targets(b);
    if (!c->ignore_labels || !s->is_last || !labels || fg_batch_targets_dtype(b) != FG_I32)
        return -1;
    int64_t n = (int64_t)b->count * fg_batch_label_elems(b), counted = 0;
    for (int64_t i = 0; i < n; i++) counted += labels[i] != FG_IGNORED_LABEL;
    return counted;
}

static fg_status stage_forward(void *ctx, void *stage, int32_t chunk, const fg_batch *b,
                               int64_t first_sample, const void *x_dev, int training,
                               fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    fg_train_stage *s = stage;
    fg_status st = check_chunk(s, chunk, b->count, err);
    if (st != FG_OK) return st;
    if (!s->is_first && !x_dev)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "forward: a stage after the first "
                            "needs its input activations (x_dev)");
    double mark = c->timing && training ? fg_now_seconds() : 0;
    const int32_t *y = NULL;
    if (s->graph_inputs) { /* a captured step: the batch was copied into the fixed buffers */
        x_dev = s->is_first ? s->graph_x : x_dev;
        y = s->graph_y;
    } else {
        st = upload_chunk(s, chunk, b, &x_dev, &y, err);
    }
    if (training) st = phase_end(c, s, FG_PHASE_H2D, &mark, st, err);
    if (st == FG_OK) st = precision_inputs(c, s, b, &x_dev, err);
    if (st != FG_OK) return st;
    fg_replica *r = s->arena[chunk];
    if (training) fg_replica_set_step(r, c->micro_step);
    /* fp8's amax histories advance once per optimizer step: at its first micro-batch's
     * first chunk; backward reads the same replica's flag */
    if (training) fg_replica_set_fp8_hold(r, c->micro_in_step > 0 || chunk > 0);
    fg_replica_set_sample_offset(r, (uint64_t)first_sample);
    int64_t counted = counted_labels(c, s, b);
    fg_replica_set_counted_labels(r, counted);
    s->rows[chunk] = b->count;
    st = fg_replica_forward(r, s->queue, x_dev, y, b->count, training, &s->metrics_dev[0],
                            &s->metrics_dev[1], err);
    /* a batch whose every label is ignored adds nothing to the mean */
    if (s->is_last && counted) s->count += b->count;
    if (training) st = phase_end(c, s, FG_PHASE_FORWARD, &mark, st, err);
    /* evaluation reads the chunk's copy no further; training's backward does */
    if (st == FG_OK && !training && s->copier) st = fg_batch_copier_done(s->copier, chunk, err);
    return st;
}

static fg_status stage_backward(void *ctx, void *stage, int32_t chunk, const void *dy_dev,
                                float grad_scale, int accumulate, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    fg_train_stage *s = stage;
    fg_status st = check_chunk(s, chunk, s->rows[chunk] ? s->rows[chunk] : 1, err);
    if (st != FG_OK) return st;
    fg_replica *r = s->arena[chunk];
    if (!s->is_last && !dy_dev)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backward: a stage before the last "
                            "needs the gradient at its output (dy_dev)");
    double mark = c->timing ? fg_now_seconds() : 0;
    st = s->is_last ? fg_replica_backward(r, s->queue, s->rows[chunk], grad_scale, accumulate, err)
                    : fg_replica_backward_from(r, s->queue, dy_dev, s->rows[chunk], accumulate, err);
    if (st == FG_OK && s->copier && !s->graph_inputs)
        st = fg_batch_copier_done(s->copier, chunk, err);
    return phase_end(c, s, FG_PHASE_BACKWARD, &mark, st, err);
}

static const void *stage_output(void *ctx, void *stage, int32_t chunk)
{
    (void)ctx;
    const fg_train_stage *s = stage;
    return chunk >= 0 && chunk < s->chunks ? fg_replica_output(s->arena[chunk]) : NULL;
}

static const void *stage_input_grad(void *ctx, void *stage, int32_t chunk)
{
    (void)ctx;
    const fg_train_stage *s = stage;
    return chunk >= 0 && chunk < s->chunks ? fg_replica_input_grad(s->arena[chunk]) : NULL;
}

static fg_status read_metrics(void *ctx, void *stage, int reset, fg_step_metrics *out,
                              fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    fg_train_stage *s = stage;
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

/* Gradients [offset, offset + count), checked to lie in the stage's: *g points at
 * element offset, *dt is their dtype. */
static fg_status grad_range(const fg_train_stage *s, int64_t offset, int64_t count, void **g,
                            uint32_t *dt, fg_error *err)
{
    const fg_replica *r = s->arena[0];
    if (offset < (int64_t)s->param_lo || count < 0 ||
        offset + count > (int64_t)(s->param_lo + s->param_n) || !fg_replica_grads(r))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "gradients [%lld, %lld) are not in the "
                            "stage's [%zu, %zu)", (long long)offset, (long long)(offset + count),
                            s->param_lo, fg_replica_grads(r) ? s->param_lo + s->param_n : s->param_lo);
    *dt = fg_replica_grad_dtype(r);
    *g = fg_train_stage_at(fg_replica_grads(r), s->param_lo, (size_t)offset,
                           fg_dtype_size((fg_dtype)*dt));
    return FG_OK;
}

static fg_status grad_norm_sq(void *ctx, void *stage, int64_t offset, int64_t count,
                              double *out, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    fg_train_stage *s = stage;
    float host = 0.0f;
    *out = 0;
    if (!count) return FG_OK;
    void *g = NULL;
    uint32_t dt = FG_F32;
    fg_status st = grad_range(s, offset, count, &g, &dt, err);
    if (st == FG_OK)
        st = c->be->sum_squares(c->bs, s->queue, dt, g, (size_t)count, s->scratch_dev, err);
    if (st == FG_OK)
        st = c->be->copy(c->bs, s->queue, &host, -1, s->scratch_dev, s->device, sizeof host, err);
    if (st == FG_OK) st = c->be->queue_sync(c->bs, s->queue, err);
    *out = host;
    return st;
}

static fg_status scale_grads(void *ctx, void *stage, int64_t offset, int64_t count, float f,
                             float clamp, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    fg_train_stage *s = stage;
    if (!count) return FG_OK;
    void *g = NULL;
    uint32_t dt = FG_F32;
    fg_status st = grad_range(s, offset, count, &g, &dt, err);
    if (st == FG_OK && f != 1.0f) st = c->be->scale(c->bs, s->queue, dt, g, f, (size_t)count, err);
    if (st == FG_OK && clamp > 0) {
        if (!FG_HAS_FIELD(c->be, fg_backend_vtable, clamp) || !c->be->clamp)
            return fg_error_set(err, FG_UNAVAILABLE, "the backend cannot clamp gradients "
                                "(gradient_clip_algorithm = value); use norm");
        st = c->be->clamp(c->bs, s->queue, dt, g, -clamp, clamp, (size_t)count, err);
    }
    return st;
}

static fg_status optimizer_step(void *ctx, void *stage, const fg_step_args *a, int64_t offset,
                                int64_t count, void *params, const void *grads, fg_error *err)
{
    fg_train_ctx *c = CTX(ctx);
    fg_train_stage *s = stage;
    if (a->skip) return FG_OK; /* the loss scaler skips this step */
    int64_t rel = offset - (int64_t)s->opt_lo;
    if (rel < 0 || count < 0 || rel + count > (int64_t)s->opt_n)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "optimizer step over [%lld, %lld) is "
                            "outside the stage's optimizer range [%zu, %zu)", (long long)offset,
                            (long long)(offset + count), s->opt_lo, s->opt_lo + s->opt_n);
    fg_optimizer_set_step(s->opt, a->step); /* the trainer's number; ranges of a step alike */
    c->param_version++;
    double mark = c->timing ? fg_now_seconds() : 0;
    fg_status st;
    if (!params && fg_train_stage_can_fuse(c, s)) {
        st = fg_train_stage_fused_step(c, s, a, (size_t)rel, (size_t)count, err);
    } else if (s->clip_step == a->step) {
        st = fg_error_set(err, FG_INTERNAL, "optimizer step %lld: the clip factor is on the "
                          "device but this update cannot read it", (long long)a->step);
    } else if (params) {
        st = fg_optimizer_step_at(s->opt, s->queue, a->lr, params, grads, (size_t)rel,
                                  (size_t)count, err);
    } else {
        const fg_replica *r = s->arena[0];
        float *p = fg_train_stage_at(fg_replica_params(r), s->param_lo, s->opt_lo,
                                     fg_dtype_size((fg_dtype)fg_replica_param_dtype(r)));
        const float *g = fg_train_stage_at(fg_replica_grads(r), s->param_lo, s->opt_lo,
                                           fg_dtype_size((fg_dtype)fg_replica_grad_dtype(r)));
        st = fg_optimizer_step(s->opt, s->queue, a->lr, p, g, (size_t)rel, (size_t)count, err);
    }
    return phase_end(c, s, FG_PHASE_OPTIMIZER, &mark, st, err);
}

void fg_train_stage_step_init(fg_train_services *s)
{
    s->forward = stage_forward;
    s->backward = stage_backward;
    s->output = stage_output;
    s->input_grad = stage_input_grad;
    s->read_metrics = read_metrics;
    s->grad_norm_sq = grad_norm_sq;
    s->scale_grads = scale_grads;
    s->optimizer_step = optimizer_step;
}
