/* strategy.model-parallel: checkpoints and memory, stage by stage. No stage holds the
 * whole model, so the trainer asks for it through gather_state/scatter_state: each stage
 * copies its slices to (or from) their places in the plain model's layout. */
#include <string.h>

#include "mp.h"

/* n floats between host memory and a stage's device memory, waited for. */
static fg_status move(mp *d, const mp_stage *g, float *dst, int dst_dev, const float *src,
                      int src_dev, int64_t n, fg_error *err)
{
    if (n <= 0) return FG_OK;
    fg_status st = d->be->copy(d->be_state, g->queue, dst, dst_dev, src, src_dev,
                               (size_t)n * sizeof(float), err);
    return st == FG_OK ? d->be->queue_sync(d->be_state, g->queue, err) : st;
}

/* The stage's optimizer state slot i (its param_count floats), NULL past the last. */
static float *mp_opt_state(mp *d, const mp_stage *g, int32_t i)
{
    uint32_t dt;
    int64_t at, n;
    return d->svc->region(d->svc->ctx, g->stage, FG_REGION_OPT_STATE, i, &dt, &at, &n);
}

fg_status mp_gather_state(void *state, float *params, float *buffers, float *opt_state,
                          fg_error *err)
{
    mp *d = state;
    const fg_train_services *svc = d->svc;
    int64_t np = svc->param_count, nb = svc->buffer_count;
    /* the padding between slices belongs to no stage: zero, as in a plain replica */
    if (params) memset(params, 0, (size_t)np * sizeof(float));
    if (buffers && nb) memset(buffers, 0, (size_t)nb * sizeof(float));
    fg_status st = FG_OK;
    for (int s = 0; s < d->stages && st == FG_OK; s++) {
        const mp_stage *g = &d->s[s];
        if (params)
            st = move(d, g, params + g->param_offset, -1, g->params, g->device, g->param_count,
                      err);
        if (st == FG_OK && buffers)
            st = move(d, g, buffers + g->buffer_offset, -1, g->buffers, g->device,
                      g->buffer_count, err);
        for (int32_t i = 0; st == FG_OK && opt_state; i++) {
            const float *slot = mp_opt_state(d, g, i);
            if (!slot) break;
            if (s == 0) memset(opt_state + (size_t)i * (size_t)np, 0, (size_t)np * sizeof(float));
            st = move(d, g, opt_state + (size_t)i * (size_t)np + g->param_offset, -1, slot,
                      g->device, g->param_count, err);
        }
    }
    return st;
}

fg_status mp_scatter_state(void *state, const float *opt_state, fg_error *err)
{
    mp *d = state;
    const fg_train_services *svc = d->svc;
    size_t np = (size_t)svc->param_count;
    fg_status st = FG_OK;
    for (int s = 0; s < d->stages && st == FG_OK && opt_state; s++) {
        const mp_stage *g = &d->s[s];
        for (int32_t i = 0; st == FG_OK; i++) {
            float *slot = mp_opt_state(d, g, i);
            if (!slot) break;
            st = move(d, g, slot, g->device, opt_state + (size_t)i * np + g->param_offset, -1,
                      g->param_count, err);
        }
    }
    return st;
}

fg_status mp_memory_report(void *state, int i, fg_memory_report *out, fg_error *err)
{
    mp *d = state;
    if (i < 0 || i >= d->stages * d->replicas)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "strategy.model-parallel drives %d "
                            "devices, not device %d", d->stages * d->replicas, i);
    const mp_stage *g = &d->s[i];
    fg_status st = d->svc->memory(d->svc->ctx, g->stage, out, err);
    size_t rows = (size_t)d->chunks * (size_t)d->micro;
    if (st == FG_OK)
        out->other_bytes += (g->recv_x ? rows * (size_t)g->in_elems * sizeof(float) : 0) +
                            (g->recv_dy ? rows * (size_t)g->out_elems * sizeof(float) : 0) +
                            (g->recv_grad ? (size_t)g->param_count * sizeof(float) : 0);
    return st;
}
