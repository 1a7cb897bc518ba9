/* fulgur estimate's pipeline: strategy.model-parallel's stages (the plugin's own plan,
 * redone from the same layer facts) and its GPipe schedule, micro-batch by micro-batch. */
#include <stdio.h>
#include <string.h>

#include "estimate.h"

/* The plugin's per-layer cost (mp_plan.c): forward flops a sample, or (balance = memory)
 * its f32 parameters three times (with gradients and one optimizer slot) plus its
 * activations for every sample of the micro-batches in flight. */
static double layer_cost(const fg_est_model *m, const fg_est_pipeline *p, int i)
{
    const fg_est_layer *l = &m->layer[i];
    if (!p->balance_memory) return (double)l->plan_flops;
    int64_t micro = (m->batch + p->chunks - 1) / p->chunks;
    return 3.0 * 4.0 * (double)l->params + (double)l->plan_act_bytes * (double)(micro * p->chunks);
}

/* The linear partition minimising the largest group's cost, ties to the earliest cut, as
 * plugins/strategy-model-parallel/mp_plan.c does. */
static void balance(const fg_est_model *m, fg_est_pipeline *p)
{
    int n = m->count, S = p->stages;
    static double cost[FG_EST_MAX_LAYERS + 1], best[FG_EST_MAX_STAGES + 1][FG_EST_MAX_LAYERS + 1];
    static int cut[FG_EST_MAX_STAGES + 1][FG_EST_MAX_LAYERS + 1];
    cost[0] = 0;
    for (int i = 0; i < n; i++) cost[i + 1] = cost[i] + layer_cost(m, p, i);
    for (int j = 1; j <= n; j++) best[1][j] = cost[j];
    for (int k = 2; k <= S; k++)
        for (int j = k; j <= n; j++) {
            best[k][j] = -1;
            for (int i = k - 1; i < j; i++) {
                double last = cost[j] - cost[i];
                double worst = best[k - 1][i] > last ? best[k - 1][i] : last;
                if (best[k][j] < 0 || worst < best[k][j]) {
                    best[k][j] = worst;
                    cut[k][j] = i;
                }
            }
        }
    for (int k = S, j = n; k >= 1; k--) {
        p->first[k - 1] = k > 1 ? cut[k][j] : 0;
        j = p->first[k - 1];
    }
}

static int layer_named(const fg_est_model *m, const char *name, size_t len)
{
    for (int i = 0; i < m->count; i++)
        if (strlen(m->layer[i].name) == len && strncmp(m->layer[i].name, name, len) == 0) return i;
    return -1;
}

/* "fc2, fc3": the layers that start stages 2, 3, ... */
static fg_status parse_split(const fg_est_model *m, fg_est_pipeline *p, fg_error *err)
{
    int n = 1;
    p->first[0] = 0;
    for (const char *s = p->split; *s;) {
        s += strspn(s, " \t,");
        size_t len = strcspn(s, ",");
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
        if (!len) break;
        int at = layer_named(m, s, len);
        if (at < 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur estimate: [strategy] split = %s: "
                                "the model has no layer '%.*s'", p->split, (int)len, s);
        if (at <= p->first[n - 1] || n == FG_EST_MAX_STAGES)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur estimate: [strategy] split = %s: "
                                "'%.*s' does not start a new stage in model order", p->split, (int)len, s);
        p->first[n++] = at;
        s += strcspn(s, ",");
    }
    if (n != p->stages)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur estimate: [strategy] split = %s gives "
                            "%d stages; the pipeline has %d devices (--devices-per-node)", p->split,
                            n, p->stages);
    return FG_OK;
}

fg_status fg_est_pipeline_plan(const fg_est_model *m, fg_est_pipeline *p, fg_error *err)
{
    if (p->stages < 2 || p->stages > FG_EST_MAX_STAGES || p->stages > m->count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur estimate: a pipeline of %d stages "
                            "over %d layers (2 to %d stages, at most one per layer)", p->stages,
                            m->count, FG_EST_MAX_STAGES);
    if (p->split && *p->split) return parse_split(m, p, err);
    balance(m, p);
    return FG_OK;
}

