/* fp8-mixed's amax histories, max-reduced across the ranks or across the stages of one
 * process holding the same part of the model, once per optimizer step. */
#include <stdlib.h>
#include <string.h>

#include "fp8_amax.h"
#include "train_services.h"

static int is_history(const fg_tensor_info *ti)
{
    return ti->is_buffer && strstr(ti->name, ".fp8_amax_") != NULL;
}

/* The model's histories, in declaration order (the buffers' layout order) */
static size_t list_histories(const fg_model *m, fg_fp8_amax_history *out)
{
    size_t n = fg_model_tensor_count(m), k = 0;
    for (size_t i = 0; i < n; i++) {
        const fg_tensor_info *ti = fg_model_tensor(m, i);
        if (!is_history(ti)) continue;
        if (out) out[k] = (fg_fp8_amax_history){ti->name, ti->offset, ti->numel};
        k++;
    }
    return k;
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

/* Across processes: one whole-model replica in each. */
static fg_status check_ranks(const fg_model *m, const fg_ranks *ranks, fg_replica *primary,
                             int stage_count, fg_error *err)
{
    size_t lo = 0, size = 0;
    if (primary)
        fg_replica_buffer_range(primary, &lo, &size);
    if (!primary || lo != 0 || size != fg_model_buffers_size(m))
        return fg_error_set(err, FG_UNAVAILABLE, "[precision] fp8-mixed across %d processes "
                            "reduces the amax histories of whole replicas (strategy ddp or "
                            "sharded); this rank holds a part of the model (a pipeline "
                            "stage), whose histories the other ranks do not have",
                            ranks->world_size);
    if (stage_count > 1)
        return fg_error_set(err, FG_UNAVAILABLE, "[precision] fp8-mixed reduces the amax "
                            "histories across processes or across the replicas of one "
                            "process, not both (%d stages in each of %d processes)",
                            stage_count, ranks->world_size);
    return FG_OK;
}

/* The groups of this process's stages by the buffer range each holds. */
static fg_status plan_stages(fg_fp8_amax_sync *s, void *const *stages, int stage_count,
                             const fg_fp8_amax_history *h, size_t histories, fg_error *err)
{
    size_t *lo = calloc((size_t)stage_count, sizeof *lo);
    size_t *n = calloc((size_t)stage_count, sizeof *n);
    s->stages = calloc((size_t)stage_count, sizeof *s->stages);
    fg_status st = FG_OK;
    if (!lo || !n || !s->stages)
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for the fp8 amax histories");
    for (int i = 0; st == FG_OK && i < stage_count; i++) {
        s->stages[i] = stages[i];
        fg_replica_buffer_range(fg_train_stage_model(stages[i]), &lo[i], &n[i]);
    }
    if (st == FG_OK)
        st = fg_fp8_amax_plan_groups(&s->plan, lo, n, stage_count, h, histories, err);
    free(lo);
    free(n);
    return st;
}

fg_status fg_fp8_amax_sync_init(fg_fp8_amax_sync *s, const fg_model *m, const fg_ranks *ranks,
                                const fg_backend_vtable *be, void *bs, void *queue,
                                fg_replica *primary, void *const *stages, int stage_count,
                                fg_error *err)
{
    memset(s, 0, sizeof *s);
    size_t histories = list_histories(m, NULL);
    int across_ranks = ranks->comm && ranks->world_size > 1;
    if (!histories || (!across_ranks && stage_count < 2))
        return FG_OK;
    fg_status st = across_ranks ? check_ranks(m, ranks, primary, stage_count, err) : FG_OK;
    if (st != FG_OK) return st;
    fg_fp8_amax_history *h = calloc(histories, sizeof *h);
    if (!h) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory listing fp8 amax histories");
    list_histories(m, h);
    s->be = be;
    s->bs = bs;
    s->queue = queue;
    s->buffers = primary ? fg_replica_buffers(primary) : NULL;
    if (across_ranks) {
        st = fg_fp8_amax_plan_ranks(&s->plan, h, histories, err);
        bind_comm(s, ranks);
    } else {
        st = plan_stages(s, stages, stage_count, h, histories, err);
    }
    free(h);
    if (st != FG_OK) fg_fp8_amax_sync_free(s);
    return st;
}

void fg_fp8_amax_sync_free(fg_fp8_amax_sync *s)
{
    fg_fp8_amax_plan_free(&s->plan);
    free(s->stages);
    memset(s, 0, sizeof *s);
}

/* Copies each of group x's runs of stage's buffers to or from the packed host floats at h
 * (to_host: device to host), queue-ordered on the stage's queue. */
static fg_status copy_runs(fg_fp8_amax_sync *s, const fg_fp8_amax_group *x, void *stage,
                           float *h, int to_host, fg_error *err)
{
    void *queue = fg_train_stage_queue(stage);
    int device = fg_train_stage_device(stage);
    float *buffers = fg_replica_buffers(fg_train_stage_model(stage));
    const fg_fp8_amax_plan *p = &s->plan;
    fg_status st = FG_OK;
    for (int i = x->run0; st == FG_OK && i < x->run0 + x->runs; i++) {
        float *dev = buffers + p->offset[i];
        size_t bytes = p->count[i] * sizeof(float);
        st = to_host ? s->be->copy(s->bs, queue, h, -1, dev, device, bytes, err)
                     : s->be->copy(s->bs, queue, dev, device, h, -1, bytes, err);
        h += p->count[i];
    }
    return st;
}

/* Each group's stages: their runs to their host slots (every group's copies enqueued before
 * the first sync, so the devices' queues drain at once), the max into the last slot,
 * copied back to every stage of the group. The last slot, the copies' source, is
 * rewritten only after the next step has synced every queue, so the copies back have
 * completed by then. */
static fg_status reduce_groups(fg_fp8_amax_sync *s, fg_error *err)
{
    fg_fp8_amax_plan *p = &s->plan;
    fg_status st = FG_OK;
    for (int g = 0; g < p->groups; g++) {
        const fg_fp8_amax_group *x = &p->group[g];
        for (int r = 0; st == FG_OK && r < x->replicas; r++)
            st = copy_runs(s, x, s->stages[x->members[r]], x->host + (size_t)r * x->floats, 1,
                           err);
    }
    for (int g = 0; g < p->groups; g++) {
        const fg_fp8_amax_group *x = &p->group[g];
        for (int r = 0; st == FG_OK && r < x->replicas; r++)
            st = s->be->queue_sync(s->bs, fg_train_stage_queue(s->stages[x->members[r]]), err);
    }
    for (int g = 0; st == FG_OK && g < p->groups; g++) {
        fg_fp8_amax_group *x = &p->group[g];
        fg_fp8_amax_plan_max(x);
        float *max = x->host + (size_t)x->replicas * x->floats;
        for (int r = 0; st == FG_OK && r < x->replicas; r++)
            st = copy_runs(s, x, s->stages[x->members[r]], max, 0, err);
    }
    return st;
}

fg_status fg_fp8_amax_sync_step(fg_fp8_amax_sync *s, fg_error *err)
{
    const fg_fp8_amax_plan *p = &s->plan;
    if (!p->runs)
        return FG_OK;
    if (p->groups)
        return reduce_groups(s, err);
    /* a host-ordered comm reads the buffers once the queue's work is done */
    fg_status st = s->native_queue ? FG_OK : s->be->queue_sync(s->bs, s->queue, err);
    for (int i = 0; st == FG_OK && i < p->runs; i++)
        st = s->ranks.comm->all_reduce(s->ranks.comm_state, s->native_queue,
                                       s->buffers + p->offset[i], p->count[i], FG_F32,
                                       FG_REDUCE_MAX, err);
    return st;
}
