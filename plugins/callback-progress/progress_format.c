/* Formatting of progress lines. */
#include "progress_format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void progress_format_duration(char *buf, size_t cap, double s)
{
    if (!isfinite(s) || s < 0 || s > 1e9) {
        snprintf(buf, cap, "?");
        return;
    }
    long long t = (long long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "%lld:%02lld", t / 60, t % 60);
}

/* Appends to buf at *len, keeping it terminated; stops quietly when full. */
static void append(char *buf, size_t cap, size_t *len, const char *text)
{
    int n = snprintf(buf + *len, cap - *len, "%s", text);
    if (n > 0)
        *len = (size_t)n < cap - *len ? *len + (size_t)n : cap - 1;
}

static void format_bar(char *bar, const progress_view *v)
{
    int64_t done = v->done < v->total ? v->done : v->total;
    int filled = (int)(done * PROGRESS_BAR_WIDTH / v->total);
    bar[0] = '[';
    for (int i = 0; i < PROGRESS_BAR_WIDTH; i++)
        bar[1 + i] = i < filled ? '#' : '.';
    bar[PROGRESS_BAR_WIDTH + 1] = ']';
    bar[PROGRESS_BAR_WIDTH + 2] = '\0';
}

/* "34.1 it/s", or "2.5 s/it" for slow steps, as tqdm shows them. */
static void format_speed(char *buf, size_t cap, double it_per_s)
{
    if (it_per_s >= 1)
        snprintf(buf, cap, "%.1f it/s", it_per_s);
    else
        snprintf(buf, cap, "%.1f s/it", 1 / it_per_s);
}

void progress_format_line(char *buf, size_t cap, const progress_view *v, int with_bar)
{
    char part[96], bar[PROGRESS_BAR_WIDTH + 3], t[32];
    size_t len = 0;
    buf[0] = '\0';
    snprintf(part, sizeof part, "epoch %lld/?", (long long)v->epoch);
    append(buf, cap, &len, part);
    if (v->total > 0) {
        if (with_bar) {
            format_bar(bar, v);
            append(buf, cap, &len, " ");
            append(buf, cap, &len, bar);
        }
        snprintf(part, sizeof part, " %lld/%lld", (long long)v->done, (long long)v->total);
    } else {
        snprintf(part, sizeof part, " %lld", (long long)v->done);
    }
    append(buf, cap, &len, part);
    if (v->it_per_s > 0 && isfinite(v->it_per_s)) {
        format_speed(t, sizeof t, v->it_per_s);
        snprintf(part, sizeof part, "  %s", t);
        append(buf, cap, &len, part);
    }
    if (v->finished) {
        progress_format_duration(t, sizeof t, v->elapsed_s);
        snprintf(part, sizeof part, "  time %s", t);
        append(buf, cap, &len, part);
    } else if (v->total > 0 && v->it_per_s > 0 && isfinite(v->it_per_s)) {
        int64_t left = v->total > v->done ? v->total - v->done : 0;
        progress_format_duration(t, sizeof t, (double)left / v->it_per_s);
        snprintf(part, sizeof part, "  ETA %s", t);
        append(buf, cap, &len, part);
    }
    if (v->has_loss) {
        snprintf(part, sizeof part, "  loss %.4f", v->loss);
        append(buf, cap, &len, part);
    }
    if (v->has_acc) {
        snprintf(part, sizeof part, "%sacc %.2f", v->has_loss ? " " : "  ", v->acc);
        append(buf, cap, &len, part);
    }
}