typedef struct stage_times {
    double fwd, bwd, params; /* a micro-batch's forward and backward; the stage's parameters */
    double send_s;           /* its output's transfer to the next stage, a micro-batch */
} stage_times;

static void stage_sums(const fg_est_model *m, const fg_est_link *l, const fg_est_pipeline *p, int s,
                       stage_times *t)
{
    int end = s + 1 < p->stages ? p->first[s + 1] : m->count;
    memset(t, 0, sizeof *t);
    for (int i = p->first[s]; i < end; i++) {
        t->fwd += m->layer[i].fwd_s / p->chunks;
        t->bwd += m->layer[i].bwd_s / p->chunks;
        t->params += (double)m->layer[i].params;
    }
    double micro = (double)m->batch / p->chunks;
    if (s + 1 < p->stages)
        t->send_s = fg_est_p2p_s(l, (double)m->layer[end - 1].out_elems * micro * m->act_bytes);
}

static double later(double a, double b) { return a > b ? a : b; }

void fg_est_predict_pipeline(const fg_est_model *m, const fg_est_link *l, const fg_est_pipeline *p,
                             fg_est_prediction *e)
{
    stage_times t[FG_EST_MAX_STAGES];
    double done[FG_EST_MAX_STAGES] = {0}; /* when each stage finishes what it was given */
    double sent[FG_EST_MAX_STAGES] = {0}; /* when each boundary's link is free */
    double comm = 0, busiest = 0, step = 0;
    int S = p->stages, M = p->chunks;
    for (int s = 0; s < S; s++) stage_sums(m, l, p, s, &t[s]);
    /* forwards: stage s takes micro-batch j when it has it and is free */
    for (int j = 0; j < M; j++) {
        double ready = 0;
        for (int s = 0; s < S; s++) {
            done[s] = later(done[s], ready) + t[s].fwd;
            if (s + 1 < S) {
                sent[s] = later(sent[s], done[s]) + t[s].send_s;
                comm += t[s].send_s;
                ready = sent[s];
            }
        }
    }
    /* backwards after the flush, from the last stage down; the gradient of the input of
     * stage s + 1 comes back over the same boundary (the other direction) */
    double back[FG_EST_MAX_STAGES] = {0};
    for (int j = 0; j < M; j++) {
        double ready = 0;
        for (int s = S - 1; s >= 0; s--) {
            done[s] = later(done[s], ready) + t[s].bwd;
            if (s > 0) {
                back[s - 1] = later(back[s - 1], done[s]) + t[s - 1].send_s;
                comm += t[s - 1].send_s;
                ready = back[s - 1];
            }
        }
    }
    for (int s = 0; s < S; s++) {
        double other = m->params > 0 ? m->other_s * t[s].params / (double)m->params : m->other_s / S;
        step = later(step, done[s] + other);
        busiest = later(busiest, M * (t[s].fwd + t[s].bwd) + other);
    }
    double single = m->other_s;
    for (int i = 0; i < m->count; i++) single += m->layer[i].fwd_s + m->layer[i].bwd_s;
    e->name = "pipeline";
    e->ranks = S;
    e->step_s = step;
    e->compute_s = busiest;
    e->comm_s = comm;
    e->exposed_comm_s = step - busiest > 0 ? step - busiest : 0;
    e->samples_per_s = (double)m->batch / step;
    e->tokens_per_s = e->samples_per_s * (double)m->positions;
    e->efficiency = e->samples_per_s / ((double)S * (double)m->batch / single);
    e->fits = -1;
    int used = snprintf(e->note, sizeof e->note, "%d stages (", S);
    for (int s = 0; s < S && used < (int)sizeof e->note; s++) {
        int end = s + 1 < S ? p->first[s + 1] : m->count;
        used += snprintf(e->note + used, sizeof e->note - (size_t)used, "%s%s..%s", s ? " | " : "",
                         m->layer[p->first[s]].name, m->layer[end - 1].name);
    }
    if (used < (int)sizeof e->note)
        snprintf(e->note + used, sizeof e->note - (size_t)used, "), %d micro-batch%s, GPipe bubble "
                 "(S-1)/(M+S-1) = %.0f%% for equal stages; %s", M, M == 1 ? "" : "es",
                 100.0 * (S - 1) / (M + S - 1), p->source);
}
