/* Per-step metrics of a fit, summed over the logging window and turned into means on the
 * TRAIN_STEP_END event: the core's own phase timings (fixed slots, no names) and what
 * plugins report through host->metric (named slots). Names become slots once, at their
 * first report; a later report finds its slot by the pointer the plugin passed, and
 * plugins may report from any thread (a mutex guards the sums). Nothing is allocated
 * after init. */
#ifndef FG_STEP_SINK_H
#define FG_STEP_SINK_H

#include <pthread.h>
#include <stdint.h>

#include "core_util.h"
#include "fulgur/callback.h"

/* Phases the train services time, in step order; their metric names are time/<x>_s. */
typedef enum fg_phase {
    FG_PHASE_H2D = 0,
    FG_PHASE_FORWARD = 1,
    FG_PHASE_BACKWARD = 2,
    FG_PHASE_OPTIMIZER = 3,
    FG_PHASE_COUNT = 4
} fg_phase;

#define FG_SINK_SLOTS 24
#define FG_SINK_NAME_MAX 64

typedef struct fg_step_sink {
    pthread_mutex_t lock;
    int replicas;                 /* phase sums are per replica: divided by this count */
    double phase[FG_PHASE_COUNT]; /* seconds in this window, summed over replicas */
    int count;                    /* named slots in use */
    const char *keys[FG_SINK_SLOTS]; /* the pointer the plugin passed last */
    char names[FG_SINK_SLOTS][FG_SINK_NAME_MAX];
    int per_step[FG_SINK_SLOTS];  /* time/...: the window's sum per step; else a mean */
    double sums[FG_SINK_SLOTS];
    int64_t reports[FG_SINK_SLOTS];
    int full;                     /* a name found no free slot (reported once) */
} fg_step_sink;

void fg_step_sink_init(fg_step_sink *s, int replicas);
void fg_step_sink_destroy(fg_step_sink *s);

/* Adds seconds to a phase (any thread). */
void fg_step_sink_phase(fg_step_sink *s, fg_phase p, double seconds);

/* A plugin's named value (any thread). Returns 0, or -1 the first time a name finds
 * every slot taken (the caller warns once). */
int fg_step_sink_report(fg_step_sink *s, const char *name, double value);

/* Appends the window's means to out (at most cap): the phases when with_phases, then
 * every named slot reported in the window; `steps` optimizer steps make the window. The
 * names point into the sink or are literals, so they stay valid. Resets the sums. */
uint32_t fg_step_sink_drain(fg_step_sink *s, int64_t steps, int with_phases, fg_metric *out,
                            uint32_t cap);

/* The metric name of a phase: "time/h2d_s", ... */
const char *fg_phase_name(fg_phase p);

#endif
