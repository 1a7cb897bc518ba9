/* What the throughput callback learns from the trainer's time metrics. Each training step
 * event carries means over the steps since the previous one:
 *   throughput/samples_per_s   samples per second of wall time
 *   time/step_s                wall time of one step
 *   time/data_wait_s           part of it the trainer spent waiting for the loader
 * The run totals weight each interval by its number of steps, so the run's mean is total
 * samples over total time, not a mean of rates. */
#ifndef THROUGHPUT_STATS_H
#define THROUGHPUT_STATS_H

#include <stdint.h>

#include <fulgur/callback.h>

/* Data wait above this share of a step makes the loader the bottleneck. */
#define THROUGHPUT_DATA_BOUND_SHARE 0.30

/* One interval, as read from an event; a `has_` flag is 0 when the metric was absent. */
typedef struct throughput_sample {
    int has_rate, has_step, has_wait;
    double samples_per_s;
    double step_s;
    double data_wait_s;
} throughput_sample;

typedef struct throughput_totals {
    int64_t last_step;   /* global_step of the previous step event */
    int64_t steps;       /* steps covered by intervals with time/step_s */
    double seconds;      /* sum of step_s x steps */
    double wait_seconds; /* sum of data_wait_s x steps, where present */
    double samples;      /* sum of samples_per_s x step_s x steps */
    double rate_sum;     /* rates of intervals without time/step_s: a plain mean */
    int64_t rate_count;
    int64_t intervals;       /* intervals with both step and data wait: advice can apply */
    int64_t bound_intervals; /* of those, the ones where the loader was the bottleneck */
} throughput_totals;

/* Reads the three metrics from an event's list. */
throughput_sample throughput_sample_read(const fg_metric *metrics, uint32_t count);

/* 1 when the sample shows the loader as the bottleneck. */
int throughput_data_bound(const throughput_sample *s);

/* Starts the totals at a fit's first step (a resumed run does not start at 0). */
void throughput_totals_reset(throughput_totals *t, int64_t global_step);

/* Adds one interval ending at global_step. */
void throughput_totals_add(throughput_totals *t, const throughput_sample *s, int64_t global_step);

/* The run as one sample: mean rate, mean step, mean wait (flags 0 when nothing was seen). */
throughput_sample throughput_totals_mean(const throughput_totals *t);

#endif
