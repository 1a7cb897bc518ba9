/* What the throughput callback learns from the trainer's time metrics. Each training step
 * event carries means over the steps since the previous one:
 *   throughput/samples_per_s   samples per second of step time
 *   time/step_s                time of one optimizer step
 *   time/data_wait_s           the part spent waiting for the loader
 *   time/h2d_s, time/forward_s, time/backward_s, time/optimizer_s
 *                              the phases the trainer timed (when this callback asked)
 *   time/grad_sync_s           communication the step waited for (exposed)
 *   time/offload_update_s, time/offload_copy_wait_s
 *                              offload_optimizer = host: the update on the host's cores and
 *                              the wait for the gradients to reach the host
 *   time/comm_s, time/comm_hidden_s
 *                              all communication time, and its part hidden behind backward
 * The run totals weight each interval by its number of steps, so the run's mean is total
 * samples over total time, not a mean of rates. */
#ifndef THROUGHPUT_STATS_H
#define THROUGHPUT_STATS_H

#include <stdint.h>

#include <fulgur/callback.h>

/* The metrics read, in the order the line shows the parts of a step. */
typedef enum tp_field {
    TP_RATE = 0,
    TP_STEP,
    TP_WAIT,
    TP_H2D,
    TP_FORWARD,
    TP_BACKWARD,
    TP_GRAD_SYNC,
    TP_OPTIMIZER,
    TP_OFFLOAD_UPDATE, /* offload_optimizer = host: the host update, and the wait for the */
    TP_OFFLOAD_WAIT,   /* gradients' copies to the host */
    TP_COMM,
    TP_COMM_HIDDEN,
    TP_FIELDS
} tp_field;

/* Data wait above this share of a step makes the loader the bottleneck. */
#define THROUGHPUT_DATA_BOUND_SHARE 0.30

/* What dominates a step, and so which advice applies. */
typedef enum tp_bottleneck {
    TP_NONE = 0,
    TP_LOADER,    /* data wait */
    TP_COPY,      /* host-to-device copies */
    TP_SYNC,      /* exposed gradient communication */
    TP_OPTIM,     /* the optimizer update */
    TP_OVERHEAD,  /* what no phase accounts for */
    TP_COMPUTE,   /* forward + backward: the healthy case, advised once at fit end */
    TP_BOTTLENECKS
} tp_bottleneck;

/* One interval, as read from an event; has[f] = 0 when the metric was absent. */
typedef struct throughput_sample {
    int has[TP_FIELDS];
    double v[TP_FIELDS];
} throughput_sample;

/* Finds the fields in an event's metric list. The position and name pointer of each are
 * remembered: the trainer sends the same list every time, so later events are read by a
 * pointer compare instead of a string search. */
typedef struct throughput_reader {
    const char *ptr[TP_FIELDS];
    uint32_t index[TP_FIELDS];
} throughput_reader;

typedef struct throughput_totals {
    int64_t last_step;   /* global_step of the previous step event */
    int64_t steps;       /* steps covered by intervals with time/step_s */
    double sum[TP_FIELDS];   /* value x steps, where present (TP_RATE: samples) */
    int any[TP_FIELDS];      /* the field was present in some interval with a step time */
    double rate_sum;     /* rates of intervals without time/step_s: a plain mean */
    int64_t rate_count;
    int64_t intervals;   /* intervals with a step time and data wait: advice can apply */
    int64_t bound[TP_BOTTLENECKS]; /* of those, how many each part dominated */
} throughput_totals;

/* The metric name of a field. */
const char *throughput_field_name(tp_field f);

/* Reads the fields from an event's list (negative and non-finite values are absent). */
throughput_sample throughput_sample_read(throughput_reader *r, const fg_metric *metrics,
                                         uint32_t count);

/* Share of the step a part takes, 0 without a step time. */
double throughput_share(const throughput_sample *s, tp_field f);
/* Step time no measured part accounts for (>= 0), and whether the split was measured. */
double throughput_other(const throughput_sample *s);
int throughput_has_split(const throughput_sample *s);

/* The part that dominates the sample, TP_NONE when none does. */
tp_bottleneck throughput_bottleneck(const throughput_sample *s);

/* 1 when the sample shows the loader as the bottleneck. */
int throughput_data_bound(const throughput_sample *s);

/* Starts the totals at a fit's first step (a resumed run does not start at 0). */
void throughput_totals_reset(throughput_totals *t, int64_t global_step);

/* Adds one interval ending at global_step. */
void throughput_totals_add(throughput_totals *t, const throughput_sample *s, int64_t global_step);

/* The run as one sample: step-weighted means (flags 0 when nothing was seen). */
throughput_sample throughput_totals_mean(const throughput_totals *t);

#endif
