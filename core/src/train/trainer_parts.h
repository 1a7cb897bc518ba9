/* The trainer's parts outside trainer*.c take their own structs, never the trainer: these
 * build them from the trainer (ctest arch.trainer_parts). */
#ifndef FG_TRAINER_PARTS_H
#define FG_TRAINER_PARTS_H

#include "rank_agreement.h"
#include "requeue.h"
#include "step_graph.h"
#include "trainer.h"

struct fg_trainer;

/* This process among the fit's (ranks.h). */
fg_ranks fg_trainer_ranks(const struct fg_trainer *t);
/* What the ranks compare at setup (rank_agreement.h). */
fg_rank_agreement fg_trainer_rank_agreement(const struct fg_trainer *t);

/* What [backend] cuda_graphs checks at setup (step_graph.h). */
fg_step_graph_fit fg_trainer_step_graph_fit(struct fg_trainer *t);

/* What requeue reads of the fit (requeue.h). */
fg_requeue_fit fg_trainer_requeue_fit(const struct fg_trainer *t);
/* fg_requeue_poll (now: fg_requeue_poll_now); an agreed stop stops the fit. */
fg_status fg_trainer_requeue_poll(struct fg_trainer *t, int now, fg_error *err);
/* What predict, generate and export read of the set-up model (trainer.h). */
fg_verb_model fg_trainer_verb_model(struct fg_trainer *t);

#endif
