/* What fp8-mixed's amax reduction reduces (fp8_amax.h runs it): the runs of adjacent amax
 * histories in the model's buffer region and, within one process, the groups of stages that
 * hold the same part of the model (the same buffer range: strategy.dp's whole-model
 * replicas, strategy.model-parallel's dp_replicas copies of a pipeline stage), each with the
 * runs of the histories in its range. Built once at setup from plain ranges. */
#ifndef FG_FP8_AMAX_PLAN_H
#define FG_FP8_AMAX_PLAN_H

#include <stddef.h>

#include "fulgur/plugin.h"

/* One amax history: floats [offset, offset + count) of the model's buffer region */
typedef struct fg_fp8_amax_history {
    const char *name;
    size_t offset, count;
} fg_fp8_amax_history;

/* Stages holding the same buffer range: the replicas of one part of the model */
typedef struct fg_fp8_amax_group {
    int *members;      /* (replicas) indexes of the stages, in the order given */
    int replicas;
    int run0, runs;    /* its runs: the plan's offset/count [run0, run0 + runs), counted
                        * from the group's first buffer element */
    size_t floats;     /* in its runs */
    float *host;       /* ((replicas + 1) * floats) each stage's runs, packed, then the max */
} fg_fp8_amax_group;

typedef struct fg_fp8_amax_plan {
    size_t *offset, *count; /* the runs */
    int runs;               /* 0: nothing to reduce */
    size_t floats;          /* in all runs */
    int groups;             /* 0: the ranks' plan (fg_fp8_amax_plan_ranks) */
    fg_fp8_amax_group *group;
    int replicas;           /* the most stages of a group */
} fg_fp8_amax_plan;

/* Every history, adjacent ones merged: the runs a rank all-reduces in its whole replica. */
fg_status fg_fp8_amax_plan_ranks(fg_fp8_amax_plan *p, const fg_fp8_amax_history *h,
                                 size_t histories, fg_error *err);
/* Stage i holds buffers [lo[i], lo[i] + n[i]); stages with equal ranges form a group, and
 * the groups of at least two stages and one history are kept, each with its runs and host
 * slots. Refused with a message: two ranges that overlap without being equal, a history cut
 * by a range's edge. */
fg_status fg_fp8_amax_plan_groups(fg_fp8_amax_plan *p, const size_t *lo, const size_t *n,
                                  int stages, const fg_fp8_amax_history *h, size_t histories,
                                  fg_error *err);
void fg_fp8_amax_plan_free(fg_fp8_amax_plan *p);
/* The max of group g's host slots, in member order, into its last one (a NaN wins, as the
 * comms' max). */
void fg_fp8_amax_plan_max(fg_fp8_amax_group *g);

#endif
