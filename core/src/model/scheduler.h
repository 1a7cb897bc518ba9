/* Learning-rate schedulers: constant, step, multistep, exponential, cosine (with a floor)
 * and reduce-on-plateau, optionally behind a linear warmup; and cosine_with_warmup, whose
 * cosine starts after its own warmup (nanoGPT's get_lr, Hugging Face's cosine schedule). Every schedule except the plateau
 * one is a pure function of (optimizer step, epoch), so resume needs no state; the plateau
 * scheduler's state is exported for checkpoints. */
#ifndef FG_SCHEDULER_H
#define FG_SCHEDULER_H

#include <stdint.h>

#include "config.h"

typedef struct fg_scheduler fg_scheduler;

const fg_option *fg_scheduler_schema(size_t *count);

/* Reads [scheduler] (absent: constant). total_steps and total_epochs bound cosine's period
 * when t_max = 0, total_steps cosine_with_warmup's when decay_steps = 0. A key of another
 * scheduler kind is refused naming it. */
fg_status fg_scheduler_create(const fg_config *cfg, double base_lr, int64_t total_steps,
                              int64_t total_epochs, fg_scheduler **out, fg_error *err);
void fg_scheduler_destroy(fg_scheduler *s);

const char *fg_scheduler_name(const fg_scheduler *s);
/* The learning rate for the optimizer step that comes after `steps_done` steps, in epoch
 * `epoch` (both 0-based counts of what is finished). */
double fg_scheduler_lr(const fg_scheduler *s, int64_t steps_done, int64_t epoch);
/* Reduce-on-plateau: the trainer reports the monitored metric after each check. Other
 * schedulers ignore it. */
void fg_scheduler_observe(fg_scheduler *s, const char *metric, double value);
/* The metric reduce-on-plateau watches, NULL for the others. */
const char *fg_scheduler_monitor(const fg_scheduler *s);

/* Plateau state for checkpoints: factor applied so far, best value, bad checks, cooldown. */
typedef struct fg_scheduler_state {
    double scale;
    double best;
    int64_t bad_checks;
    int64_t cooldown_left;
} fg_scheduler_state;
void fg_scheduler_get_state(const fg_scheduler *s, fg_scheduler_state *out);
void fg_scheduler_set_state(fg_scheduler *s, const fg_scheduler_state *in);

#endif
