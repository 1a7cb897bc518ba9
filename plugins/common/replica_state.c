/* A whole-model replica's checkpoint state, from the stage's regions or the offload's host
 * memory. */
#include "replica_state.h"

#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "half.h"

static fg_status fetch(const fg_plugin_replica_state *r, void *dst, const void *src,
                       size_t bytes, fg_error *err)
{
    void *queue = r->svc->queue(r->svc->ctx, r->stage);
    fg_status st = bytes ? r->be->copy(r->be_state, queue, dst, -1, src, r->device, bytes, err)
                         : FG_OK;
    return st == FG_OK ? r->be->queue_sync(r->be_state, queue, err) : st;
}

/* The stage's parameters as f32 (a half working copy widened, exactly). */
static fg_status params_f32(const fg_plugin_replica_state *r, float *out, fg_error *err)
{
    uint32_t dt;
    int64_t at, n;
    void *p = r->svc->region(r->svc->ctx, r->stage, FG_REGION_PARAMS, 0, &dt, &at, &n);
    if (!p || !n) return FG_OK;
    if (dt == FG_F32) return fetch(r, out + at, p, (size_t)n * sizeof(float), err);
    uint16_t *half = malloc((size_t)n * sizeof *half);
    if (!half) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory reading parameters");
    fg_status st = fetch(r, half, p, (size_t)n * sizeof *half, err);
    if (st == FG_OK && fg_cpu_convert(NULL, out + at, FG_CPU_F32, half, (int)dt, (size_t)n) != 0)
        st = fg_error_set(err, FG_INTERNAL, "parameters of dtype %u", dt);
    free(half);
    return st;
}

static fg_status store(const fg_plugin_replica_state *r, void *dst, const void *src,
                       size_t bytes, fg_error *err)
{
    void *queue = r->svc->queue(r->svc->ctx, r->stage);
    fg_status st = bytes ? r->be->copy(r->be_state, queue, dst, r->device, src, -1, bytes, err)
                         : FG_OK;
    return st == FG_OK ? r->be->queue_sync(r->be_state, queue, err) : st;
}

/* Optimizer state slot i where it lives: the offload's host memory (all P values), or the
 * stage's region (n values from parameter `at`); *p NULL past the last slot. */
static void slot_at(const fg_plugin_replica_state *r, int i, float **p, int64_t *at,
                    int64_t *n)
{
    uint32_t dt;
    *at = 0;
    *n = r->svc->param_count;
    if (r->offload)
        *p = fg_offload_slot(r->offload, i);
    else
        *p = r->svc->region(r->svc->ctx, r->stage, FG_REGION_OPT_STATE, i, &dt, at, n);
}

/* Every optimizer state slot copied into `gather`, or from `scatter` (the other NULL), host
 * memory of P values a slot. */
static fg_status move_slots(const fg_plugin_replica_state *r, float *gather,
                            const float *scatter, fg_error *err)
{
    fg_status st = FG_OK;
    for (int i = 0; st == FG_OK && i < 8; i++) {
        float *s;
        int64_t at, n;
        slot_at(r, i, &s, &at, &n);
        if (!s) break;
        size_t bytes = (size_t)n * sizeof(float);
        int64_t host_at = (int64_t)i * r->svc->param_count + at;
        if (r->offload && gather)
            memcpy(gather + host_at, s, bytes);
        else if (r->offload)
            memcpy(s, scatter + host_at, bytes);
        else if (gather)
            st = fetch(r, gather + host_at, s, bytes, err);
        else
            st = store(r, s, scatter + host_at, bytes, err);
    }
    return st;
}

fg_status fg_plugin_replica_gather(const fg_plugin_replica_state *r, float *params,
                                   float *buffers, float *opt_state, fg_error *err)
{
    int64_t P = r->svc->param_count;
    fg_status st = FG_OK;
    if (params && r->offload)
        memcpy(params, fg_offload_master(r->offload), (size_t)P * sizeof(float));
    else if (params)
        st = params_f32(r, params, err);
    if (st == FG_OK && buffers) {
        uint32_t dt;
        int64_t at, n;
        void *b = r->svc->region(r->svc->ctx, r->stage, FG_REGION_BUFFERS, 0, &dt, &at, &n);
        if (b) st = fetch(r, buffers + at, b, (size_t)n * sizeof(float), err);
    }
    return st == FG_OK && opt_state ? move_slots(r, opt_state, NULL, err) : st;
}

fg_status fg_plugin_replica_scatter(const fg_plugin_replica_state *r, const float *opt_state,
                                    fg_error *err)
{
    return move_slots(r, NULL, opt_state, err);
}
