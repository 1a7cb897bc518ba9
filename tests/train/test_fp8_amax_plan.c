/* The plan of fp8-mixed's amax reduction (core/src/train/fp8_amax_plan.c) on buffer ranges
 * laid out as strategy.model-parallel and strategy.dp lay them out: 2 pipeline stages x 2
 * replicas make 2 groups (each stage's replicas, in creation order), each with the runs of
 * its own histories counted from its first buffer element, a run of one group never merged
 * into another's; whole-model replicas make 1 group; a pipeline without replicas, nothing;
 * the host max is per element with a NaN winning; ranges that overlap without being equal
 * and a history cut by a stage's edge are refused naming what is at fault. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fp8_amax_plan.h"

/* fc's 3 histories on stage 0 (buffers [0, 100)), proj's and lm_head's on stage 1
 * ([100, 300)): proj's start where fc's end relative to their stages (58). */
static const fg_fp8_amax_history h[] = {
    {"fc.fp8_amax_x", 10, 16},       {"fc.fp8_amax_w", 26, 16},
    {"fc.fp8_amax_dy", 42, 16},      {"proj.fp8_amax_x", 158, 16},
    {"proj.fp8_amax_w", 174, 16},    {"proj.fp8_amax_dy", 190, 16},
    {"lm_head.fp8_amax_x", 220, 16}, {"lm_head.fp8_amax_w", 236, 16},
    {"lm_head.fp8_amax_dy", 252, 16},
};
#define HISTORIES (sizeof h / sizeof h[0])

static void test_two_stages_two_replicas(void)
{
    /* creation order: pipeline 0's stages 0 and 1, then pipeline 1's */
    const size_t lo[] = {0, 100, 0, 100}, n[] = {100, 200, 100, 200};
    fg_fp8_amax_plan p;
    CHECK_OK(fg_fp8_amax_plan_groups(&p, lo, n, 4, h, HISTORIES, &fg_test_err));
    CHECK_EQ(p.groups, 2);
    CHECK_EQ(p.replicas, 2);
    CHECK_EQ(p.floats, 144);
    CHECK_EQ(p.runs, 3);
    if (p.groups != 2 || p.runs != 3) return;
    const fg_fp8_amax_group *a = &p.group[0], *b = &p.group[1];
    CHECK_EQ(a->replicas, 2);
    CHECK_EQ(a->members[0], 0);
    CHECK_EQ(a->members[1], 2);
    CHECK_EQ(a->runs, 1);
    CHECK_EQ(a->floats, 48);
    CHECK_EQ(p.offset[a->run0], 10);
    CHECK_EQ(p.count[a->run0], 48);
    CHECK_EQ(b->members[0], 1);
    CHECK_EQ(b->members[1], 3);
    CHECK_EQ(b->runs, 2); /* proj's from 58 (not merged into fc's run), lm_head's from 120 */
    CHECK_EQ(b->floats, 96);
    CHECK_EQ(p.offset[b->run0], 58);
    CHECK_EQ(p.count[b->run0], 48);
    CHECK_EQ(p.offset[b->run0 + 1], 120);
    CHECK_EQ(p.count[b->run0 + 1], 48);
    fg_fp8_amax_plan_free(&p);
}

static void test_whole_replicas(void)
{
    const size_t lo[] = {0, 0, 0}, n[] = {300, 300, 300};
    fg_fp8_amax_plan p;
    CHECK_OK(fg_fp8_amax_plan_groups(&p, lo, n, 3, h, HISTORIES, &fg_test_err));
    CHECK_EQ(p.groups, 1);
    CHECK_EQ(p.replicas, 3);
    CHECK_EQ(p.floats, 144);
    CHECK_EQ(p.runs, 3); /* [10, 58), [158, 206), [220, 268) */
    if (p.runs == 3) {
        CHECK_EQ(p.offset[1], 158);
        CHECK_EQ(p.count[1], 48);
    }
    fg_fp8_amax_plan_free(&p);
}

static void test_pipeline_alone(void)
{
    const size_t lo[] = {0, 100}, n[] = {100, 200};
    fg_fp8_amax_plan p;
    CHECK_OK(fg_fp8_amax_plan_groups(&p, lo, n, 2, h, HISTORIES, &fg_test_err));
    CHECK_EQ(p.groups, 0);
    CHECK_EQ(p.runs, 0);
    fg_fp8_amax_plan_free(&p);
}

static void test_host_max(void)
{
    const size_t lo[] = {0, 0}, n[] = {300, 300};
    fg_fp8_amax_plan p;
    CHECK_OK(fg_fp8_amax_plan_groups(&p, lo, n, 2, h, HISTORIES, &fg_test_err));
    if (p.groups != 1) return;
    fg_fp8_amax_group *g = &p.group[0];
    for (size_t i = 0; i < g->floats; i++) {
        g->host[i] = (float)i;
        g->host[g->floats + i] = i % 2 ? 1000.0f : -1.0f;
    }
    g->host[5] = NAN;
    fg_fp8_amax_plan_max(g);
    const float *max = g->host + 2 * g->floats;
    CHECK(isnan(max[5]));
    CHECK_NEAR(max[4], 4.0, 0);
    CHECK_NEAR(max[7], 1000.0, 0);
    CHECK_NEAR(max[143], 1000.0, 0);
    CHECK_NEAR(max[142], 142.0, 0);
    fg_fp8_amax_plan_free(&p);
}

static void test_refusals(void)
{
    fg_fp8_amax_plan p;
    fg_error err = {0};
    const size_t lo[] = {0, 50}, n[] = {100, 100};
    CHECK_STATUS(fg_fp8_amax_plan_groups(&p, lo, n, 2, h, HISTORIES, &err), FG_UNAVAILABLE);
    CHECK_CONTAINS(err.message, "[0, 100) and [50, 150), which overlap");
    const size_t lo2[] = {0, 0}, n2[] = {20, 20};
    CHECK_STATUS(fg_fp8_amax_plan_groups(&p, lo2, n2, 2, h, HISTORIES, &err), FG_UNAVAILABLE);
    CHECK_CONTAINS(err.message, "fc.fp8_amax_x is cut by the edge of a stage's buffers [0, 20)");
}

static void test_ranks(void)
{
    fg_fp8_amax_plan p;
    CHECK_OK(fg_fp8_amax_plan_ranks(&p, h, HISTORIES, &fg_test_err));
    CHECK_EQ(p.groups, 0);
    CHECK_EQ(p.runs, 3);
    CHECK_EQ(p.floats, 144);
    fg_fp8_amax_plan_free(&p);
}

int main(void)
{
    test_two_stages_two_replicas();
    test_whole_replicas();
    test_pipeline_alone();
    test_host_max();
    test_refusals();
    test_ranks();
    return fg_test_report("fp8_amax_plan");
}
