/* Window sums of per-step metrics: phases by index, plugin reports by name. */
#include "step_sink.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const phase_names[FG_PHASE_COUNT] = {"time/h2d_s", "time/forward_s",
                                                        "time/backward_s", "time/optimizer_s"};

const char *fg_phase_name(fg_phase p)
{
    return p >= 0 && p < FG_PHASE_COUNT ? phase_names[p] : "time/unknown_s";
}

void fg_step_sink_init(fg_step_sink *s, int replicas)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->replicas = replicas > 0 ? replicas : 1;
}

void fg_step_sink_destroy(fg_step_sink *s)
{
    pthread_mutex_destroy(&s->lock);
}

void fg_step_sink_phase(fg_step_sink *s, fg_phase p, double seconds)
{
    pthread_mutex_lock(&s->lock);
    s->phase[p] += seconds;
    pthread_mutex_unlock(&s->lock);
}

/* The slot of name: the pointer seen last (the plugin passes a literal: one compare
 * confirms it), else a name compare, else a new slot; -1 when full. Lock held. */
static int slot_of(fg_step_sink *s, const char *name)
{
    for (int i = 0; i < s->count; i++)
        if (s->keys[i] == name && strcmp(s->names[i], name) == 0) return i;
    for (int i = 0; i < s->count; i++)
        if (strcmp(s->names[i], name) == 0) {
            s->keys[i] = name;
            return i;
        }
    if (s->count == FG_SINK_SLOTS || strlen(name) >= FG_SINK_NAME_MAX) return -1;
    int i = s->count++;
    s->keys[i] = name;
    snprintf(s->names[i], sizeof s->names[i], "%s", name);
    s->per_step[i] = strncmp(name, "time/", 5) == 0;
    return i;
}

int fg_step_sink_report(fg_step_sink *s, const char *name, double value)
{
    if (!name) return 0;
    pthread_mutex_lock(&s->lock);
    int i = slot_of(s, name), first_miss = 0;
    if (i >= 0) {
        s->sums[i] += value;
        s->reports[i]++;
    } else if (!s->full) {
        s->full = first_miss = 1;
    }
    pthread_mutex_unlock(&s->lock);
    return first_miss ? -1 : 0;
}

/* A plugin that times a phase itself (pipeline stages run forward and backward on their
 * own threads) reports it under the phase's name: its value replaces the core's slot. */
static int reported_by_plugin(const fg_step_sink *s, const char *name)
{
    for (int i = 0; i < s->count; i++)
        if (s->reports[i] > 0 && strcmp(s->names[i], name) == 0) return 1;
    return 0;
}

uint32_t fg_step_sink_drain(fg_step_sink *s, int64_t steps, int with_phases, fg_metric *out,
                            uint32_t cap)
{
    double n = steps > 0 ? (double)steps : 1.0;
    uint32_t k = 0;
    pthread_mutex_lock(&s->lock);
    for (int p = 0; with_phases && p < FG_PHASE_COUNT && k < cap; p++) {
        if (reported_by_plugin(s, phase_names[p])) continue;
        out[k].name = phase_names[p];
        out[k++].value = s->phase[p] / (double)s->replicas / n;
    }
    for (int i = 0; i < s->count && k < cap; i++) {
        if (s->reports[i] == 0) continue;
        out[k].name = s->names[i];
        out[k++].value = s->sums[i] / (s->per_step[i] ? n : (double)s->reports[i]);
    }
    memset(s->phase, 0, sizeof s->phase);
    memset(s->sums, 0, sizeof s->sums);
    memset(s->reports, 0, sizeof s->reports);
    pthread_mutex_unlock(&s->lock);
    return k;
}
