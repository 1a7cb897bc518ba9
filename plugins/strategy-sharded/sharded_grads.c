/* Gradient reduction. Stage 1: all-reduce buckets over the full gradient buffer, cut by
 * the grad-ready hook as in ddp. Stages 2 and 3: two bucket buffers that backward writes
 * into through the layer memory hook, each reduce-scattered in place as soon as it is
 * full, this rank's piece then copied (or added) into the gradient shard. */
#include <string.h>

#include "sharded.h"

int64_t sh_piece(const sharded *s, int k, int64_t a, int64_t b)
{
    int64_t lo = (int64_t)k * s->S, hi = lo + s->S;
    if (hi > s->P) hi = s->P;
    if (a > lo) lo = a;
    if (b < hi) hi = b;
    return hi > lo ? hi - lo : 0;
}

void sh_counts(sharded *s, int64_t a, int64_t b)
{
    for (int k = 0; k < s->topo.world_size; k++) s->counts[k] = (size_t)sh_piece(s, k, a, b);
}

static void hook_failed(sharded *s, fg_status st, const fg_error *e)
{
    if (s->hook_status != FG_OK) return;
    s->hook_status = st;
    s->hook_err = *e;
}

/* ---- stage 1 --------------------------------------------------------------------------- */

void sh_ar_begin(sharded *s, int reduce)
{
    s->ar_count = 0;
    s->pending_hi = s->P;
    s->reducing = reduce;
    s->hook_status = FG_OK;
}

static fg_status ar_start(sharded *s, int64_t lo, int64_t hi, fg_error *err)
{
    if (s->ar_count >= s->max_ar)
        return fg_error_set(err, FG_INTERNAL, "strategy.sharded: more than %d buckets in a step",
                            s->max_ar);
    s->pending_hi = lo;
    fg_status st = s->be->queue_sync(s->be_state, s->queue, err);
    if (st == FG_OK)
        st = s->comm->all_reduce_start(s->comm_state, NULL, sh_at(s->grads, lo, s->gsz),
                                       (size_t)(hi - lo), s->gdt, FG_REDUCE_SUM,
                                       &s->ar_req[s->ar_count], err);
    if (st == FG_OK) s->ar_count++;
    return st;
}

/* MPI advances non-blocking collectives only inside MPI calls: each hook gives it a turn. */
static void progress(sharded *s)
{
    for (int i = 0; i < s->ar_count; i++) {
        int done = 0;
        fg_error e = {0};
        fg_status st = s->ar_req[i] ? s->comm->test(s->comm_state, s->ar_req[i], &done, &e) : FG_OK;
        if (st != FG_OK) hook_failed(s, st, &e);
    }
}

void sh_on_grad_ready(void *user, int64_t offset, int64_t count)
{
    sharded *s = user;
    if (!s->reducing || s->hook_status != FG_OK) return;
    fg_error e = {0};
    if (offset + count > s->pending_hi) {
        fg_error_set(&e, FG_INTERNAL, "strategy.sharded: the core reported a gradient range "
                     "above one already being reduced (the grad-ready hook must come last "
                     "layer first)");
        hook_failed(s, FG_INTERNAL, &e);
        return;
    }
    progress(s);
    if (s->pending_hi - offset < s->bucket_elems) return;
    fg_status st = ar_start(s, offset, s->pending_hi, &e);
    if (st != FG_OK) hook_failed(s, st, &e);
}

fg_status sh_ar_flush(sharded *s, fg_error *err)
{
    s->reducing = 0;
    if (s->hook_status != FG_OK) {
        *err = s->hook_err;
        return s->hook_status;
    }
    return s->pending_hi > 0 ? ar_start(s, 0, s->pending_hi, err) : FG_OK;
}

fg_status sh_ar_wait(sharded *s, fg_error *err)
{
    fg_status st = FG_OK;
    for (int i = 0; i < s->ar_count; i++) {
        if (!s->ar_req[i]) continue;
        fg_status w = s->comm->wait(s->comm_state, s->ar_req[i], err);
        s->ar_req[i] = NULL;
        if (w != FG_OK && st == FG_OK) st = w;
    }
    s->ar_count = 0;
    return st;
}

/* ---- stages 2 and 3 -------------------------------------------------------------------- */

