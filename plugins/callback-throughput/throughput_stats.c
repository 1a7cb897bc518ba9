/* Interval samples and run totals of the throughput callback. */
#include "throughput_stats.h"

#include <math.h>
#include <string.h>

throughput_sample throughput_sample_read(const fg_metric *metrics, uint32_t count)
{
    throughput_sample s;
    memset(&s, 0, sizeof s);
    for (uint32_t i = 0; metrics != NULL && i < count; i++) {
        const char *name = metrics[i].name;
        double v = metrics[i].value;
        if (name == NULL || !isfinite(v) || v < 0)
            continue; /* a negative or non-finite time says nothing usable */
        if (strcmp(name, "throughput/samples_per_s") == 0) {
            s.has_rate = 1;
            s.samples_per_s = v;
        } else if (strcmp(name, "time/step_s") == 0) {
            s.has_step = 1;
            s.step_s = v;
        } else if (strcmp(name, "time/data_wait_s") == 0) {
            s.has_wait = 1;
            s.data_wait_s = v;
        }
    }
    return s;
}

int throughput_data_bound(const throughput_sample *s)
{
    return s->has_step && s->has_wait && s->step_s > 0 &&
           s->data_wait_s > THROUGHPUT_DATA_BOUND_SHARE * s->step_s;
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
    if (s->has_step) {
        t->steps += steps;
        t->seconds += s->step_s * (double)steps;
        if (s->has_wait)
            t->wait_seconds += s->data_wait_s * (double)steps;
        if (s->has_rate)
            t->samples += s->samples_per_s * s->step_s * (double)steps;
    } else if (s->has_rate) {
        t->rate_sum += s->samples_per_s;
        t->rate_count++;
    }
    if (s->has_step && s->has_wait) {
        t->intervals++;
        t->bound_intervals += throughput_data_bound(s);
    }
}

throughput_sample throughput_totals_mean(const throughput_totals *t)
{
    throughput_sample s;
    memset(&s, 0, sizeof s);
    if (t->steps > 0 && t->seconds > 0) {
        s.has_step = 1;
        s.step_s = t->seconds / (double)t->steps;
        s.has_wait = t->intervals > 0;
        s.data_wait_s = t->wait_seconds / (double)t->steps;
        if (t->samples > 0) {
            s.has_rate = 1;
            s.samples_per_s = t->samples / t->seconds;
        }
    }
    if (!s.has_rate && t->rate_count > 0) {
        s.has_rate = 1;
        s.samples_per_s = t->rate_sum / (double)t->rate_count;
    }
    return s;
}
