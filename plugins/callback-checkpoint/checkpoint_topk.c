/* The k best checkpoints by a score, with Lightning's ModelCheckpoint rules: a new one
 * enters when the list has room or it is strictly better than the worst kept, which then
 * leaves (the oldest of equally bad ones first). k = -1 keeps everything, k = 0 nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

static int better(const ckpt_topk *t, double a, double b) { return t->maximize ? a > b : a < b; }

double ckpt_topk_score(const ckpt_topk *t, double value)
{
    if (isnan(value))
        return t->maximize ? -INFINITY : INFINITY;
    return value;
}

static size_t worst_index(const ckpt_topk *t)
{
    size_t w = 0;
    for (size_t i = 1; i < t->count; i++)
        if (better(t, t->items[w].score, t->items[i].score))
            w = i;
    return w;
}

int ckpt_topk_accepts(const ckpt_topk *t, double score)
{
    if (t->k == 0)
        return 0;
    if (t->k < 0 || t->count < (size_t)t->k)
        return 1;
    return better(t, score, t->items[worst_index(t)].score);
}

const ckpt_entry *ckpt_topk_leaving(const ckpt_topk *t)
{
    if (t->k <= 0 || t->count < (size_t)t->k)
        return NULL;
    return &t->items[worst_index(t)];
}

int ckpt_topk_holds(const ckpt_topk *t, const char *path)
{
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->items[i].path, path) == 0)
            return 1;
    return 0;
}

fg_status ckpt_topk_insert(ckpt_topk *t, const char *path, double score, char **evicted,
                           fg_error *err)
{
    *evicted = NULL;
    void *items = t->items;
    char *copy = NULL;
    fg_status st = ckpt_grow(&items, t->count, &t->cap, sizeof *t->items, "the checkpoint list",
                             err);
    t->items = items;
    if (st == FG_OK)
        st = ckpt_copy_text(path, &copy, "the checkpoint list", err);
    if (st != FG_OK)
        return st;
    /* The worst is chosen before the new entry joins: a newcomer is accepted only when it
     * beats the worst, so it never is the one to leave. */
    size_t leave = t->k > 0 && t->count == (size_t)t->k ? worst_index(t) : t->count;
    t->items[t->count].path = copy;
    t->items[t->count].score = score;
    t->count++;
    if (leave < t->count - 1) {
        *evicted = t->items[leave].path;
        memmove(&t->items[leave], &t->items[leave + 1], (t->count - leave - 1) * sizeof *t->items);
        t->count--;
    }
    return FG_OK;
}

const ckpt_entry *ckpt_topk_best(const ckpt_topk *t)
{
    if (t->count == 0)
        return NULL;
    size_t b = 0;
    for (size_t i = 1; i < t->count; i++)
        if (better(t, t->items[i].score, t->items[b].score))
            b = i;
    return &t->items[b];
}

void ckpt_topk_free(ckpt_topk *t)
{
    for (size_t i = 0; i < t->count; i++)
        free(t->items[i].path);
    free(t->items);
    memset(t, 0, sizeof *t);
}
