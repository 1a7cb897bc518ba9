/* [data] val_split: a validation split held out of the train split.
 *
 * `val_split = 0.1` (a fraction of the train samples, rounded down, at least 1) or
 * `= 5000` (a count). The held-out indices are the first ones of a permutation of the
 * train split keyed by the run's seed alone (fg_sampler_permutation), so they are the same
 * on every rank, for any world size and after any resume, and never depend on the epoch.
 * The train split then samples only the remaining indices.
 *
 * A data plugin whose validation split is its own (image_folder's val_dir, idx's
 * val_fraction, synthetic's val_size) keeps it: val_split beside one is refused, naming
 * both. A split that only stands in for validation (fg_dataset_info.stand_in: idx reading
 * the test files when val_fraction = 0) is replaced. */
#ifndef FG_VAL_SPLIT_H
#define FG_VAL_SPLIT_H

#include <stdint.h>

#include "fulgur/data.h"

typedef struct fg_val_split_spec {
    int is_fraction;
    double fraction; /* (0, 1) */
    int64_t count;   /* >= 1; 0 with is_fraction = 0: no val_split */
} fg_val_split_spec;

/* "0" (or NULL): none; "0.1": a fraction in (0, 1); "5000": a count. A bad value fails
 * naming `origin` ("cfg.ini:12"). */
fg_status fg_val_split_parse(const char *text, const char *origin, fg_val_split_spec *out,
                             fg_error *err);
int fg_val_split_enabled(const fg_val_split_spec *spec);

/* Samples held out of `length`; fails (naming origin) when none or all would be. */
fg_status fg_val_split_size(const fg_val_split_spec *spec, int64_t length, const char *origin,
                            int64_t *val_count, fg_error *err);

/* The two index lists of a train split of `length` samples, each ascending and together
 * a partition of [0, length): *val (val_count) and *train (length - val_count), malloc'd,
 * the caller frees them. */
fg_status fg_val_split_draw(int64_t length, int64_t val_count, uint64_t seed, int64_t **train,
                            int64_t **val, fg_error *err);

/* Opens a second handle on the plugin's train split for the held-out samples: *val_ds,
 * *val_info (length val_count) and *val_idx; shortens *train_info to the rest and sets
 * *train_idx. Nothing is left open or allocated on failure. */
fg_status fg_val_split_carve(const fg_data_vtable *dv, void *data_state,
                             const fg_val_split_spec *spec, const char *origin, uint64_t seed,
                             fg_dataset_info *train_info, int64_t **train_idx, void **val_ds,
                             fg_dataset_info *val_info, int64_t **val_idx, fg_error *err);

#endif
