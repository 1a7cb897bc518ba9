/* A stage's training step captured into a CUDA graph and replayed (train_stage_graph.h).
 * A replay must be bitwise the eager step: the graph holds the same kernels with the same
 * arguments, the values that change per step are read from graph_values_dev by the fused
 * updates in eager and captured steps alike, and the batch always lands in graph_x/graph_y. */
#include <stdio.h>

#include "train_stage.h"
#include "train_stage_fused.h"
#include "train_stage_graph.h"

static fg_status stage_graph_alloc(fg_train_ctx *c, fg_train_stage *s, size_t bytes, void **p,
                                   fg_error *err)
{
    return c->be->alloc(c->bs, s->device, bytes ? bytes : 1, p, err);
}

fg_status fg_train_stage_graph_check(const fg_train_ctx *c, void *stage, fg_error *err)
{
    fg_train_stage *s = stage;
    if (!fg_train_stage_can_fuse(c, s))
        return fg_error_set(err, FG_UNAVAILABLE, "[backend] cuda_graphs: the optimizer update "
                            "is not fused here (the backend's sgd_fused/adamw_fused for these "
                            "dtypes, or FULGUR_TEST_UNFUSED_STEP): its learning rate would be "
                            "captured as a constant");
    if (c->ignore_labels)
        return fg_error_set(err, FG_UNAVAILABLE, "[backend] cuda_graphs: [model] ignore_index "
                            "makes the loss count the kept labels on the host every step; a "
                            "captured step cannot");
    if (!s->copier || !s->is_first || !s->is_last)
        return fg_error_set(err, FG_UNAVAILABLE, "[backend] cuda_graphs: the stage holds part "
                            "of the model; only a whole-model stage (strategy single) is captured");
    return FG_OK;
}

fg_status fg_train_stage_graph_prepare(fg_train_ctx *c, void *stage, fg_error *err)
{
    fg_train_stage *s = stage;
    size_t rows = (size_t)s->max_batch;
    fg_status st = stage_graph_alloc(c, s, 3 * sizeof(float), (void **)&s->graph_values_dev, err);
    if (st == FG_OK && s->is_first)
        st = stage_graph_alloc(c, s, rows * s->in_elems * sizeof(float), &s->graph_x, err);
    if (st == FG_OK && s->is_last)
        st = stage_graph_alloc(c, s, rows * (size_t)fg_model_positions(c->model) * sizeof(int32_t),
                               (void **)&s->graph_y, err);
    if (st == FG_OK) fg_optimizer_read_step_values(s->opt, s->graph_values_dev);
    if (st == FG_OK) st = fg_replica_dropout_on_device(s->arena[0], err);
    fg_error ring_err = {0};
    fg_status ring = st == FG_OK ? fg_pinned_ring_init(&s->graph_ring, c->be, c->bs, s->device,
                                                       3 * sizeof(float), &ring_err)
                                 : FG_OK;
    if (ring != FG_OK)
        st = fg_error_set(err, ring, "[backend] cuda_graphs: %s", ring_err.message);
    return st;
}

fg_status fg_train_stage_graph_values(fg_train_ctx *c, void *stage, float lr, int64_t step,
                                      fg_error *err)
{
    fg_train_stage *s = stage;
    float *values = NULL;
    fg_status st = fg_pinned_ring_take(&s->graph_ring, (void **)&values, err);
    if (st != FG_OK) return st;
    int n = fg_optimizer_step_values(s->opt, lr, step, values);
    st = c->be->copy(c->bs, s->queue, s->graph_values_dev, s->device, values, -1,
                     (size_t)n * sizeof(float), err);
    return st == FG_OK ? fg_pinned_ring_copied(&s->graph_ring, s->queue, err) : st;
}

fg_status fg_train_stage_graph_inputs(fg_train_ctx *c, void *stage, const fg_batch *b,
                                      fg_error *err)
{
    fg_train_stage *s = stage;
    if (s->graph && b->count != s->graph_rows)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[backend] cuda_graphs: a batch of %d "
                            "samples; the captured step takes %d (set [data] drop_last = true)",
                            b->count, s->graph_rows);
    if (b->count < 1 || b->count > s->max_batch)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "a batch of %d samples: the stage holds "
                            "1..%d", b->count, s->max_batch);
    if (s->is_first && (size_t)b->sample_elems != s->in_elems)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "a sample has %lld values, the model's "
                            "input %zu", (long long)b->sample_elems, s->in_elems);
    float *xs = NULL;
    int32_t *ys = NULL;
    fg_status st = fg_batch_copier_upload(s->copier, 0, b, &xs, &ys, err);
    size_t rows = (size_t)b->count;
    if (st == FG_OK && s->is_first)
        st = c->be->copy(c->bs, s->queue, s->graph_x, s->device, xs, s->device,
                         rows * s->in_elems * sizeof(float), err);
    if (st == FG_OK && s->is_last)
        st = c->be->copy(c->bs, s->queue, s->graph_y, s->device, ys, s->device,
                         rows * (size_t)fg_model_positions(c->model) * sizeof(int32_t), err);
    if (st == FG_OK) st = fg_batch_copier_done(s->copier, 0, err);
    s->graph_rows = b->count;
    return st;
}

fg_status fg_train_stage_graph_begin(fg_train_ctx *c, void *stage, fg_error *err)
{
    fg_train_stage *s = stage;
    fg_status st = c->be->graph_begin(c->bs, s->queue, err);
    s->graph_inputs = st == FG_OK;
    return st;
}

fg_status fg_train_stage_graph_end(fg_train_ctx *c, void *stage, fg_status st, fg_error *err)
{
    fg_train_stage *s = stage;
    s->graph_inputs = 0;
    fg_error end_err = {0};
    void *graph = NULL;
    /* the capture is ended whatever happened inside it: the queue must not stay captured */
    fg_status end = c->be->graph_end(c->bs, s->queue, &graph, &end_err);
    if (st != FG_OK) {
        if (graph) c->be->graph_destroy(c->bs, graph);
        char inside[sizeof err->message];
        snprintf(inside, sizeof inside, "%s", err ? err->message : "");
        return fg_error_set(err, st, "[backend] cuda_graphs: the step being captured failed: "
                            "%s", inside);
    }
    if (end != FG_OK)
        return fg_error_set(err, end, "[backend] cuda_graphs: the step could not be captured: "
                            "%s", end_err.message);
    s->graph = graph;
    return c->be->graph_launch(c->bs, s->queue, s->graph, err);
}

fg_status fg_train_stage_graph_replay(fg_train_ctx *c, void *stage, int64_t step, fg_error *err)
{
    fg_train_stage *s = stage;
    fg_status st = c->be->graph_launch(c->bs, s->queue, s->graph, err);
    if (st != FG_OK) return st;
    /* what the captured host calls moved (stage_forward, optimizer_step, the fused step) */
    if (s->is_last) s->count += s->graph_rows;
    s->rows[0] = s->graph_rows;
    fg_optimizer_set_step(s->opt, step);
    uint64_t version = ++c->param_version;
    uint32_t dt = FG_F32;
    if (fg_replica_work(s->arena[0], &dt))
        s->cast_version = version; /* the captured update wrote the working copy */
    if (s->clip_step) s->clip_step = step;
    return FG_OK;
}
