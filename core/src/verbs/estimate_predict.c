/* fulgur estimate's strategy model: one device's layer times, the link, and when each
 * collective can run. One link per rank, used by one collective at a time (a queue);
 * compute and communication overlap only where the strategy starts a collective early. */
#include <string.h>

#include "estimate.h"

typedef struct timeline {
    double link_free; /* when the link finishes what it was given */
} timeline;

/* Starts a collective of `secs` once `ready` and the link are both there; its end. */
static double queue_comm(timeline *t, double ready, double secs)
{
    double start = ready > t->link_free ? ready : t->link_free;
    t->link_free = start + secs;
    return t->link_free;
}

static double layer_bytes(const fg_est_model *m, int i)
{
    return (double)m->layer[i].params * m->grad_bytes;
}

/* Backward in reverse layer order; a bucket is cut when it holds bucket_bytes or at the
 * first layer, and its reduction (all-reduce or reduce-scatter) starts then. Returns when
 * the last reduction ends, measured from the start of backward; *comm the link time. */
static double bucketed_backward(const fg_est_model *m, const fg_est_link *l, int p,
                                double bucket_bytes, int scatter, double *comm)
{
    timeline t = {0};
    double now = 0, pending = 0, end = 0;
    *comm = 0;
    for (int i = m->count - 1; i >= 0; i--) {
        now += m->layer[i].bwd_s;
        pending += layer_bytes(m, i);
        if (pending > 0 && (pending >= bucket_bytes || i == 0)) {
            double c = scatter ? fg_est_reduce_scatter_s(l, p, pending) : fg_est_all_reduce_s(l, p, pending);
            *comm += c;
            end = queue_comm(&t, now, c);
            pending = 0;
        }
    }
    return end > now ? end : now;
}

static void totals(const fg_est_model *m, double *fwd, double *bwd)
{
    *fwd = *bwd = 0;
    for (int i = 0; i < m->count; i++) {
        *fwd += m->layer[i].fwd_s;
        *bwd += m->layer[i].bwd_s;
    }
}

/* Stage 3: a layer's parameters are gathered before its forward and again before its
 * backward, the next layer's gather started (prefetched) when a layer starts computing;
 * gradients reduce-scattered in buckets as in stage 2, on the same link. */
static double stage3_step(const fg_est_model *m, const fg_est_link *l, int p, double bucket_bytes,
                          double *comm)
{
    timeline t = {0};
    double now = 0, pending = 0, gathered = 0;
    *comm = 0;
    int first = 1;
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < m->count; k++) {
            int i = pass == 0 ? k : m->count - 1 - k;
            double bytes = layer_bytes(m, i);
            if (bytes > 0) {
                double g = fg_est_all_gather_s(l, p, bytes);
                *comm += g;
                gathered = queue_comm(&t, first ? 0 : now, g);
                first = 0;
                if (gathered > now) now = gathered;
            }
            now += pass == 0 ? m->layer[i].fwd_s : m->layer[i].bwd_s;
            if (pass == 1) {
                pending += bytes;
                if (pending > 0 && (pending >= bucket_bytes || i == 0)) {
                    double c = fg_est_reduce_scatter_s(l, p, pending);
                    *comm += c;
                    double end = queue_comm(&t, now, c);
                    if (i == 0 && end > now) now = end;
                    pending = 0;
                }
            }
        }
    }
    return now;
}

static void finish(const fg_est_model *m, fg_est_prediction *e, const char *name, int p,
                   double step, double compute, double comm)
{
    e->name = name;
    e->ranks = p;
    e->step_s = step;
    e->compute_s = compute;
    e->comm_s = comm;
    e->exposed_comm_s = step - compute > 0 ? step - compute : 0;
    e->samples_per_s = (double)p * (double)m->batch / step;
    e->tokens_per_s = e->samples_per_s * (double)m->positions;
    e->fits = -1;
}

/* The data-parallel strategies, out[0 .. FG_EST_PIPELINE) (estimate_pipeline.c: the last) */
void fg_est_predict(const fg_est_model *m, const fg_est_link *l, int p, double bucket_bytes,
                    fg_est_prediction out[FG_EST_STRATEGIES])
{
    double fwd, bwd, comm;
    totals(m, &fwd, &bwd);
    double compute = fwd + bwd + m->other_s;
    double all = (double)m->params * m->grad_bytes;
    memset(out, 0, sizeof(fg_est_prediction) * FG_EST_PIPELINE);
    finish(m, &out[FG_EST_SINGLE], "single", 1, compute, compute, 0);
    double b = bucketed_backward(m, l, p, bucket_bytes, 0, &comm);
    finish(m, &out[FG_EST_DDP], "ddp", p, fwd + b + m->other_s, compute, comm);
    /* stages 1-2: the updated shards all-gathered after the optimizer step, not hidden */
    double gather = fg_est_all_gather_s(l, p, all);
    finish(m, &out[FG_EST_SHARDED1], "sharded stage 1", p, fwd + b + m->other_s + gather, compute,
           comm + gather);
    b = bucketed_backward(m, l, p, bucket_bytes, 1, &comm);
    finish(m, &out[FG_EST_SHARDED2], "sharded stage 2", p, fwd + b + m->other_s + gather, compute,
           comm + gather);
    double s3 = stage3_step(m, l, p, bucket_bytes, &comm);
    finish(m, &out[FG_EST_SHARDED3], "sharded stage 3", p, s3 + m->other_s, compute, comm);
    for (int i = 0; i < FG_EST_PIPELINE; i++)
        out[i].efficiency = out[i].samples_per_s / ((double)out[i].ranks * out[FG_EST_SINGLE].samples_per_s);
}
