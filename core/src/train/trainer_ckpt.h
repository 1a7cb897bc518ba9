/* The checkpointer's trainer side: saving the model, optimizer, scheduler, scaler and
 * progress, and resuming from a file in two loads (weights before the strategy creates its
 * stages, the training state after). */
#ifndef FG_TRAINER_CKPT_H
#define FG_TRAINER_CKPT_H

#include <stdint.h>

#include "fulgur/plugin.h"

struct fg_trainer;

typedef struct fg_checkpointer {
    struct fg_ckpt *loaded; /* the checkpoint being resumed from, between the two loads */
} fg_checkpointer;

fg_status fg_trainer_save_checkpoint(struct fg_trainer *t, const char *path, fg_error *err);
/* Resolves ckpt_path (last, best or a file) and loads its weights into the initial host
 * parameters (before the strategy creates stages), keeping the file open for the state. */
fg_status fg_trainer_load_weights(struct fg_trainer *t, fg_error *err);
/* After setup: optimizer state, scheduler, progress and loader position from that file. */
fg_status fg_trainer_load_training_state(struct fg_trainer *t, fg_error *err);
void fg_trainer_close_checkpoint(struct fg_trainer *t);
/* FNV-1a of the primary stage's parameters: equal digests, bitwise-equal weights. */
fg_status fg_trainer_weights_digest(struct fg_trainer *t, uint64_t *digest, fg_error *err);

#endif
