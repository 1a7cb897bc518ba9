/* The latest value of every metric the checkpoint callback has seen. A step-level check
 * ranks by val/loss from the last validation, as Lightning's callback_metrics do; event
 * metric names are borrowed for one call only, so the table keeps its own copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

static fg_status add(ckpt_metrics *t, const char *name, double value, int64_t epoch,
                     fg_error *err)
{
    void *items = t->items;
    char *copy = NULL;
    fg_status st = ckpt_grow(&items, t->count, &t->cap, sizeof *t->items, "the metric table", err);
    t->items = items;
    if (st == FG_OK)
        st = ckpt_copy_text(name, &copy, "the metric table", err);
    if (st != FG_OK)
        return st;
    t->items[t->count].name = copy;
    t->items[t->count].value = value;
    t->items[t->count].epoch = epoch;
    t->count++;
    return FG_OK;
}

fg_status ckpt_metrics_update(ckpt_metrics *t, const fg_event *ev, fg_error *err)
{
    for (uint32_t i = 0; i < ev->metric_count; i++) {
        const fg_metric *m = &ev->metrics[i];
        if (m->name == NULL)
            continue;
        size_t j = 0;
        while (j < t->count && strcmp(t->items[j].name, m->name) != 0)
            j++;
        if (j < t->count) {
            t->items[j].value = m->value;
            t->items[j].epoch = ev->epoch;
            continue;
        }
        fg_status st = add(t, m->name, m->value, ev->epoch, err);
        if (st != FG_OK)
            return st;
    }
    return FG_OK;
}

const double *ckpt_metrics_find(const ckpt_metrics *t, const char *name)
{
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->items[i].name, name) == 0)
            return &t->items[i].value;
    return NULL;
}

int ckpt_metrics_fresh(const ckpt_metrics *t, const char *name, int64_t epoch)
{
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->items[i].name, name) == 0)
            return t->items[i].epoch == epoch;
    return 0;
}

void ckpt_metrics_list(const ckpt_metrics *t, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    if (t->count == 0) {
        snprintf(buf, cap, "(none)");
        return;
    }
    for (size_t i = 0; i < t->count && used < cap; i++) {
        int n = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", t->items[i].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

void ckpt_metrics_free(ckpt_metrics *t)
{
    for (size_t i = 0; i < t->count; i++)
        free(t->items[i].name);
    free(t->items);
    memset(t, 0, sizeof *t);
}
