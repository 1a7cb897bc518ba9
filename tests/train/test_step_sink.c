/* workflow.step_sink: the per-step metric sink of the trainer. Phases are divided by the
 * replicas and the window's steps; time/... reports are per step, other names a mean of
 * their reports; a name takes a slot once (found again by name when the pointer differs);
 * a drained window starts from zero; names beyond the slots are refused once. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "step_sink.h"


static double value_of(const fg_metric *m, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(m[i].name, name) == 0) return m[i].value;
    return -1;
}

int main(void)
{
    fg_step_sink s;
    fg_step_sink_init(&s, 2);
    fg_metric out[FG_SINK_SLOTS + FG_PHASE_COUNT];
    /* 4 steps on 2 replicas: each replica's forward takes 1 ms a step. */
    for (int i = 0; i < 8; i++) fg_step_sink_phase(&s, FG_PHASE_FORWARD, 0.001);
    fg_step_sink_phase(&s, FG_PHASE_OPTIMIZER, 0.002);
    char dynamic[32];
    snprintf(dynamic, sizeof dynamic, "time/comm_s");
    CHECK(fg_step_sink_report(&s, "time/comm_s", 0.004) == 0, "report");
    CHECK(fg_step_sink_report(&s, dynamic, 0.004) == 0, "same name, other pointer");
    fg_step_sink_report(&s, "precision/loss_scale", 1024);
    fg_step_sink_report(&s, "precision/loss_scale", 512);
    uint32_t n = fg_step_sink_drain(&s, 4, 1, out, sizeof out / sizeof out[0]);
    CHECK(n == FG_PHASE_COUNT + 2, "%u metrics", n);
    CHECK(value_of(out, n, "time/forward_s") == 0.001, "forward %g", value_of(out, n, "time/forward_s"));
    CHECK(value_of(out, n, "time/optimizer_s") == 0.00025, "optimizer %g",
          value_of(out, n, "time/optimizer_s"));
    CHECK(value_of(out, n, "time/h2d_s") == 0, "h2d %g", value_of(out, n, "time/h2d_s"));
    CHECK(value_of(out, n, "time/comm_s") == 0.002, "comm %g per step", value_of(out, n, "time/comm_s"));
    CHECK(value_of(out, n, "precision/loss_scale") == 768, "mean of reports %g",
          value_of(out, n, "precision/loss_scale"));
    /* The next window starts empty; without phases only what was reported comes out. */
    fg_step_sink_report(&s, "time/comm_s", 0.003);
    n = fg_step_sink_drain(&s, 1, 0, out, sizeof out / sizeof out[0]);
    CHECK(n == 1 && strcmp(out[0].name, "time/comm_s") == 0 && out[0].value == 0.003,
          "%u metrics, %s = %g", n, n ? out[0].name : "-", n ? out[0].value : 0.0);
    /* A plugin that times a phase itself (pipeline stages) replaces the core's slot: the
     * name comes out once, with the plugin's value. */
    fg_step_sink_phase(&s, FG_PHASE_FORWARD, 0.0);
    fg_step_sink_report(&s, "time/forward_s", 0.005);
    n = fg_step_sink_drain(&s, 1, 1, out, sizeof out / sizeof out[0]);
    int forwards = 0;
    for (uint32_t i = 0; i < n; i++) forwards += strcmp(out[i].name, "time/forward_s") == 0;
    CHECK(forwards == 1 && value_of(out, n, "time/forward_s") == 0.005,
          "%d time/forward_s entries, value %g", forwards, value_of(out, n, "time/forward_s"));
    /* Slots run out: the first refused name says so once. */
    char names[FG_SINK_SLOTS + 2][32];
    int refused = 0;
    for (int i = 0; i < FG_SINK_SLOTS + 2; i++) {
        snprintf(names[i], sizeof names[i], "x/m%d", i);
        refused += fg_step_sink_report(&s, names[i], 1) != 0;
    }
    CHECK(refused == 1, "%d refusals", refused);
    fg_step_sink_destroy(&s);
    return fg_test_report("workflow.step_sink");
}
