/* fp8-mixed's amax histories, max-reduced across the ranks or the replicas of one process
 * once per optimizer step. */
#include <stdlib.h>
#include <string.h>

#include "fp8_amax.h"
#include "train_services.h"

static int is_history(const fg_tensor_info *ti)
{
    return ti->is_buffer && strstr(ti->name, ".fp8_amax_") != NULL;
}

/* Appends [offset, offset + count) to the runs, merged with the last when adjacent. */
static void add_run(fg_fp8_amax_sync *s, size_t offset, size_t count)
{
    if (s->runs && s->offset[s->runs - 1] + s->count[s->runs - 1] == offset) {
        s->count[s->runs - 1] += count;
        return;
    }
    s->offset[s->runs] = offset;
    s->count[s->runs] = count;
    s->runs++;
}

/* The host copies of the replicas' runs (replicas > 1): stages, then host, in one block. */
static fg_status alloc_replicas(fg_fp8_amax_sync *s, void *const *stages, int replicas,
                                fg_error *err)
{
    size_t stage_bytes = (size_t)replicas * sizeof *s->stages;
    s->stages = calloc(1, stage_bytes + (size_t)(replicas + 1) * s->floats * sizeof *s->host);
    if (!s->stages)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for the fp8 amax histories "
                            "of %d replicas", replicas);
    s->host = (float *)((char *)s->stages + stage_bytes);
    memcpy(s->stages, stages, stage_bytes);
    s->replicas = replicas;
    return FG_OK;
}

static fg_status list_runs(fg_fp8_amax_sync *s, const fg_model *m, size_t histories,
                           fg_error *err)
{
    s->offset = calloc(2 * histories, sizeof *s->offset); /* offset, then count */
    if (!s->offset)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory listing fp8 amax histories");
    s->count = s->offset + histories;
    /* tensors are laid out in declaration order, so adjacent histories merge */
    size_t n = fg_model_tensor_count(m);
    for (size_t i = 0; i < n; i++) {
        const fg_tensor_info *ti = fg_model_tensor(m, i);
        if (is_history(ti))
            add_run(s, ti->offset, ti->numel);
    }
    for (int i = 0; i < s->runs; i++)
        s->floats += s->count[i];
    return FG_OK;
}

static void bind_comm(fg_fp8_amax_sync *s, const fg_ranks *ranks)
{
    s->ranks = *ranks;
    void *native = FG_HAS_FIELD(s->be, fg_backend_vtable, queue_native) && s->be->queue_native
                       ? s->be->queue_native(s->bs, s->queue) : NULL;
    int ordered = native && FG_HAS_FIELD(ranks->comm, fg_comm_vtable, wait_on_queue) &&
                  ranks->comm->wait_on_queue;
    s->native_queue = ordered ? native : NULL;
}

fg_status fg_fp8_amax_sync_init(fg_fp8_amax_sync *s, const fg_model *m, const fg_ranks *ranks,
                                const fg_backend_vtable *be, void *bs, void *queue,
                                fg_replica *primary, void *const *stages, int replicas,
                                fg_error *err)
{
    memset(s, 0, sizeof *s);
    size_t n = fg_model_tensor_count(m), histories = 0;
    for (size_t i = 0; i < n; i++)
        histories += (size_t)is_history(fg_model_tensor(m, i));
    int across_ranks = ranks->comm && ranks->world_size > 1;
    if (!histories || (!across_ranks && replicas < 2))
        return FG_OK;
    size_t lo = 0, size = 0;
    if (primary)
        fg_replica_buffer_range(primary, &lo, &size);
    if (across_ranks && (!primary || lo != 0 || size != fg_model_buffers_size(m)))
        return fg_error_set(err, FG_UNAVAILABLE, "[precision] fp8-mixed across %d processes "
                            "reduces the amax histories of whole replicas (strategy ddp or "
                            "sharded); this rank holds a part of the model (a pipeline "
                            "stage), whose histories the other ranks do not have",
                            ranks->world_size);
    if (across_ranks && replicas > 1)
        return fg_error_set(err, FG_UNAVAILABLE, "[precision] fp8-mixed reduces the amax "
                            "histories across processes or across the replicas of one "
                            "process, not both (%d replicas in each of %d processes)",
                            replicas, ranks->world_size);
    s->be = be;
    s->bs = bs;
    s->queue = queue;
    s->buffers = primary ? fg_replica_buffers(primary) : NULL;
    fg_status st = list_runs(s, m, histories, err);
    if (st == FG_OK && across_ranks) bind_comm(s, ranks);
    if (st == FG_OK && !across_ranks) st = alloc_replicas(s, stages, replicas, err);
    if (st != FG_OK) fg_fp8_amax_sync_free(s);
    return st;
}

