/* Number and line formatting for the throughput callback. */
#include "throughput_format.h"

#include <stdio.h>
#include <string.h>

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

void throughput_format_mib(char *buf, size_t cap, double bytes)
{
    snprintf(buf, cap, "%.2f MiB", bytes / (1024.0 * 1024.0));
}

/* Appends to buf at *len, keeping it terminated; stops quietly when full. */
static void append(char *buf, size_t cap, size_t *len, const char *text)
{
    int n = snprintf(buf + *len, cap - *len, "%s", text);
    if (n > 0)
        *len = (size_t)n < cap - *len ? *len + (size_t)n : cap - 1;
}

/* " + <label> <t> (<p>%)" (the first part without the plus). */
static void append_part(char *buf, size_t cap, size_t *len, int first, const char *label,
                        double seconds, double step)
{
    char t[32], part[96];
    throughput_format_duration(t, sizeof t, seconds);
    snprintf(part, sizeof part, "%s%s %s (%.0f%%)", first ? " = " : " + ", label, t,
             step > 0 ? 100.0 * seconds / step : 0);
    append(buf, cap, len, part);
}

/* The measured phases, in step order, then what they leave unexplained. */
static void append_split(char *buf, size_t cap, size_t *len, const throughput_sample *s)
{
    static const struct { tp_field f; const char *label; } parts[] = {
        {TP_WAIT, "data wait"}, {TP_H2D, "h2d"}, {TP_FORWARD, "forward"},
        {TP_BACKWARD, "backward"}, {TP_GRAD_SYNC, "grad sync"}, {TP_OPTIMIZER, "optimizer"},
        {TP_OFFLOAD_UPDATE, "host update"}, {TP_OFFLOAD_WAIT, "offload wait"},
    };
    double step = s->v[TP_STEP];
    int first = 1;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (!s->has[parts[i].f]) continue;
        double v = s->v[parts[i].f] < step ? s->v[parts[i].f] : step;
        append_part(buf, cap, len, first, parts[i].label, v, step);
        first = 0;
    }
    append_part(buf, cap, len, first, "other", throughput_other(s), step);
}

void throughput_format_breakdown(char *buf, size_t cap, const throughput_sample *s)
{
    char a[32], b[32], c[32], part[160];
    size_t len = 0;
    buf[0] = '\0';
    if (s->has[TP_RATE]) {
        throughput_format_rate(a, sizeof a, s->v[TP_RATE]);
        snprintf(part, sizeof part, "%s samples/s", a);
        append(buf, cap, &len, part);
    }
    if (!s->has[TP_STEP])
        return;
    throughput_format_duration(a, sizeof a, s->v[TP_STEP]);
    snprintf(part, sizeof part, "%sstep %s", len > 0 ? "; " : "", a);
    append(buf, cap, &len, part);
    if (throughput_has_split(s)) {
        append_split(buf, cap, &len, s);
        return;
    }
    if (!s->has[TP_WAIT])
        return;
    /* Clocks are read separately, so a wait can exceed its step by a hair: clamp. */
    double step = s->v[TP_STEP];
    double wait = s->v[TP_WAIT] < step ? s->v[TP_WAIT] : step;
    double share = step > 0 ? 100.0 * wait / step : 0;
    throughput_format_duration(b, sizeof b, wait);
    throughput_format_duration(c, sizeof c, step - wait);
    snprintf(part, sizeof part, " = data wait %s (%.0f%%) + compute %s", b, share, c);
    append(buf, cap, &len, part);
}

void throughput_format_comm(char *buf, size_t cap, const throughput_sample *s)
{
    buf[0] = '\0';
    if (!s->has[TP_COMM])
        return;
    double comm = s->v[TP_COMM];
    double hidden = s->has[TP_COMM_HIDDEN] ? s->v[TP_COMM_HIDDEN] : 0;
    double exposed = s->has[TP_GRAD_SYNC] ? s->v[TP_GRAD_SYNC] : comm - hidden;
    char a[32], b[32], c[32];
    throughput_format_duration(a, sizeof a, comm);
    throughput_format_duration(b, sizeof b, hidden);
    throughput_format_duration(c, sizeof c, exposed > 0 ? exposed : 0);
    snprintf(buf, cap, "communication %s per step: %s (%.0f%%) hidden behind backward, %s "
             "exposed", a, b, comm > 0 ? 100.0 * hidden / comm : 0, c);
}

const char *throughput_subject(tp_bottleneck b)
{
    switch (b) {
    case TP_LOADER: return "the loader";
    case TP_COPY: return "host-to-device copying";
    case TP_SYNC: return "gradient sync";
    case TP_OPTIM: return "the optimizer step";
    case TP_OVERHEAD: return "per-step overhead";
    case TP_COMPUTE: return "compute (forward + backward)";
    default: return NULL;
    }
}

const char *throughput_advice(tp_bottleneck b, const char *strategy)
{
    int single = strategy == NULL || strcmp(strategy, "single") == 0;
    if (b == TP_SYNC && strategy != NULL && strcmp(strategy, "dp") == 0)
        return "use [strategy] name = ddp (one process per device, gradients all-reduced "
               "during backward, instead of reduced to device 0 and broadcast after it)";
    if (b == TP_COMPUTE && !single)
        return "use mixed precision ([precision] name = bf16-mixed on a GPU) or more devices "
               "(more ranks)";
    switch (b) {
    case TP_LOADER: return THROUGHPUT_LOADER_ADVICE;
    case TP_COPY:
        return "set [data] pin_memory = true (page-locked staging) and raise batch_size";
    case TP_SYNC:
        return "raise [data] batch_size (fewer, larger all-reduces) or lower [strategy] "
               "bucket_mb so that they start during backward";
    case TP_OPTIM:
        return "raise [data] batch_size (or trainer.accumulate_grad_batches) to update less often";
    case TP_OVERHEAD: return "raise [data] batch_size to spread it over more samples";
    case TP_COMPUTE:
        return "use mixed precision ([precision] name = bf16-mixed on a GPU) or more devices "
               "([strategy] name = ddp)";
    default: return NULL;
    }
}
