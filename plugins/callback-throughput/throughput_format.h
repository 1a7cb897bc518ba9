/* The text the throughput callback prints, one line at a time, e.g.
 *   throughput: 41k samples/s; step 3.1 ms = data wait 0.2 ms (6%) + compute 2.9 ms
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

/* "<rate> samples/s; step <t> = data wait <t> (<p>%) + compute <t>", the part after
 * "throughput: "; empty when the sample has none of the metrics. */
void throughput_format_breakdown(char *buf, size_t cap, const throughput_sample *s);

#endif
