/* The runs of fp8 amax histories and the groups of stages holding one part of the model. */
#include "fp8_amax_plan.h"

#include <stdlib.h>
#include <string.h>

/* Appends [offset, offset + count) to the runs, merged with the last when adjacent and
 * from first on (a run of another group is never extended). */
static void add_run(fg_fp8_amax_plan *p, int first, size_t offset, size_t count)
{
    if (p->runs > first && p->offset[p->runs - 1] + p->count[p->runs - 1] == offset) {
        p->count[p->runs - 1] += count;
        return;
    }
    p->offset[p->runs] = offset;
    p->count[p->runs] = count;
    p->runs++;
}

static fg_status alloc_runs(fg_fp8_amax_plan *p, size_t histories, fg_error *err)
{
    memset(p, 0, sizeof *p);
    p->offset = calloc(histories ? histories : 1, sizeof *p->offset);
    p->count = calloc(histories ? histories : 1, sizeof *p->count);
    if (!p->offset || !p->count)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory listing fp8 amax histories");
    return FG_OK;
}

fg_status fg_fp8_amax_plan_ranks(fg_fp8_amax_plan *p, const fg_fp8_amax_history *h,
                                 size_t histories, fg_error *err)
{
    fg_status st = alloc_runs(p, histories, err);
    if (st != FG_OK) {
        fg_fp8_amax_plan_free(p);
        return st;
    }
    for (size_t i = 0; i < histories; i++) {
        add_run(p, 0, h[i].offset, h[i].count);
        p->floats += h[i].count;
    }
    return FG_OK;
}

/* The group of stage i: the first stage's with an equal range, or a new one; refused when
 * an earlier range overlaps stage i's without being equal. */
static fg_status join_group(fg_fp8_amax_plan *p, const size_t *lo, const size_t *n, int i,
                            int stages, fg_error *err)
{
    for (int g = 0; g < p->groups; g++) {
        fg_fp8_amax_group *x = &p->group[g];
        int j = x->members[0];
        if (lo[j] == lo[i] && n[j] == n[i]) {
            x->members[x->replicas++] = i;
            return FG_OK;
        }
        if (lo[i] < lo[j] + n[j] && lo[j] < lo[i] + n[i])
            return fg_error_set(err, FG_UNAVAILABLE, "[precision] fp8-mixed: stages %d and %d "
                                "of this process hold the model's buffers [%zu, %zu) and "
                                "[%zu, %zu), which overlap without being one part's replicas; "
                                "their amax histories cannot be reduced", j, i, lo[j],
                                lo[j] + n[j], lo[i], lo[i] + n[i]);
    }
    fg_fp8_amax_group *x = &p->group[p->groups];
    x->members = calloc((size_t)stages, sizeof *x->members);
    if (!x->members)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for the fp8 amax histories");
    x->members[x->replicas++] = i;
    p->groups++;
    return FG_OK;
}

/* Group x's runs: every history inside [lo, lo + n), from lo; one cut by an edge is
 * refused. */
static fg_status list_group_runs(fg_fp8_amax_plan *p, fg_fp8_amax_group *x, size_t lo,
                                 size_t n, const fg_fp8_amax_history *h, size_t histories,
                                 fg_error *err)
{
    x->run0 = p->runs;
    for (size_t i = 0; i < histories; i++) {
        size_t a = h[i].offset, b = h[i].offset + h[i].count;
        if (b <= lo || a >= lo + n) continue;
        if (a < lo || b > lo + n)
            return fg_error_set(err, FG_UNAVAILABLE, "[precision] fp8-mixed: the amax history "
                                "%s is cut by the edge of a stage's buffers [%zu, %zu); it "
                                "cannot be reduced", h[i].name, lo, lo + n);
        add_run(p, x->run0, a - lo, h[i].count);
        x->floats += h[i].count;
    }
    x->runs = p->runs - x->run0;
    return FG_OK;
}

/* Drops the groups of one stage or no history; the others get their host slots. */
static fg_status keep_replicated(fg_fp8_amax_plan *p, fg_error *err)
{
    int kept = 0;
    for (int g = 0; g < p->groups; g++) {
        if (p->group[g].replicas < 2 || !p->group[g].runs)
            free(p->group[g].members);
        else
            p->group[kept++] = p->group[g];
    }
    p->groups = kept;
    if (!kept) p->runs = 0;
    for (int g = 0; g < kept; g++) {
        fg_fp8_amax_group *x = &p->group[g];
        x->host = calloc((size_t)(x->replicas + 1) * x->floats, sizeof *x->host);
        if (!x->host)
            return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for the fp8 amax "
                                "histories of %d replicas", x->replicas);
        p->floats += x->floats;
        if (x->replicas > p->replicas) p->replicas = x->replicas;
    }
    return FG_OK;
}

fg_status fg_fp8_amax_plan_groups(fg_fp8_amax_plan *p, const size_t *lo, const size_t *n,
                                  int stages, const fg_fp8_amax_history *h, size_t histories,
                                  fg_error *err)
{
    fg_status st = alloc_runs(p, histories, err);
    if (st == FG_OK && !(p->group = calloc(stages > 0 ? (size_t)stages : 1, sizeof *p->group)))
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for the fp8 amax histories");
    for (int i = 0; st == FG_OK && i < stages; i++)
        st = join_group(p, lo, n, i, stages, err);
    for (int g = 0; st == FG_OK && g < p->groups; g++) {
        fg_fp8_amax_group *x = &p->group[g];
        int j = x->members[0];
        if (x->replicas > 1) st = list_group_runs(p, x, lo[j], n[j], h, histories, err);
    }
    if (st == FG_OK) st = keep_replicated(p, err);
    if (st != FG_OK) fg_fp8_amax_plan_free(p);
    return st;
}

void fg_fp8_amax_plan_free(fg_fp8_amax_plan *p)
{
    free(p->offset);
    free(p->count);
    for (int g = 0; p->group && g < p->groups; g++) {
        free(p->group[g].members);
        free(p->group[g].host);
    }
    free(p->group);
    memset(p, 0, sizeof *p);
}

void fg_fp8_amax_plan_max(fg_fp8_amax_group *x)
{
    float *max = x->host + (size_t)x->replicas * x->floats;
    memcpy(max, x->host, x->floats * sizeof *max);
    for (int r = 1; r < x->replicas; r++) {
        const float *y = x->host + (size_t)r * x->floats;
        for (size_t i = 0; i < x->floats; i++)
            if (y[i] > max[i] || y[i] != y[i]) max[i] = y[i];
    }
}
