/* Progress of a fit: epochs, steps, the epoch's training sums and the resume point. */
#include "progress.h"

int64_t fg_progress_start_epoch(fg_progress *p, int64_t batches)
{
    int64_t first = 0;
    p->sum_loss = p->sum_correct = p->sum_n = 0;
    p->batches_done = 0;
    p->epoch_training_done = 0;
    if (p->resume.active && p->resume.epoch == p->epoch) {
        first = p->resume.batches_done < batches ? p->resume.batches_done : batches;
        p->sum_loss = p->resume.sum_loss;
        p->sum_correct = p->resume.sum_correct;
        p->sum_n = p->resume.sum_n;
        p->resume.active = 0;
    }
    return first;
}

void fg_progress_next_epoch(fg_progress *p)
{
    p->epoch++;
    p->epoch_training_done = 0;
    p->batches_done = 0;
    p->sum_loss = p->sum_correct = p->sum_n = 0;
}

void fg_progress_add(fg_progress *p, const fg_step_metrics *m)
{
    p->sum_loss += m->loss_sum;
    p->sum_correct += m->correct;
    p->sum_n += m->count;
}
