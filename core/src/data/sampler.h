/* Sampler: which sample indices make up batch b of epoch e on this rank.
 *
 * Each epoch is a permutation of [0, length): Fisher-Yates driven by a counter-based RNG
 * keyed by (seed, epoch), so every rank computes the same permutation without talking to
 * the others, and any epoch can be rebuilt on its own (resume). shuffle = 0: identity.
 *
 * Distributed sharding (as torch's DistributedSampler): rank r takes the positions
 * r, r + world_size, r + 2 * world_size, ... of the permutation.
 *   even_shards = 1 (training): the permutation is extended by wrapping around to
 *     ceil(length / world_size) * world_size positions, so every rank has the same number of
 *     samples and therefore the same number of batches (collectives stay matched).
 *   even_shards = 0 (evaluation): no padding; every sample is seen exactly once across the
 *     ranks, and ranks may differ by one sample (and so by one batch).
 * drop_last drops the final partial batch of the rank's shard.
 *
 * groups = G > 1 ([model] batch_groups, training only): this rank's batch b is G groups,
 * group g being batch b of rank (rank * G + g) of world_size * G ranks, each of
 * batch_size / G samples: one process draws what G ranks of ddp draw, rank 0's first. The
 * groups' shards are padded as even_shards pads them, so the groups stay equal in size. */
#ifndef FG_SAMPLER_H
#define FG_SAMPLER_H

#include <stdint.h>

#include "fulgur/plugin.h"

typedef struct fg_sampler_options {
    int64_t length;   /* samples in the dataset (> 0) */
    int batch_size;   /* >= 1 */
    int shuffle;      /* 0: identity order every epoch */
    int drop_last;    /* 1: drop the rank's final partial batch */
    uint64_t seed;    /* same on every rank */
    int rank;         /* [0, world_size) */
    int world_size;   /* >= 1 */
    int even_shards;  /* 1: pad by wrapping (training); 0: exact partition (evaluation) */
    int groups;       /* 0 or 1: none; G > 1 (needs even_shards): G ranks' batches, above */
} fg_sampler_options;

typedef struct fg_sampler fg_sampler;

/* Validates the options (messages name the option and value) and allocates the
 * permutation once; prepares epoch 0. */
fg_status fg_sampler_create(const fg_sampler_options *opts, fg_sampler **out, fg_error *err);
void fg_sampler_destroy(fg_sampler *s);

const fg_sampler_options *fg_sampler_options_of(const fg_sampler *s);
/* Samples this rank visits per epoch (before drop_last). */
int64_t fg_sampler_samples_per_rank(const fg_sampler *s);
int64_t fg_sampler_batches_per_epoch(const fg_sampler *s);

/* Builds the permutation of `epoch` (O(length)). Not safe concurrently with batch(). */
void fg_sampler_set_epoch(fg_sampler *s, int64_t epoch);
/* perm = the permutation of [0, n) that shuffles `epoch` under `seed`: a pure function of
 * (seed, epoch, n), the same on every rank and after every resume (val_split draws its
 * held-out samples from one too). */
void fg_sampler_permutation(uint64_t seed, int64_t epoch, int64_t *perm, int64_t n);
/* The epoch whose permutation is built. */
int64_t fg_sampler_epoch(const fg_sampler *s);

/* Writes the indices of batch b of `epoch` (count <= batch_size of them) into
 * out_indices, which holds batch_size entries. Rebuilds the permutation when `epoch` is not
 * the prepared one. Thread rule: concurrent calls are safe when they all name the epoch
 * already prepared (nothing is written then). b outside [0, batches_per_epoch) fails. */
fg_status fg_sampler_batch(fg_sampler *s, int64_t epoch, int64_t b, int64_t *out_indices,
                           int *count, fg_error *err);

#endif
