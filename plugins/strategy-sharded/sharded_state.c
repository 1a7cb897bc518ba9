/* Checkpoints of sharded state (gather to rank 0, scatter from it, point to point: no rank
 * but 0 ever holds more than its shard) and the memory report. The comm reads and writes
 * the device buffers directly: host memory, as on the CPU backend. */
#include "sharded.h"

/* Rank 0's own shard copied (from device src_dev to dst_dev, -1: the host), the queue
 * drained after. */
static fg_status copy_own(sharded *s, void *dst, int dst_dev, const void *src, int src_dev,
                          fg_error *err)
{
    fg_status st = s->mine ? s->be->copy(s->be_state, s->queue, dst, dst_dev, src, src_dev,
                                         (size_t)s->mine * sizeof(float), err)
                           : FG_OK;
    return st == FG_OK ? s->be->queue_sync(s->be_state, s->queue, err) : st;
}

/* Rank 0 and every other rank k: k's part of [0, P), at host + k * S, received into `into`
 * or sent from `from` (the other NULL). */
static fg_status exchange_parts(sharded *s, float *into, const float *from, fg_error *err)
{
    fg_status st = FG_OK;
    for (int k = 1; st == FG_OK && k < s->topo.world_size; k++) {
        int64_t n = sh_piece(s, k, 0, s->P), at = (int64_t)k * s->S;
        if (n && into)
            st = s->comm->recv(s->comm_state, NULL, into + at, (size_t)n, FG_F32, k, err);
        else if (n)
            st = s->comm->send(s->comm_state, NULL, from + at, (size_t)n, FG_F32, k, err);
    }
    return st;
}

/* Rank 0: its `local` shard (on device `dev`, -1: the host) and every other rank's into
 * out[0, P); others send theirs. */
static fg_status gather_range(sharded *s, const float *local, int dev, float *out, fg_error *err)
{
    fg_status st = s->be->queue_sync(s->be_state, s->queue, err);
    if (st != FG_OK) return st;
    if (s->topo.rank != 0)
        return s->mine ? s->comm->send(s->comm_state, NULL, local, (size_t)s->mine, FG_F32, 0, err)
                       : FG_OK;
    st = copy_own(s, out, -1, local, dev, err);
    return st == FG_OK ? exchange_parts(s, out, NULL, err) : st;
}

/* Rank 0 sends every rank its part of in[0, P) and copies its own into `local` (on device
 * `dev`, -1: the host). */
static fg_status scatter_range(sharded *s, const float *in, float *local, int dev, fg_error *err)
{
    if (s->topo.rank != 0)
        return s->mine ? s->comm->recv(s->comm_state, NULL, local, (size_t)s->mine, FG_F32, 0, err)
                       : FG_OK;
    fg_status st = copy_own(s, local, dev, in, -1, err);
    return st == FG_OK ? exchange_parts(s, NULL, in, err) : st;
}

static fg_status fetch(sharded *s, float *dst, const float *src, int dev, int64_t n,
                       fg_error *err)
{
    fg_status st = n ? s->be->copy(s->be_state, s->queue, dst, -1, src, dev,
                                   (size_t)n * sizeof(float), err) : FG_OK;
    return st == FG_OK ? s->be->queue_sync(s->be_state, s->queue, err) : st;
}

static int opt_slots(sharded *s)
{
    int n = 0, dev;
    while (n < 8 && sh_state_slot(s, n, &dev)) n++;
    return n;
}

fg_status sh_gather_state(void *state, float *params, float *buffers, float *opt_state,
                          fg_error *err)
{
    sharded *s = state;
    int root = s->topo.rank == 0, dev;
    fg_status st = FG_OK;
    const float *master = sh_master(s, &dev);
    if (params)
        st = s->stage == 3 || master
           ? gather_range(s, master ? master : s->pshard, master ? dev : s->device, params, err)
           : root ? fetch(s, params, s->params, s->device, s->P, err) : FG_OK;
    if (st == FG_OK && buffers && root)
        st = fetch(s, buffers, s->buffers.data, s->device, s->svc->buffer_count, err);
    int slots = s->mine ? opt_slots(s) : 0;
    if (opt_state && s->mine == 0 && s->topo.rank == 0)
        return fg_error_set(err, FG_INTERNAL, "strategy.sharded: rank 0 holds no shard");
    for (int i = 0; st == FG_OK && opt_state && i < slots; i++) {
        const float *slot = sh_state_slot(s, i, &dev);
        st = gather_range(s, slot, dev, root ? opt_state + (int64_t)i * s->P : NULL, err);
    }
    return st;
}

fg_status sh_scatter_state(void *state, const float *opt_state, fg_error *err)
{
    sharded *s = state;
    fg_status st = FG_OK;
    int slots = s->mine ? opt_slots(s) : 0;
    for (int i = 0; st == FG_OK && i < slots; i++) {
        int dev;
        float *slot = sh_state_slot(s, i, &dev);
        st = scatter_range(s, s->topo.rank == 0 ? opt_state + (int64_t)i * s->P : NULL, slot,
                           dev, err);
    }
    return st;
}

fg_status sh_memory_report(void *state, int i, fg_memory_report *out, fg_error *err)
{
    sharded *s = state;
    if (i != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "strategy.sharded drives one device, not %d",
                            i + 1);
    fg_status st = s->svc->memory(s->svc->ctx, s->replica, out, err);
    if (st != FG_OK) return st;
    if (s->stage >= 2) out->grad_bytes += (uint64_t)(s->mine + 2 * s->cap) * s->gsz;
    if (s->zeros) out->grad_bytes += (uint64_t)s->cap * s->gsz; /* the padding's zeros */
    if (s->stage == 3) out->param_bytes += (uint64_t)(s->mine + 2 * s->work_cap) * s->psz;
    if (s->master) out->master_bytes += (uint64_t)s->mine * sizeof(float);
    out->other_bytes += sizeof(float);
    return FG_OK;
}

/* One checkpoint file per rank: this rank's range of the flat layout, the stage as the
 * layout tag (a shard set resumes only where the stage and world size are the same). */
fg_status sh_shard_describe(void *state, fg_shard_desc *out, fg_error *err)
{
    sharded *s = state;
    (void)err;
    out->per_rank_files = s->per_rank_ckpt;
    out->layout = s->stage;
    out->offset = s->lo < s->P ? s->lo : s->P;
    out->count = s->mine;
    return FG_OK;
}

fg_status sh_shard_read(void *state, float *params, float *buffers, float *opt_state,
                        fg_error *err)
{
    sharded *s = state;
    int dev;
    const float *master = sh_master(s, &dev);
    const float *mine = master ? master : s->stage == 3 ? s->pshard : s->params + s->lo;
    fg_status st = fetch(s, params, mine, master ? dev : s->device, s->mine, err);
    if (st == FG_OK && buffers)
        st = fetch(s, buffers, s->buffers.data, s->device, s->svc->buffer_count, err);
    int slots = s->mine ? opt_slots(s) : 0;
    for (int i = 0; st == FG_OK && i < slots; i++) {
        const float *slot = sh_state_slot(s, i, &dev);
        st = fetch(s, opt_state + (int64_t)i * s->mine, slot, dev, s->mine, err);
    }
    return st;
}
