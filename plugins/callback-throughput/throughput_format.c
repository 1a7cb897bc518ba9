/* Number and line formatting for the throughput callback. */
#include "throughput_format.h"

#include <stdio.h>

void throughput_format_rate(char *buf, size_t cap, double v)
{
    if (v < 10)
        snprintf(buf, cap, "%.1f", v);
    else if (v < 999.5)
        snprintf(buf, cap, "%.0f", v);
    else if (v < 9950)
        snprintf(buf, cap, "%.1fk", v / 1e3);
    else if (v < 999.5e3)
        snprintf(buf, cap, "%.0fk", v / 1e3);
    else if (v < 9.95e6)
        snprintf(buf, cap, "%.1fM", v / 1e6);
    else
        snprintf(buf, cap, "%.0fM", v / 1e6);
}

void throughput_format_duration(char *buf, size_t cap, double s)
{
    double ms = s * 1e3;
    if (ms < 0.1)
        snprintf(buf, cap, "%.0f us", ms * 1e3);
    else if (ms < 999.95)
        snprintf(buf, cap, "%.1f ms", ms);
    else
        snprintf(buf, cap, "%.2f s", s);
}

/* Appends to buf at *len, keeping it terminated; stops quietly when full. */
static void append(char *buf, size_t cap, size_t *len, const char *text)
{
    int n = snprintf(buf + *len, cap - *len, "%s", text);
    if (n > 0)
        *len = (size_t)n < cap - *len ? *len + (size_t)n : cap - 1;
}

void throughput_format_breakdown(char *buf, size_t cap, const throughput_sample *s)
{
    char a[32], b[32], c[32], part[160];
    size_t len = 0;
    buf[0] = '\0';
    if (s->has_rate) {
        throughput_format_rate(a, sizeof a, s->samples_per_s);
        snprintf(part, sizeof part, "%s samples/s", a);
        append(buf, cap, &len, part);
    }
    if (!s->has_step)
        return;
    throughput_format_duration(a, sizeof a, s->step_s);
    snprintf(part, sizeof part, "%sstep %s", len > 0 ? "; " : "", a);
    append(buf, cap, &len, part);
    if (!s->has_wait)
        return;
    /* Clocks are read separately, so a wait can exceed its step by a hair: clamp. */
    double wait = s->data_wait_s < s->step_s ? s->data_wait_s : s->step_s;
    double share = s->step_s > 0 ? 100.0 * wait / s->step_s : 0;
    throughput_format_duration(b, sizeof b, wait);
    throughput_format_duration(c, sizeof c, s->step_s - wait);
    snprintf(part, sizeof part, " = data wait %s (%.0f%%) + compute %s", b, share, c);
    append(buf, cap, &len, part);
}
