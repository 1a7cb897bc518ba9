/* The [trainer] keys and the loader keys of [data], read once at setup into a part the
 * trainer owns; everything else reads them from there. */
#ifndef FG_TRAINER_KEYS_H
#define FG_TRAINER_KEYS_H

#include <stdint.h>

#include "fulgur/plugin.h"
#include "val_split.h"

struct fg_trainer;

/* "A fraction of the epoch or a count of batches", as Lightning's float/int keys. */
typedef struct fg_batch_limit {
    int is_fraction;
    double fraction;
    int64_t count;
} fg_batch_limit;

typedef struct fg_trainer_keys {
    /* [trainer] */
    int64_t max_epochs, max_steps, accumulate, num_sanity_val_steps, fast_dev_run;
    int64_t check_val_every_n_epoch, log_every, seed;
    int64_t ckpt_every_steps; /* [callback.checkpoint] every_n_train_steps: a step event too */
    double max_time_s, clip_val;
    int clip_by_value, test_after_fit, save_on_exception;
    fg_batch_limit val_check_interval, limit_train, limit_val, limit_test, overfit;
    char ckpt_path[4096], final_checkpoint[4096];
    /* [data] loader keys */
    int64_t batch_size, eval_batch_size, num_workers, prefetch;
    int pin_memory, shuffle, drop_last;
    fg_val_split_spec val_split;
    const char *val_split_origin;
} fg_trainer_keys;

/* Reads t->keys (and [trainer] requeue_signal into t->requeue). */
fg_status fg_trainer_read_keys(struct fg_trainer *t, fg_error *err);
/* Batches of an epoch of `available` batches under a limit. */
int64_t fg_batch_limit_apply(const fg_batch_limit *l, int64_t available);

#endif
