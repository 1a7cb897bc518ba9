/* Interval samples, bottlenecks and run totals of the throughput callback. */
#include "throughput_stats.h"

#include <math.h>
#include <string.h>

static const char *const field_names[TP_FIELDS] = {
    "throughput/samples_per_s", "time/step_s", "time/data_wait_s", "time/h2d_s",
    "time/forward_s", "time/backward_s", "time/grad_sync_s", "time/optimizer_s",
    "time/offload_update_s", "time/offload_copy_wait_s", "time/comm_s", "time/comm_hidden_s"};

/* The parts a step splits into besides data wait (and what "other" is computed from). */
static const tp_field split_parts[] = {TP_H2D, TP_FORWARD, TP_BACKWARD, TP_GRAD_SYNC,
                                       TP_OPTIMIZER, TP_OFFLOAD_UPDATE, TP_OFFLOAD_WAIT};

const char *throughput_field_name(tp_field f)
{
    return f >= 0 && f < TP_FIELDS ? field_names[f] : "?";
}

/* Index of field f in the list: the remembered position when it still holds the same
 * name pointer, else a search (remembered for next time); -1 when absent. */
static int locate(throughput_reader *r, tp_field f, const fg_metric *m, uint32_t count)
{
    if (r->ptr[f] != NULL && r->index[f] < count && m[r->index[f]].name == r->ptr[f])
        return (int)r->index[f];
    for (uint32_t i = 0; i < count; i++) {
        if (m[i].name != NULL && strcmp(m[i].name, field_names[f]) == 0) {
            r->ptr[f] = m[i].name;
            r->index[f] = i;
            return (int)i;
        }
    }
    return -1;
}

throughput_sample throughput_sample_read(throughput_reader *r, const fg_metric *metrics,
                                         uint32_t count)
{
    throughput_sample s;
    memset(&s, 0, sizeof s);
    for (int f = 0; metrics != NULL && f < TP_FIELDS; f++) {
        int i = locate(r, (tp_field)f, metrics, count);
        if (i < 0 || !isfinite(metrics[i].value) || metrics[i].value < 0)
            continue; /* a negative or non-finite time says nothing usable */
        s.has[f] = 1;
        s.v[f] = metrics[i].value;
    }
    return s;
}

double throughput_share(const throughput_sample *s, tp_field f)
{
    if (!s->has[TP_STEP] || s->v[TP_STEP] <= 0 || !s->has[f]) return 0;
    return s->v[f] / s->v[TP_STEP];
}

int throughput_has_split(const throughput_sample *s)
{
    for (size_t i = 0; i < sizeof split_parts / sizeof split_parts[0]; i++)
        if (s->has[split_parts[i]]) return 1;
    return 0;
}

double throughput_other(const throughput_sample *s)
{
    double rest = s->v[TP_STEP] - (s->has[TP_WAIT] ? s->v[TP_WAIT] : 0);
    for (size_t i = 0; i < sizeof split_parts / sizeof split_parts[0]; i++)
        if (s->has[split_parts[i]]) rest -= s->v[split_parts[i]];
    return rest > 0 ? rest : 0;
}

int throughput_data_bound(const throughput_sample *s)
{
    return s->has[TP_WAIT] && throughput_share(s, TP_WAIT) > THROUGHPUT_DATA_BOUND_SHARE;
}

tp_bottleneck throughput_bottleneck(const throughput_sample *s)
{
    if (!s->has[TP_STEP] || s->v[TP_STEP] <= 0) return TP_NONE;
    int split = throughput_has_split(s);
    double other = split ? throughput_other(s) / s->v[TP_STEP] : 0;
    const struct { tp_bottleneck kind; double share, above; } parts[] = {
        {TP_LOADER, throughput_share(s, TP_WAIT), THROUGHPUT_DATA_BOUND_SHARE},
        {TP_COPY, throughput_share(s, TP_H2D), 0.20},
        {TP_SYNC, throughput_share(s, TP_GRAD_SYNC), 0.30},
        {TP_OPTIM, throughput_share(s, TP_OPTIMIZER) + throughput_share(s, TP_OFFLOAD_UPDATE) +
                       throughput_share(s, TP_OFFLOAD_WAIT), 0.30},
        {TP_OVERHEAD, other, 0.40},
    };
    tp_bottleneck best = TP_NONE;
    double best_share = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i].share > parts[i].above && parts[i].share > best_share) {
            best = parts[i].kind;
            best_share = parts[i].share;
        }
    if (best == TP_NONE && split &&
        throughput_share(s, TP_FORWARD) + throughput_share(s, TP_BACKWARD) >= 0.60)
        best = TP_COMPUTE;
    return best;
}

void throughput_totals_reset(throughput_totals *t, int64_t global_step)
{
    memset(t, 0, sizeof *t);
    t->last_step = global_step;
}

void throughput_totals_add(throughput_totals *t, const throughput_sample *s, int64_t global_step)
{
    int64_t steps = global_step - t->last_step;
    if (steps < 1)
        steps = 1; /* an event without progress still counts as one interval's worth */
    t->last_step = global_step;
    if (s->has[TP_STEP]) {
        t->steps += steps;
        for (int f = TP_STEP; f < TP_FIELDS; f++) {
            if (!s->has[f]) continue;
            t->sum[f] += s->v[f] * (double)steps;
            t->any[f] = 1;
        }
        if (s->has[TP_RATE]) {
            t->sum[TP_RATE] += s->v[TP_RATE] * s->v[TP_STEP] * (double)steps;
            t->any[TP_RATE] = 1;
        }
    } else if (s->has[TP_RATE]) {
        t->rate_sum += s->v[TP_RATE];
        t->rate_count++;
    }
    if (s->has[TP_STEP] && s->has[TP_WAIT]) {
        t->intervals++;
        t->bound[throughput_bottleneck(s)]++;
    }
}

throughput_sample throughput_totals_mean(const throughput_totals *t)
{
    throughput_sample s;
    memset(&s, 0, sizeof s);
    if (t->steps > 0 && t->sum[TP_STEP] > 0) {
        for (int f = TP_STEP; f < TP_FIELDS; f++) {
            s.has[f] = t->any[f];
            s.v[f] = t->sum[f] / (double)t->steps;
        }
        s.has[TP_WAIT] = t->intervals > 0;
        if (t->sum[TP_RATE] > 0) {
            s.has[TP_RATE] = 1;
            s.v[TP_RATE] = t->sum[TP_RATE] / t->sum[TP_STEP];
        }
    }
    if (!s.has[TP_RATE] && t->rate_count > 0) {
        s.has[TP_RATE] = 1;
        s.v[TP_RATE] = t->rate_sum / (double)t->rate_count;
    }
    return s;
}
