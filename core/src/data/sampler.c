/* Sampler: per-epoch permutation, distributed sharding, batching. See sampler.h. */
#include "sampler.h"

#include <inttypes.h>
#include <stdlib.h>

struct fg_sampler {
    fg_sampler_options opts;
    int64_t samples_per_rank;
    int64_t batches;
    int64_t epoch;   /* the epoch `perm` was built for */
    int64_t *perm;   /* (length) the epoch's permutation; NULL when shuffle = 0 */
};

/* ---- counter-based RNG --------------------------------------------------------------
 * splitmix64's finalizer as a bijective mixer: value = mix(key + mix(counter)). A draw
 * depends only on (key, counter), never on earlier draws, so the permutation of an epoch
 * is a pure function of (seed, epoch) and identical on every rank and every resume. */

static uint64_t fg_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t fg_epoch_key(uint64_t seed, int64_t epoch)
{
    return fg_mix64(seed ^ fg_mix64((uint64_t)epoch ^ 0x5851F42D4C957F2Dull));
}

static uint64_t fg_rng_draw(uint64_t key, uint64_t counter)
{
    return fg_mix64(key + fg_mix64(counter));
}

/* Uniform in [0, n) without modulo bias: reject draws below 2^64 mod n (almost never
 * happens; each retry uses a fresh counter so the result stays a function of i). */
static uint64_t fg_rng_below(uint64_t key, uint64_t i, uint64_t n)
{
    uint64_t threshold = (0 - n) % n;
    for (uint64_t attempt = 0;; attempt++) {
        uint64_t x = fg_rng_draw(key, (i << 8) + attempt);
        if (x >= threshold)
            return x % n;
    }
}

/* ---- options --------------------------------------------------------------------- */

static fg_status fg_sampler_check(const fg_sampler_options *o, fg_error *err)
{
    if (o->length <= 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "sampler: length = %" PRId64 ", must be > 0 (empty dataset?)",
                            o->length);
    if (o->batch_size < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "sampler: batch_size = %d, must be >= 1", o->batch_size);
    if (o->world_size < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "sampler: world_size = %d, must be >= 1", o->world_size);
    if (o->rank < 0 || o->rank >= o->world_size)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "sampler: rank = %d, must be in [0, %d)", o->rank, o->world_size);
    int g = o->groups > 1 ? o->groups : 1;
    if (g > 1 && (!o->even_shards || o->batch_size % g))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "sampler: groups = %d needs even shards and a batch_size (%d) it "
                            "divides", g, o->batch_size);
    return FG_OK;
}

static int fg_groups(const fg_sampler_options *o)
{
    return o->groups > 1 ? o->groups : 1;
}

static int64_t fg_ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* Positions r, r + W, ... below `total` (the padded or the exact length); with groups, the
 * samples of all of this rank's groups. */
static int64_t fg_shard_size(const fg_sampler_options *o)
{
    int64_t world = o->world_size;
    if (o->even_shards)
        return fg_groups(o) * fg_ceil_div(o->length, world * fg_groups(o));
    return o->rank < o->length ? fg_ceil_div(o->length - o->rank, world) : 0;
}

fg_status fg_sampler_create(const fg_sampler_options *opts, fg_sampler **out, fg_error *err)
{
    *out = NULL;
    fg_status st = fg_sampler_check(opts, err);
    if (st != FG_OK)
        return st;
    fg_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "sampler: out of memory");
    s->opts = *opts;
    s->samples_per_rank = fg_shard_size(opts);
    s->batches = opts->drop_last ? s->samples_per_rank / opts->batch_size
                                 : fg_ceil_div(s->samples_per_rank, opts->batch_size);
    if (opts->shuffle) {
        if ((uint64_t)opts->length > SIZE_MAX / sizeof(int64_t) ||
            !(s->perm = malloc((size_t)opts->length * sizeof(int64_t)))) {
            free(s);
            return fg_error_set(err, FG_OUT_OF_MEMORY,
                                "sampler: out of memory for a permutation of %" PRId64
                                " samples", opts->length);
        }
    }
    s->epoch = -1;
    fg_sampler_set_epoch(s, 0);
    *out = s;
    return FG_OK;
}

void fg_sampler_destroy(fg_sampler *s)
{
    if (!s)
        return;
    free(s->perm);
    free(s);
}

const fg_sampler_options *fg_sampler_options_of(const fg_sampler *s)
{
    return &s->opts;
}

int64_t fg_sampler_samples_per_rank(const fg_sampler *s)
{
    return s->samples_per_rank;
}

int64_t fg_sampler_batches_per_epoch(const fg_sampler *s)
{
    return s->batches;
}

int64_t fg_sampler_epoch(const fg_sampler *s)
{
    return s->epoch;
}

void fg_sampler_set_epoch(fg_sampler *s, int64_t epoch)
{
    if (s->epoch == epoch)
        return;
    s->epoch = epoch;
    if (!s->perm)
        return;
    fg_sampler_permutation(s->opts.seed, epoch, s->perm, s->opts.length);
}

void fg_sampler_permutation(uint64_t seed, int64_t epoch, int64_t *perm, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    /* Fisher-Yates, from the top: position i swaps with a uniform j in [0, i]. */
    uint64_t key = fg_epoch_key(seed, epoch);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)fg_rng_below(key, (uint64_t)i, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

fg_status fg_sampler_batch(fg_sampler *s, int64_t epoch, int64_t b, int64_t *out_indices,
                           int *count, fg_error *err)
{
    *count = 0;
    if (b < 0 || b >= s->batches)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "sampler: batch %" PRId64 " out of range [0, %" PRId64
                            ") for epoch %" PRId64 " (rank %d)",
                            b, s->batches, epoch, s->opts.rank);
    if (epoch != s->epoch)
        fg_sampler_set_epoch(s, epoch);
    const fg_sampler_options *o = &s->opts;
    int g = fg_groups(o), n = o->batch_size / g;
    int64_t world = (int64_t)o->world_size * g, shard = s->samples_per_rank / g;
    int64_t first = b * n;
    int64_t end = first + n;
    if (end > shard)
        end = shard;
    for (int64_t r = 0; r < g; r++) {
        int64_t *out = out_indices + r * (end - first);
        for (int64_t k = first; k < end; k++) {
            /* k-th sample of rank (rank g + r) = its position + k * world of the order. */
            int64_t pos = (o->rank * g + r + k * world) % o->length;
            out[k - first] = s->perm ? s->perm[pos] : pos;
        }
    }
    *count = (int)(g * (end - first));
    return FG_OK;
}