void fg_fp8_amax_sync_free(fg_fp8_amax_sync *s)
{
    free(s->offset); /* and count */
    free(s->stages); /* and host */
    memset(s, 0, sizeof *s);
}

/* Copies each run of replica stage's buffers to or from the packed host floats at h
 * (to_host: device to host), queue-ordered on the stage's queue. */
static fg_status copy_runs(fg_fp8_amax_sync *s, void *stage, float *h, int to_host,
                           fg_error *err)
{
    void *queue = fg_train_stage_queue(stage);
    int device = fg_train_stage_device(stage);
    float *buffers = fg_replica_buffers(fg_train_stage_model(stage));
    fg_status st = FG_OK;
    for (int i = 0; st == FG_OK && i < s->runs; i++) {
        float *dev = buffers + s->offset[i];
        size_t bytes = s->count[i] * sizeof(float);
        st = to_host ? s->be->copy(s->bs, queue, h, -1, dev, device, bytes, err)
                     : s->be->copy(s->bs, queue, dev, device, h, -1, bytes, err);
        h += s->count[i];
    }
    return st;
}

/* The replicas of one process: each one's runs to its host slot (after its queue's work),
 * the max in replica order into the last slot (a NaN wins, as the comms' max), copied back
 * to every replica. The last slot, the copies' source, is rewritten only after the next
 * step has synced every queue, so the copies back have completed by then. */
static fg_status reduce_replicas(fg_fp8_amax_sync *s, fg_error *err)
{
    fg_status st = FG_OK;
    for (int r = 0; st == FG_OK && r < s->replicas; r++)
        st = copy_runs(s, s->stages[r], s->host + (size_t)r * s->floats, 1, err);
    for (int r = 0; st == FG_OK && r < s->replicas; r++)
        st = s->be->queue_sync(s->bs, fg_train_stage_queue(s->stages[r]), err);
    if (st != FG_OK) return st;
    float *max = s->host + (size_t)s->replicas * s->floats;
    memcpy(max, s->host, s->floats * sizeof *max);
    for (int r = 1; r < s->replicas; r++) {
        const float *x = s->host + (size_t)r * s->floats;
        for (size_t i = 0; i < s->floats; i++)
            if (x[i] > max[i] || x[i] != x[i]) max[i] = x[i];
    }
    for (int r = 0; st == FG_OK && r < s->replicas; r++)
        st = copy_runs(s, s->stages[r], max, 0, err);
    return st;
}

fg_status fg_fp8_amax_sync_step(fg_fp8_amax_sync *s, fg_error *err)
{
    if (!s->runs)
        return FG_OK;
    if (s->replicas > 1)
        return reduce_replicas(s, err);
    /* a host-ordered comm reads the buffers once the queue's work is done */
    fg_status st = s->native_queue ? FG_OK : s->be->queue_sync(s->bs, s->queue, err);
    for (int i = 0; st == FG_OK && i < s->runs; i++)
        st = s->ranks.comm->all_reduce(s->ranks.comm_state, s->native_queue,
                                       s->buffers + s->offset[i], s->count[i], FG_F32,
                                       FG_REDUCE_MAX, err);
    return st;
}
