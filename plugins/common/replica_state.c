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

static fg_status stage_slot(const fg_plugin_replica_state *r, int i, float **p, int64_t *at,
                            int64_t *n)
{
    uint32_t dt;
    *p = r->svc->region(r->svc->ctx, r->stage, FG_REGION_OPT_STATE, i, &dt, at, n);
    return FG_OK;
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
    for (int i = 0; st == FG_OK && opt_state && i < 8; i++) {
        float *dst = opt_state + (int64_t)i * P;
        if (r->offload) {
            float *s = fg_offload_slot(r->offload, i);
            if (!s) break;
            memcpy(dst, s, (size_t)P * sizeof(float));
            continue;
        }
        float *s;
        int64_t at, n;
        stage_slot(r, i, &s, &at, &n);
        if (!s) break;
        st = fetch(r, dst + at, s, (size_t)n * sizeof(float), err);
    }
    return st;
}

fg_status fg_plugin_replica_scatter(const fg_plugin_replica_state *r, const float *opt_state,
                                    fg_error *err)
{
    int64_t P = r->svc->param_count;
    fg_status st = FG_OK;
    void *queue = r->svc->queue(r->svc->ctx, r->stage);
    for (int i = 0; st == FG_OK && i < 8; i++) {
        const float *src = opt_state + (int64_t)i * P;
        if (r->offload) {
            float *s = fg_offload_slot(r->offload, i);
            if (!s) break;
            memcpy(s, src, (size_t)P * sizeof(float));
            continue;
        }
        float *s;
        int64_t at, n;
        stage_slot(r, i, &s, &at, &n);
        if (!s) break;
        st = n ? r->be->copy(r->be_state, queue, s, r->device, src + at, -1,
                             (size_t)n * sizeof(float), err) : FG_OK;
        if (st == FG_OK) st = r->be->queue_sync(r->be_state, queue, err);
    }
    return st;
}
