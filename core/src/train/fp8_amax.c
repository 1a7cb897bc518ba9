/* fp8-mixed's amax histories, max all-reduced across the ranks once per optimizer step. */
#include <stdlib.h>
#include <string.h>

#include "fp8_amax.h"

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

fg_status fg_fp8_amax_sync_init(fg_fp8_amax_sync *s, const fg_model *m, const fg_ranks *ranks,
                                const fg_backend_vtable *be, void *bs, void *queue,
                                fg_replica *primary, fg_error *err)
{
    memset(s, 0, sizeof *s);
    size_t n = fg_model_tensor_count(m), histories = 0;
    for (size_t i = 0; i < n; i++)
        histories += (size_t)is_history(fg_model_tensor(m, i));
    if (!histories || !ranks->comm || ranks->world_size < 2)
        return FG_OK;
    size_t lo = 0, size = 0;
    if (primary)
        fg_replica_buffer_range(primary, &lo, &size);
    if (!primary || lo != 0 || size != fg_model_buffers_size(m))
        return fg_error_set(err, FG_UNAVAILABLE, "[precision] fp8-mixed across %d processes "
                            "reduces the amax histories of whole replicas (strategy ddp or "
                            "sharded); this rank holds a part of the model (a pipeline "
                            "stage), whose histories the other ranks do not have",
                            ranks->world_size);
    s->offset = calloc(histories, sizeof *s->offset);
    s->count = calloc(histories, sizeof *s->count);
    if (!s->offset || !s->count) {
        fg_fp8_amax_sync_free(s);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory listing fp8 amax histories");
    }
    /* tensors are laid out in declaration order, so adjacent histories merge */
    for (size_t i = 0; i < n; i++) {
        const fg_tensor_info *ti = fg_model_tensor(m, i);
        if (is_history(ti))
            add_run(s, ti->offset, ti->numel);
    }
    for (int i = 0; i < s->runs; i++)
        s->floats += s->count[i];
    s->ranks = *ranks;
    s->be = be;
    s->bs = bs;
    s->queue = queue;
    s->buffers = fg_replica_buffers(primary);
    void *native = FG_HAS_FIELD(be, fg_backend_vtable, queue_native) && be->queue_native
                       ? be->queue_native(bs, queue) : NULL;
    int ordered = native && FG_HAS_FIELD(ranks->comm, fg_comm_vtable, wait_on_queue) &&
                  ranks->comm->wait_on_queue;
    s->native_queue = ordered ? native : NULL;
    return FG_OK;
}

void fg_fp8_amax_sync_free(fg_fp8_amax_sync *s)
{
    free(s->offset);
    free(s->count);
    memset(s, 0, sizeof *s);
}

fg_status fg_fp8_amax_sync_step(fg_fp8_amax_sync *s, fg_error *err)
{
    if (!s->runs)
        return FG_OK;
    /* a host-ordered comm reads the buffers once the queue's work is done */
    fg_status st = s->native_queue ? FG_OK : s->be->queue_sync(s->bs, s->queue, err);
    for (int i = 0; st == FG_OK && i < s->runs; i++)
        st = s->ranks.comm->all_reduce(s->ranks.comm_state, s->native_queue,
                                       s->buffers + s->offset[i], s->count[i], FG_F32,
                                       FG_REDUCE_MAX, err);
    return st;
}
