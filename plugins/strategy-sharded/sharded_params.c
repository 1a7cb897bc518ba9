/* Where each layer's parameters and gradients are for a pass (the layer memory hook), the
 * stage-3 gathers with prefetch, and the all-gather of updated shards (stages 1 and 2). */
#include "sharded.h"

/* Starts the all-gather of param-layer k's range into working buffer i. */
static fg_status start_gather(sharded *s, int i, int k, fg_error *err)
{
    sh_slot *slot = &s->slot[i];
    fg_status st = FG_OK;
    if (slot->request) {
        st = s->comm->wait(s->comm_state, slot->request, err);
        slot->request = NULL;
        if (st != FG_OK) return st;
    }
    slot->layer = -1;
    /* the layer that used this buffer last must be done reading it */
    if ((st = s->be->queue_sync(s->be_state, s->queue, err)) != FG_OK) return st;
    int64_t a = s->layer_off[k], b = a + s->layer_n[k];
    sh_counts(s, a, b);
    int64_t from = a > s->lo ? a - s->lo : 0;
    const void *send = s->mine ? sh_at(s->pshard, from < s->mine ? from : 0, s->psz) : s->pshard;
    st = s->comm->all_gather_v_start(s->comm_state, NULL, send, slot->buf, s->counts, s->pdt,
                                     &slot->request, err);
    if (st == FG_OK) slot->layer = k;
    return st;
}

/* Layer k's gathered parameters, and the gather of the layer that runs next started. */
static fg_status layer_params(sharded *s, int k, int phase, float **params, fg_error *err)
{
    int i = k % 2;
    sh_slot *slot = &s->slot[i];
    fg_status st = slot->layer == k ? FG_OK : start_gather(s, i, k, err);
    if (st == FG_OK && slot->request) {
        st = s->comm->wait(s->comm_state, slot->request, err);
        slot->request = NULL;
        if (st != FG_OK) slot->layer = -1;
    }
    if (st != FG_OK) return st;
    int next = phase == FG_LAYER_FORWARD ? k + 1 : k - 1;
    if (next >= 0 && next < s->layers && s->slot[1 - i].layer != next)
        st = start_gather(s, 1 - i, next, err);
    *params = slot->buf;
    return st;
}

fg_status sh_memory_hook(void *user, int32_t layer, int32_t phase, int64_t offset,
                         int64_t count, void **params, void **grads, fg_error *err)
{
    sharded *s = user;
    (void)count;
    fg_status st = FG_OK;
    int index = layer >= 0 && layer < s->model_layers ? s->param_layer[layer] : -1;
    float *p = NULL, *g = NULL;
    if (s->stage < 3)
        p = sh_at(s->params, offset, s->psz);
    else if (s->eval_full && phase == FG_LAYER_FORWARD)
        p = sh_at(s->eval_full, offset, s->psz);
    else if (index < 0 || index >= s->layers || s->layer_off[index] != offset)
        return fg_error_set(err, FG_INTERNAL, "strategy.sharded: layer %d at %lld is not a "
                            "parameter range of the model", (int)layer, (long long)offset);
    else
        st = layer_params(s, index, phase, &p, err);
    if (st == FG_OK && phase == FG_LAYER_BACKWARD) st = sh_rs_map(s, offset, &g, err);
    *params = p;
    *grads = g;
    return st;
}

void sh_slots_invalidate(sharded *s)
{
    for (int i = 0; i < 2; i++) {
        if (s->slot[i].request) {
            fg_error e = {0};
            s->comm->wait(s->comm_state, s->slot[i].request, &e);
            s->slot[i].request = NULL;
        }
        s->slot[i].layer = -1;
    }
}

/* Every rank's updated shard into every rank's full parameters. The gradient shard is
 * spent once the update is done: it stages the send (MPI forbids overlapping buffers, and
 * Open MPI 4's in-place Iallgatherv crashes). */
fg_status sh_gather_params(sharded *s, float *staging, fg_error *err)
{
    void *req = NULL;
    sh_counts(s, 0, s->P);
    fg_status st = s->mine ? s->be->copy(s->be_state, s->queue, staging, s->device,
                                         sh_at(s->params, s->lo, s->psz), s->device,
                                         (size_t)s->mine * s->psz, err) : FG_OK;
    if (st == FG_OK) st = s->be->queue_sync(s->be_state, s->queue, err);
    if (st == FG_OK)
        st = s->comm->all_gather_v_start(s->comm_state, NULL, staging, s->params, s->counts,
                                         s->pdt, &req, err);
    if (st == FG_OK) st = s->comm->wait(s->comm_state, req, err);
    return st;
}

/* Stage 3 evaluation: the ranks' eval shards differ in batch count, so per-layer gathers
 * would not pair up; the whole model is gathered once, on the first eval_step after an
 * update, and released at the next update. */
fg_status sh_eval_gather(sharded *s, fg_error *err)
{
    if (s->eval_full) return FG_OK;
    fg_status st = s->be->alloc(s->be_state, s->device, (size_t)s->P * s->psz,
                                (void **)&s->eval_full, err);
    if (st != FG_OK) {
        s->eval_full = NULL;
        return st;
    }
    void *req = NULL;
    sh_counts(s, 0, s->P);
    st = s->be->queue_sync(s->be_state, s->queue, err);
    if (st == FG_OK)
        st = s->comm->all_gather_v_start(s->comm_state, NULL, s->pshard, s->eval_full,
                                         s->counts, s->pdt, &req, err);
    if (st == FG_OK) st = s->comm->wait(s->comm_state, req, err);
    if (st != FG_OK) sh_eval_release(s);
    return st;
}

void sh_eval_release(sharded *s)
{
    if (!s->eval_full) return;
    s->be->free(s->be_state, s->device, s->eval_full);
    s->eval_full = NULL;
}
