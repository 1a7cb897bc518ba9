/* The text the throughput callback prints, one line at a time, e.g.
 *   throughput: 41k samples/s; step 3.1 ms = data wait 0.2 ms (6%) + compute 2.9 ms
 * or, with the phases measured,
 *   throughput: 41k samples/s; step 3.1 ms = data wait 0.2 ms (6%) + h2d 0.1 ms (3%) +
 *   forward 1.0 ms (32%) + backward 1.5 ms (48%) + optimizer 0.3 ms (10%) + other ...
 * Parts whose metrics are absent are left out. */
#ifndef THROUGHPUT_FORMAT_H
#define THROUGHPUT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "throughput_stats.h"

/* What to change when the loader is the bottleneck. */
#define THROUGHPUT_LOADER_ADVICE \
    "raise [data] num_workers or prefetch, keep pin_memory = true"

/* A rate with a k/M suffix and two or three significant digits: 950, 4.1k, 41k, 1.2M. */
void throughput_format_rate(char *buf, size_t cap, double per_second);

/* A duration: 40 us, 3.1 ms, 1.25 s. */
void throughput_format_duration(char *buf, size_t cap, double seconds);

/* "<rate> samples/s; step <t> = data wait <t> (<p>%) + ...", the part after
 * "throughput: "; empty when the sample has none of the metrics. */
void throughput_format_breakdown(char *buf, size_t cap, const throughput_sample *s);

/* "communication <t> per step: <t> (<p>%) hidden behind backward, <t> exposed"; empty
 * without time/comm_s. */
void throughput_format_comm(char *buf, size_t cap, const throughput_sample *s);

/* The subject and the advice for a bottleneck ("the loader", "raise ..."); NULL, NULL
 * for TP_NONE. */
const char *throughput_subject(tp_bottleneck b);
/* strategy: the configured [strategy] name (NULL: single); the advice names what to
 * change from there. */
const char *throughput_advice(tp_bottleneck b, const char *strategy);

/* A bytes count in MiB: "12.34 MiB". */
void throughput_format_mib(char *buf, size_t cap, double bytes);

#endif
