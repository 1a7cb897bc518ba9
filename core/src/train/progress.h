/* Progress of a fit: where it is (epoch, step, batch), the running training sums of the
 * epoch, and where an interrupted fit resumes. The part of the trainer that checkpoints
 * save and restore; it calls nothing. */
#ifndef FG_PROGRESS_H
#define FG_PROGRESS_H

#include <stdint.h>

#include "fulgur/strategy.h"

/* Where an interrupted fit resumes. */
typedef struct fg_resume_point {
    int active;
    int64_t epoch;          /* the epoch to continue */
    int64_t batches_done;   /* batches of that epoch already trained */
    double sum_loss, sum_correct, sum_n; /* the epoch's training sums so far */
} fg_resume_point;

typedef struct fg_progress {
    int64_t epoch, global_step, step_in_epoch, steps_per_epoch;
    int64_t batches_done;      /* batches of this epoch trained */
    int epoch_training_done;   /* every batch of this epoch trained: a checkpoint resumes at the next */
    double sum_loss, sum_correct, sum_n; /* the epoch's training sums */
    double fit_start_time;
    fg_resume_point resume;
} fg_progress;

/* Before training an epoch of `batches` batches: zero sums, or the resume point's when it
 * is this epoch's (then consumed). Returns the first batch to train. */
int64_t fg_progress_start_epoch(fg_progress *p, int64_t batches);
/* The epoch's training is over: the next one starts (a checkpoint from here on resumes at
 * its first batch). */
void fg_progress_next_epoch(fg_progress *p);
/* Adds metric sums read from the strategy to the epoch's. */
void fg_progress_add(fg_progress *p, const fg_step_metrics *m);

#endif
