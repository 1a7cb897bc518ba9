/* Formatting of progress lines, fitted to a width. */
#include "progress_format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SGR_DONE_RUNNING "\033[36m" /* cyan while the epoch runs */
#define SGR_DONE_FINISHED "\033[32m" /* green once it is finished */
#define SGR_RESET "\033[0m"

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

/* Which parts a line shows; fitting removes them one by one. */
typedef struct layout {
    int bar_width; /* 0: no bar */
    int speed, time, train, acc, val;
} layout;

/* Appends to buf at *len, keeping it terminated; stops quietly when full. */
static void append(char *buf, size_t cap, size_t *len, const char *text)
{
    size_t n = strlen(text);
    if (*len + 1 >= cap)
        return;
    if (n > cap - 1 - *len)
        n = cap - 1 - *len;
    memcpy(buf + *len, text, n);
    *len += n;
    buf[*len] = '\0';
}

static void append_bar(char *buf, size_t cap, size_t *len, const progress_view *v, int width,
                       int color)
{
    int64_t done = v->done < v->total ? v->done : v->total;
    int filled = (int)(done * width / v->total);
    char cells[PROGRESS_BAR_WIDTH + 1];
    append(buf, cap, len, " [");
    if (filled > 0) {
        if (color)
            append(buf, cap, len, v->finished ? SGR_DONE_FINISHED : SGR_DONE_RUNNING);
        memset(cells, '#', (size_t)filled);
        cells[filled] = '\0';
        append(buf, cap, len, cells);
        if (color)
            append(buf, cap, len, SGR_RESET);
    }
    memset(cells, '.', (size_t)(width - filled));
    cells[width - filled] = '\0';
    append(buf, cap, len, cells);
    append(buf, cap, len, "]");
}

/* "34.1 it/s", or "2.5 s/it" for slow steps, as tqdm shows them. */
static void format_speed(char *buf, size_t cap, double it_per_s)
{
    if (it_per_s >= 1)
        snprintf(buf, cap, "%.1f it/s", it_per_s);
    else
        snprintf(buf, cap, "%.1f s/it", 1 / it_per_s);
}

static int speed_known(const progress_view *v)
{
    return v->it_per_s > 0 && isfinite(v->it_per_s);
}

static void render(char *buf, size_t cap, const progress_view *v, const layout *l, int color)
{
    char part[96], t[32];
    size_t len = 0;
    buf[0] = '\0';
    if (v->max_epochs > 0)
        snprintf(part, sizeof part, "epoch %lld/%lld", (long long)v->epoch, (long long)v->max_epochs);
    else
        snprintf(part, sizeof part, "epoch %lld/?", (long long)v->epoch);
    append(buf, cap, &len, part);
    if (v->total > 0) {
        if (l->bar_width > 0)
            append_bar(buf, cap, &len, v, l->bar_width, color);
        snprintf(part, sizeof part, " %lld/%lld", (long long)v->done, (long long)v->total);
    } else {
        snprintf(part, sizeof part, " %lld", (long long)v->done);
    }
    append(buf, cap, &len, part);
    if (l->speed && speed_known(v)) {
        format_speed(t, sizeof t, v->it_per_s);
        snprintf(part, sizeof part, "  %s", t);
        append(buf, cap, &len, part);
    }
    if (l->time && v->finished) {
        progress_format_duration(t, sizeof t, v->elapsed_s);
        snprintf(part, sizeof part, "  time %s", t);
        append(buf, cap, &len, part);
    } else if (l->time && v->total > 0 && speed_known(v)) {
        int64_t left = v->total > v->done ? v->total - v->done : 0;
        progress_format_duration(t, sizeof t, (double)left / v->it_per_s);
        snprintf(part, sizeof part, "  ETA %s", t);
        append(buf, cap, &len, part);
    }
    int loss = l->train && v->has_loss, acc = l->train && l->acc && v->has_acc;
    if (loss) {
        snprintf(part, sizeof part, "  loss %.4f", v->loss);
        append(buf, cap, &len, part);
    }
    if (acc) {
        snprintf(part, sizeof part, "%sacc %.2f", loss ? " " : "  ", v->acc);
        append(buf, cap, &len, part);
    }
    if (l->train && l->acc && v->has_ppl) { /* dropped with the accuracies */
        snprintf(part, sizeof part, "%sppl %.2f", loss || acc ? " " : "  ", v->ppl);
        append(buf, cap, &len, part);
    }
    if (l->val && (v->has_val_loss || (v->has_val_acc && l->acc))) {
        append(buf, cap, &len, "  val");
        if (v->has_val_loss) {
            snprintf(part, sizeof part, " loss %.4f", v->val_loss);
            append(buf, cap, &len, part);
        }
        if (v->has_val_acc && l->acc) {
            snprintf(part, sizeof part, " acc %.2f", v->val_acc);
            append(buf, cap, &len, part);
        }
        if (v->has_val_ppl && l->acc) {
            snprintf(part, sizeof part, " ppl %.2f", v->val_ppl);
            append(buf, cap, &len, part);
        }
    }
}

/* Removes the next part in the fitting order; 0 when nothing is left to remove. */
static int drop_one(layout *l)
{
    if (l->speed) l->speed = 0;
    else if (l->acc) l->acc = 0;
    else if (l->bar_width > 0) l->bar_width = 0;
    else if (l->val) l->val = 0;
    else if (l->time) l->time = 0;
    else if (l->train) l->train = 0;
    else return 0;
    return 1;
}

void progress_format_line(char *buf, size_t cap, const progress_view *v, const progress_style *s)
{
    layout l = {s->bar ? PROGRESS_BAR_WIDTH : 0, 1, 1, 1, 1, 1};
    char plain[512];
    render(plain, sizeof plain, v, &l, 0);
    int over = s->width > 0 ? (int)strlen(plain) - s->width : 0;
    if (over > 0 && l.bar_width > 0) {
        l.bar_width = l.bar_width - over > PROGRESS_BAR_MIN ? l.bar_width - over : PROGRESS_BAR_MIN;
        render(plain, sizeof plain, v, &l, 0);
    }
    while (s->width > 0 && (int)strlen(plain) > s->width && drop_one(&l))
        render(plain, sizeof plain, v, &l, 0);
    if (s->width > 0 && (int)strlen(plain) > s->width) {
        /* Nothing left to drop: cut the plain text (no colour to cut through). */
        snprintf(buf, cap, "%.*s", s->width, plain);
        return;
    }
    render(buf, cap, v, &l, s->color);
}