/* Waits for bucket buffer i's reduce-scatter and moves this rank's piece into the shard. */
static fg_status acquire(sharded *s, int i, fg_error *err)
{
    sh_bucket *b = &s->bk[i];
    if (!b->request) return FG_OK;
    fg_status st = s->comm->wait(s->comm_state, b->request, err);
    b->request = NULL;
    if (st != FG_OK || !b->piece_n) return st;
    const float *piece = sh_at(b->buf, s->cap - (b->hi - b->lo), s->gsz); /* in place */
    float *dst = sh_at(s->gshard, b->piece_lo - s->lo, s->gsz);
    if (b->accumulate) /* dst += piece in f32, rounded into the shard's dtype */
        return s->be->axpy(s->be_state, s->queue, s->gdt, s->gdt, 1.0f, piece, dst,
                           (size_t)b->piece_n, err);
    return s->be->copy(s->be_state, s->queue, dst, s->device, piece, s->device,
                       (size_t)b->piece_n * s->gsz, err);
}

static fg_status rs_start(sharded *s, fg_error *err)
{
    sh_bucket *b = &s->bk[s->cur];
    b->lo = s->cur_lo;
    b->hi = s->cur_hi;
    b->piece_lo = b->lo > s->lo ? b->lo : s->lo;
    b->piece_n = sh_piece(s, s->topo.rank, b->lo, b->hi);
    b->accumulate = s->micro > 0;
    sh_counts(s, b->lo, b->hi);
    float *region = sh_at(b->buf, s->cap - (b->hi - b->lo), s->gsz);
    fg_status st = s->be->queue_sync(s->be_state, s->queue, err);
    if (st == FG_OK)
        st = s->comm->reduce_scatter_v_start(s->comm_state, NULL, region, region, s->counts,
                                             s->gdt, FG_REDUCE_SUM, &b->request, err);
    return st;
}

void sh_rs_begin(sharded *s, int micro)
{
    s->micro = micro;
    s->cur = 0;
    s->cur_lo = s->cur_hi = s->P;
}

fg_status sh_rs_map(sharded *s, int64_t offset, float **grads, fg_error *err)
{
    fg_status st = FG_OK;
    if (s->cur_hi - offset > s->cap && s->cur_lo < s->cur_hi) {
        st = rs_start(s, err);
        s->cur = 1 - s->cur;
        s->cur_hi = s->cur_lo;
        if (st != FG_OK) return st;
    }
    if (s->cur_lo == s->cur_hi && (st = acquire(s, s->cur, err)) != FG_OK) return st;
    if (s->cur_hi - offset > s->cap || offset > s->cur_lo)
        return fg_error_set(err, FG_INTERNAL, "strategy.sharded: gradient range at %lld does "
                            "not fit the bucket [%lld, %lld) of %lld floats", (long long)offset,
                            (long long)s->cur_lo, (long long)s->cur_hi, (long long)s->cap);
    float *at = sh_at(s->bk[s->cur].buf, s->cap - (s->cur_hi - offset), s->gsz);
    /* the layer's range and the padding above it: backward writes no padding */
    if (s->cur_lo > offset && s->zeros) /* half: fill writes floats, so copy zeros */
        st = s->be->copy(s->be_state, s->queue, at, s->device, s->zeros, s->device,
                         (size_t)(s->cur_lo - offset) * s->gsz, err);
    else if (s->cur_lo > offset)
        st = s->be->fill(s->be_state, s->queue, FG_F32, at, 0.0f, (size_t)(s->cur_lo - offset),
                         err);
    s->cur_lo = offset;
    *grads = at;
    return st;
}

fg_status sh_rs_flush(sharded *s, fg_error *err)
{
    float *unused;
    fg_status st = s->cur_lo > 0 ? sh_rs_map(s, 0, &unused, err) : FG_OK;
    if (st == FG_OK && s->cur_lo < s->cur_hi) st = rs_start(s, err);
    return st;
}

fg_status sh_rs_wait_all(sharded *s, fg_error *err)
{
    fg_status st = acquire(s, 0, err);
    fg_error e2 = {0};
    fg_status st2 = acquire(s, 1, st == FG_OK ? err : &e2);
    return st != FG_OK ? st : st2;
}

/* After a failure: waits what is in flight, ignoring errors. */
void sh_drain(sharded *s)
{
    fg_error e = {0};
    sh_ar_wait(s, &e);
    for (int i = 0; i < 2; i++) {
        if (s->bk[i].request) s->comm->wait(s->comm_state, s->bk[i].request, &e);
        s->bk[i].request = NULL;
        if (s->slot[i].request) s->comm->wait(s->comm_state, s->slot[i].request, &e);
        s->slot[i].request = NULL;
        s->slot[i].layer = -1;
    }
}
