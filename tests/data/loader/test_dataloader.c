/* Sampler and data loader tests, against a fake in-test data vtable.
 * Usage: test_dataloader NAME (one ctest per NAME; see the table at the bottom). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_copy.h"
#include "check.h"
#include "dataloader.h"
#include "sampler.h"
#include "val_split.h"

/* The checks are tests/common/check.h's; these names stay for this file. */
#define g_failures fg_test_failures
#define CHECK_EQ_I64 CHECK_EQ
#define CHECK_HAS CHECK_CONTAINS

/* Stops the test at the first failed call whose result the rest depends on. */
#define REQUIRE_OK(call)                                                                 \
    do {                                                                                 \
        fg_status st_ = (call);                                                          \
        if (st_ != FG_OK) {                                                              \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,          \
                    err.message);                                                        \
            g_failures++;                                                                \
            return;                                                                      \
        }                                                                                \
    } while (0)

/* ---- sampler helpers ------------------------------------------------------------------ */

static fg_sampler_options sampler_opts(int64_t length, int batch, int shuffle, int drop_last)
{
    fg_sampler_options o = {.length = length, .batch_size = batch, .shuffle = shuffle,
                            .drop_last = drop_last, .seed = 1234, .rank = 0, .world_size = 1,
                            .even_shards = 1};
    return o;
}

/* Every index of `epoch` in delivery order; returns how many. out holds enough. */
static int64_t epoch_indices(fg_sampler *s, int64_t epoch, int64_t *out)
{
    fg_error err = {0};
    int64_t n = 0;
    int64_t batches = fg_sampler_batches_per_epoch(s);
    for (int64_t b = 0; b < batches; b++) {
        int count = 0;
        if (fg_sampler_batch(s, epoch, b, out + n, &count, &err) != FG_OK) {
            fprintf(stderr, "fg_sampler_batch: %s\n", err.message);
            g_failures++;
            return n;
        }
        n += count;
    }
    return n;
}

/* ---- sampler tests ------------------------------------------------------------------- */

static void test_sampler_permutation(void)
{
    fg_error err = {0};
    fg_sampler *s = NULL;
    fg_sampler_options o = sampler_opts(1000, 7, 1, 0);
    REQUIRE_OK(fg_sampler_create(&o, &s, &err));
    CHECK_EQ_I64(fg_sampler_batches_per_epoch(s), 143);
    int64_t idx[1000];
    int seen[1000] = {0};
    CHECK_EQ_I64(epoch_indices(s, 0, idx), 1000);
    int identity = 1;
    for (int i = 0; i < 1000; i++) {
        CHECK(idx[i] >= 0 && idx[i] < 1000);
        if (idx[i] >= 0 && idx[i] < 1000)
            seen[idx[i]]++;
        identity &= idx[i] == i;
    }
    for (int i = 0; i < 1000; i++)
        CHECK_EQ_I64(seen[i], 1);
    CHECK(!identity);
    fg_sampler_destroy(s);
}

static void test_sampler_determinism(void)
{
    fg_error err = {0};
    fg_sampler *a = NULL, *b = NULL, *c = NULL;
    fg_sampler_options o = sampler_opts(500, 16, 1, 0);
    REQUIRE_OK(fg_sampler_create(&o, &a, &err));
    REQUIRE_OK(fg_sampler_create(&o, &b, &err));
    o.seed = 99;
    REQUIRE_OK(fg_sampler_create(&o, &c, &err));
    int64_t a3[500], b3[500], a4[500], c3[500], again[500];
    epoch_indices(a, 3, a3);
    epoch_indices(b, 3, b3);
    epoch_indices(a, 4, a4);
    epoch_indices(c, 3, c3);
    epoch_indices(a, 3, again); /* rebuilt after epoch 4: a pure function of (seed, epoch) */
    CHECK(memcmp(a3, b3, sizeof a3) == 0);
    CHECK(memcmp(a3, again, sizeof a3) == 0);
    CHECK(memcmp(a3, a4, sizeof a3) != 0);
    CHECK(memcmp(a3, c3, sizeof a3) != 0);
    fg_sampler_destroy(a);
    fg_sampler_destroy(b);
    fg_sampler_destroy(c);
}

static void test_sampler_identity(void)
{
    fg_error err = {0};
    fg_sampler *s = NULL;
    fg_sampler_options o = sampler_opts(23, 5, 0, 0);
    REQUIRE_OK(fg_sampler_create(&o, &s, &err));
    for (int64_t epoch = 0; epoch < 3; epoch++) {
        int64_t idx[23];
        CHECK_EQ_I64(epoch_indices(s, epoch, idx), 23);
        for (int i = 0; i < 23; i++)
            CHECK_EQ_I64(idx[i], i);
    }
    fg_sampler_destroy(s);
}

static void test_sampler_drop_last(void)
{
    fg_error err = {0};
    fg_sampler *s = NULL;
    int64_t idx[4];
    int count = 0;

    fg_sampler_options o = sampler_opts(10, 3, 1, 0);
    REQUIRE_OK(fg_sampler_create(&o, &s, &err));
    CHECK_EQ_I64(fg_sampler_batches_per_epoch(s), 4);
    REQUIRE_OK(fg_sampler_batch(s, 0, 3, idx, &count, &err));
    CHECK_EQ_I64(count, 1);
    REQUIRE_OK(fg_sampler_batch(s, 0, 2, idx, &count, &err));
    CHECK_EQ_I64(count, 3);
    fg_sampler_destroy(s);

    o.drop_last = 1;
    REQUIRE_OK(fg_sampler_create(&o, &s, &err));
    CHECK_EQ_I64(fg_sampler_batches_per_epoch(s), 3);
    CHECK(fg_sampler_batch(s, 0, 3, idx, &count, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "batch 3 out of range [0, 3)");
    fg_sampler_destroy(s);

    /* Exact multiple: drop_last changes nothing. */
    o = sampler_opts(12, 4, 0, 1);
    REQUIRE_OK(fg_sampler_create(&o, &s, &err));
    CHECK_EQ_I64(fg_sampler_batches_per_epoch(s), 3);
    fg_sampler_destroy(s);

    /* Fewer samples than one batch: drop_last leaves no batch at all. */
    o = sampler_opts(3, 4, 0, 1);
    REQUIRE_OK(fg_sampler_create(&o, &s, &err));
    CHECK_EQ_I64(fg_sampler_batches_per_epoch(s), 0);
    fg_sampler_destroy(s);

    /* Per rank: 10 samples over 3 ranks padded to 4 each; batch 3 -> 2 or 1 batches. */
    o = sampler_opts(10, 3, 1, 0);
    o.world_size = 3;
    o.rank = 2;
    REQUIRE_OK(fg_sampler_create(&o, &s, &err));
    CHECK_EQ_I64(fg_sampler_samples_per_rank(s), 4);
    CHECK_EQ_I64(fg_sampler_batches_per_epoch(s), 2);
    fg_sampler_destroy(s);
    o.drop_last = 1;
    REQUIRE_OK(fg_sampler_create(&o, &s, &err));
    CHECK_EQ_I64(fg_sampler_batches_per_epoch(s), 1);
    fg_sampler_destroy(s);
}

/* Collects every rank's indices for one epoch: counts[i] = times index i was seen. */
static void shard_counts(int64_t length, int world, int even, int batch, int64_t epoch,
                         int *counts, int64_t *per_rank)
{
    fg_error err = {0};
    int64_t *idx = malloc((size_t)(length + world) * sizeof *idx);
    memset(counts, 0, (size_t)length * sizeof *counts);
    for (int r = 0; r < world; r++) {
        fg_sampler *s = NULL;
        fg_sampler_options o = sampler_opts(length, batch, 1, 0);
        o.world_size = world;
        o.rank = r;
        o.even_shards = even;
        if (fg_sampler_create(&o, &s, &err) != FG_OK) {
            fprintf(stderr, "fg_sampler_create: %s\n", err.message);
            g_failures++;
            break;
        }
        int64_t n = epoch_indices(s, epoch, idx);
        CHECK_EQ_I64(n, fg_sampler_samples_per_rank(s));
        per_rank[r] = n;
        for (int64_t k = 0; k < n; k++)
            counts[idx[k]]++;
        fg_sampler_destroy(s);
    }
    free(idx);
}

static void test_sampler_distributed_train(void)
{
    static const int64_t lengths[] = {10, 12, 13, 97, 3};
    static const int worlds[] = {4, 3, 4, 8, 5};
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
        int64_t length = lengths[t];
        int world = worlds[t];
        int counts[100];
        int64_t per_rank[8];
        shard_counts(length, world, 1, 2, 5, counts, per_rank);
        int64_t expect = (length + world - 1) / world;
        for (int r = 0; r < world; r++)
            CHECK_EQ_I64(per_rank[r], expect);
        /* Disjoint except for the padding: every index at least once, and exactly
         * expect * world - length extra appearances in all. */
        int64_t extra = 0;
        for (int64_t i = 0; i < length; i++) {
            CHECK(counts[i] >= 1);
            extra += counts[i] - 1;
        }
        CHECK_EQ_I64(extra, expect * world - length);
    }

    /* The padding wraps around: with 10 samples over 4 ranks, ranks 2 and 3 end with the
     * first two samples of the permutation (positions 10 and 11 = 0 and 1). */
    fg_error err = {0};
    fg_sampler *s0 = NULL, *s2 = NULL;
    fg_sampler_options o = sampler_opts(10, 3, 1, 0);
    o.world_size = 4;
    REQUIRE_OK(fg_sampler_create(&o, &s0, &err));
    o.rank = 2;
    REQUIRE_OK(fg_sampler_create(&o, &s2, &err));
    int64_t r0[3], r2[3];
    int count = 0;
    REQUIRE_OK(fg_sampler_batch(s0, 1, 0, r0, &count, &err));
    REQUIRE_OK(fg_sampler_batch(s2, 1, 0, r2, &count, &err));
    CHECK_EQ_I64(count, 3);
    CHECK_EQ_I64(r2[2], r0[0]); /* position 10 wraps to position 0 */
    fg_sampler_destroy(s0);
    fg_sampler_destroy(s2);
}

static void test_sampler_distributed_eval(void)
{
    int counts[100];
    int64_t per_rank[8];
    shard_counts(10, 4, 0, 3, 2, counts, per_rank);
    CHECK_EQ_I64(per_rank[0], 3);
    CHECK_EQ_I64(per_rank[1], 3);
    CHECK_EQ_I64(per_rank[2], 2);
    CHECK_EQ_I64(per_rank[3], 2);
    for (int i = 0; i < 10; i++)
        CHECK_EQ_I64(counts[i], 1);

    shard_counts(97, 8, 0, 5, 0, counts, per_rank);
    int64_t total = 0;
    for (int r = 0; r < 8; r++)
        total += per_rank[r];
    CHECK_EQ_I64(total, 97);
    for (int i = 0; i < 97; i++)
        CHECK_EQ_I64(counts[i], 1);

    /* More ranks than samples: the last rank gets nothing, and no batch. */
    shard_counts(3, 4, 0, 2, 0, counts, per_rank);
    CHECK_EQ_I64(per_rank[3], 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_I64(counts[i], 1);
    fg_error err = {0};
    fg_sampler *s = NULL;
    fg_sampler_options o = sampler_opts(3, 2, 1, 0);
    o.world_size = 4;
    o.rank = 3;
    o.even_shards = 0;
    REQUIRE_OK(fg_sampler_create(&o, &s, &err));
    CHECK_EQ_I64(fg_sampler_batches_per_epoch(s), 0);
    fg_sampler_destroy(s);
}

static void test_sampler_options(void)
{
    fg_error err = {0};
    fg_sampler *s = NULL;
    fg_sampler_options o = sampler_opts(10, 0, 1, 0);
    CHECK(fg_sampler_create(&o, &s, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "batch_size = 0, must be >= 1");
    CHECK(s == NULL);
    o = sampler_opts(0, 4, 1, 0);
    CHECK(fg_sampler_create(&o, &s, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "length = 0");
    o = sampler_opts(10, 4, 1, 0);
    o.world_size = 4;
    o.rank = 4;
    CHECK(fg_sampler_create(&o, &s, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "rank = 4, must be in [0, 4)");
    o.world_size = 0;
    o.rank = 0;
    CHECK(fg_sampler_create(&o, &s, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "world_size = 0");
}

/* [model] batch_groups: a rank's batch in G groups is, group after group, the batches of
 * its G virtual ranks (rank * G + g of world * G) at batch_size / G, padding included. */
static void test_sampler_groups(void)
{
    static const struct {
        int64_t length;
        int world, rank, groups, group_batch, drop_last;
    } cases[] = {
        {10, 1, 0, 2, 2, 0}, {13, 1, 0, 2, 3, 0}, {13, 1, 0, 3, 2, 1},
        {97, 2, 1, 2, 5, 0}, {64, 1, 0, 4, 4, 0}, {7, 2, 0, 2, 1, 0},
    };
    fg_error err = {0};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int g = cases[t].groups, n = cases[t].group_batch;
        fg_sampler_options o = sampler_opts(cases[t].length, g * n, 1, cases[t].drop_last);
        o.world_size = cases[t].world;
        o.rank = cases[t].rank;
        o.groups = g;
        fg_sampler *s = NULL, *v[4] = {0};
        REQUIRE_OK(fg_sampler_create(&o, &s, &err));
        for (int r = 0; r < g; r++) {
            fg_sampler_options vo = sampler_opts(cases[t].length, n, 1, cases[t].drop_last);
            vo.world_size = cases[t].world * g;
            vo.rank = cases[t].rank * g + r;
            REQUIRE_OK(fg_sampler_create(&vo, &v[r], &err));
            CHECK_EQ_I64(fg_sampler_batches_per_epoch(v[r]), fg_sampler_batches_per_epoch(s));
        }
        CHECK_EQ_I64(fg_sampler_samples_per_rank(s), g * fg_sampler_samples_per_rank(v[0]));
        for (int64_t b = 0; b < fg_sampler_batches_per_epoch(s); b++) {
            int64_t got[64], want[16];
            int count = 0, part = 0;
            REQUIRE_OK(fg_sampler_batch(s, 3, b, got, &count, &err));
            CHECK_EQ_I64(count % g, 0);
            for (int r = 0; r < g; r++) {
                REQUIRE_OK(fg_sampler_batch(v[r], 3, b, want, &part, &err));
                CHECK_EQ_I64(part, count / g);
                for (int k = 0; k < part; k++)
                    CHECK_EQ_I64(got[r * part + k], want[k]);
            }
        }
        fg_sampler_destroy(s);
        for (int r = 0; r < g; r++)
            fg_sampler_destroy(v[r]);
    }
    fg_sampler *s = NULL;
    fg_sampler_options o = sampler_opts(10, 5, 1, 0);
    o.groups = 2;
    CHECK(fg_sampler_create(&o, &s, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "groups = 2 needs even shards and a batch_size (5) it divides");
    o = sampler_opts(10, 4, 1, 0);
    o.groups = 2;
    o.even_shards = 0;
    CHECK(fg_sampler_create(&o, &s, &err) == FG_INVALID_ARGUMENT);
    CHECK(s == NULL);
}

/* ---- the fake data plugin ------------------------------------------------------------ */

#define FAKE_ELEMS 6 /* sample shape (2, 3) */

typedef struct fake_data {
    int64_t length;
    _Atomic int64_t fail_index; /* read() fails for a batch that holds it; -1: never */
    atomic_long reads;       /* read() calls, from every thread */
    atomic_long args_seen;   /* reads whose args matched want_* below */
    uint64_t want_seed;
    int want_split;
    int64_t want_epoch;
    int label_shift; /* labels are i % 10 - label_shift */
} fake_data;

/* Sample i is (i * FAKE_ELEMS + j) / 8 for j in [0, FAKE_ELEMS), exactly representable;
 * its label is i % 10. */
static float fake_value(int64_t i, int j)
{
    return (float)(i * FAKE_ELEMS + j) * 0.125f;
}

static fg_status fake_read(void *state, void *dataset, const fg_data_read_args *args,
                           const int64_t *indices, int count, void *samples, void *labels,
                           fg_error *err)
{
    fake_data *d = dataset;
    (void)state;
    atomic_fetch_add(&d->reads, 1);
    if (FG_HAS_FIELD(args, fg_data_read_args, epoch) && args->seed == d->want_seed &&
        args->split == d->want_split && args->epoch == d->want_epoch)
        atomic_fetch_add(&d->args_seen, 1);
    float *out = samples;
    for (int k = 0; k < count; k++) {
        if (indices[k] < 0 || indices[k] >= d->length)
            return fg_error_set(err, FG_INTERNAL, "fake: index %" PRId64 " out of range",
                                indices[k]);
        if (indices[k] == atomic_load(&d->fail_index))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "fake.bin: sample %" PRId64 " is corrupt", indices[k]);
        for (int j = 0; j < FAKE_ELEMS; j++)
            out[k * FAKE_ELEMS + j] = fake_value(indices[k], j);
        if (labels)
            ((int32_t *)labels)[k] = (int32_t)(indices[k] % 10) - d->label_shift;
    }
    return FG_OK;
}

static const fg_data_vtable fake_vtable = {
    .struct_size = sizeof(fg_data_vtable),
    .open = NULL,
    .close = NULL,
    .read = fake_read,
};

/* A counting staging allocator: proves nothing is allocated per batch and all is freed. */
typedef struct counting_alloc {
    atomic_int allocs;
    atomic_int frees;
    int fail; /* 1: every allocation fails */
} counting_alloc;

static fg_status counting_alloc_fn(void *ctx, size_t bytes, void **ptr, fg_error *err)
{
    counting_alloc *c = ctx;
    if (c->fail)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "pinned: cannot allocate %zu bytes", bytes);
    *ptr = malloc(bytes);
    if (!*ptr)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "malloc failed");
    atomic_fetch_add(&c->allocs, 1);
    return FG_OK;
}

static void counting_free_fn(void *ctx, void *ptr)
{
    counting_alloc *c = ctx;
    atomic_fetch_add(&c->frees, 1);
    free(ptr);
}

static fg_dataloader_options loader_opts(fake_data *d, counting_alloc *ca, int batch,
                                         int workers, int prefetch)
{
    fg_dataloader_options o;
    memset(&o, 0, sizeof o);
    o.data = &fake_vtable;
    o.dataset = d;
    o.info.struct_size = sizeof o.info;
    o.info.length = d->length;
    o.info.rank = 2;
    o.info.shape[0] = 2;
    o.info.shape[1] = 3;
    o.info.sample_dtype = FG_F32;
    o.info.num_classes = 10;
    o.info.label_dtype = FG_I32;
    o.info.label_elems = 1;
    o.name = "train";
    o.sampler = sampler_opts(0, batch, 1, 0);
    o.num_workers = workers;
    o.prefetch = prefetch;
    if (ca) {
        o.alloc = counting_alloc_fn;
        o.free = counting_free_fn;
        o.alloc_ctx = ca;
    }
    return o;
}

static void fake_init(fake_data *d, int64_t length)
{
    d->length = length;
    atomic_init(&d->fail_index, -1);
    atomic_init(&d->reads, 0);
    atomic_init(&d->args_seen, 0);
    d->want_seed = 0;
    d->want_split = 0;
    d->want_epoch = -1;
    d->label_shift = 0;
}

/* Checks one delivered batch against what the sampler says it must hold. */
static void check_batch(fg_sampler *ref, int64_t epoch, int64_t b, const fg_batch_view *v)
{
    fg_error err = {0};
    int64_t idx[64];
    int count = 0;
    if (fg_sampler_batch(ref, epoch, b, idx, &count, &err) != FG_OK) {
        fprintf(stderr, "reference: %s\n", err.message);
        g_failures++;
        return;
    }
    CHECK_EQ_I64(v->index, b);
    CHECK_EQ_I64(v->epoch, epoch);
    CHECK_EQ_I64(v->count, count);
    CHECK(v->wait_seconds >= 0.0);
    int bad = 0;
    for (int k = 0; k < count && k < v->count; k++) {
        for (int j = 0; j < FAKE_ELEMS; j++)
            bad += v->samples[k * FAKE_ELEMS + j] != fake_value(idx[k], j);
        bad += v->labels[k] != (int32_t)(idx[k] % 10);
    }
    if (bad) {
        fprintf(stderr, "batch %" PRId64 " of epoch %" PRId64 ": %d wrong values\n", b, epoch,
                bad);
        g_failures++;
    }
}

/* Runs one whole epoch through the loader and compares every batch; returns batches seen. */
static int64_t run_epoch(fg_dataloader *dl, fg_sampler *ref, int64_t epoch, int64_t first)
{
    fg_error err = {0};
    if (fg_dataloader_start_epoch(dl, epoch, first, &err) != FG_OK) {
        fprintf(stderr, "start_epoch: %s\n", err.message);
        g_failures++;
        return 0;
    }
    int64_t seen = 0;
    for (;;) {
        const fg_batch_view *v = NULL;
        if (fg_dataloader_next(dl, &v, &err) != FG_OK) {
            fprintf(stderr, "next: %s\n", err.message);
            g_failures++;
            return seen;
        }
        if (!v)
            break;
        check_batch(ref, epoch, first + seen, v);
        fg_dataloader_release(dl, v);
        seen++;
    }
    return seen;
}

/* ---- data loader tests --------------------------------------------------------------- */

static void test_loader_same_batches(void)
{
    static const int workers[] = {0, 1, 3};
    static const int prefetch[] = {1, 4};
    fg_error err = {0};
    fake_data d;
    fake_init(&d, 103);
    fg_sampler *ref = NULL;
    fg_sampler_options so = sampler_opts(103, 8, 1, 0);
    REQUIRE_OK(fg_sampler_create(&so, &ref, &err));
    for (size_t w = 0; w < 3; w++) {
        for (size_t p = 0; p < 2; p++) {
            counting_alloc ca = {0};
            fg_dataloader *dl = NULL;
            fg_dataloader_options o = loader_opts(&d, &ca, 8, workers[w], prefetch[p]);
            REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
            int slots = workers[w] + prefetch[p];
            CHECK_EQ_I64(fg_dataloader_slot_count(dl), slots);
            CHECK_EQ_I64(fg_dataloader_batches_per_epoch(dl), 13);
            CHECK_EQ_I64(fg_dataloader_sample_elems(dl), FAKE_ELEMS);
            CHECK_EQ_I64(atomic_load(&ca.allocs), slots);
            for (int64_t epoch = 0; epoch < 2; epoch++)
                CHECK_EQ_I64(run_epoch(dl, ref, epoch, 0), 13);
            CHECK_EQ_I64(atomic_load(&d.reads), 26);
            atomic_store(&d.reads, 0);
            CHECK_EQ_I64(atomic_load(&ca.allocs), slots); /* nothing per batch */
            fg_dataloader_destroy(dl);
            CHECK_EQ_I64(atomic_load(&ca.frees), slots);
        }
    }
    fg_sampler_destroy(ref);
}

static void test_loader_resume(void)
{
    static const int workers[] = {0, 2};
    fg_error err = {0};
    fake_data d;
    fake_init(&d, 50);
    fg_sampler *ref = NULL;
    fg_sampler_options so = sampler_opts(50, 4, 1, 0);
    REQUIRE_OK(fg_sampler_create(&so, &ref, &err));
    for (size_t w = 0; w < 2; w++) {
        fg_dataloader *dl = NULL;
        fg_dataloader_options o = loader_opts(&d, NULL, 4, workers[w], 2);
        REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
        CHECK_EQ_I64(run_epoch(dl, ref, 3, 5), 13 - 5); /* batches 5..12 of epoch 3 */
        CHECK_EQ_I64(run_epoch(dl, ref, 4, 12), 1);
        CHECK_EQ_I64(run_epoch(dl, ref, 4, 13), 0);      /* resumed at the very end */
        CHECK(fg_dataloader_start_epoch(dl, 4, 14, &err) == FG_INVALID_ARGUMENT);
        CHECK_HAS(err.message, "first batch 14 of epoch 4 is outside [0, 13]");
        fg_dataloader_destroy(dl);
    }
    fg_sampler_destroy(ref);
}

/* An epoch abandoned half way (a view still held) and the next started cleanly. */
static void test_loader_abandon_epoch(void)
{
    fg_error err = {0};
    fake_data d;
    fake_init(&d, 64);
    fg_sampler *ref = NULL;
    fg_sampler_options so = sampler_opts(64, 4, 1, 0);
    REQUIRE_OK(fg_sampler_create(&so, &ref, &err));
    counting_alloc ca = {0};
    fg_dataloader *dl = NULL;
    fg_dataloader_options o = loader_opts(&d, &ca, 4, 2, 3);
    REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
    REQUIRE_OK(fg_dataloader_start_epoch(dl, 0, 0, &err));
    const fg_batch_view *v = NULL;
    for (int b = 0; b < 3; b++) {
        REQUIRE_OK(fg_dataloader_next(dl, &v, &err));
        CHECK(v != NULL);
        if (b < 2)
            fg_dataloader_release(dl, v);
    }
    CHECK_EQ_I64(run_epoch(dl, ref, 1, 0), 16);
    CHECK_EQ_I64(atomic_load(&ca.allocs), 5);
    fg_dataloader_destroy(dl);
    CHECK_EQ_I64(atomic_load(&ca.frees), 5);
    fg_sampler_destroy(ref);
}

static void test_loader_read_error(void)
{
    static const int workers[] = {0, 1, 3};
    fg_error err = {0};
    fg_sampler *ref = NULL;
    fg_sampler_options so = sampler_opts(100, 4, 1, 0);
    REQUIRE_OK(fg_sampler_create(&so, &ref, &err));
    int64_t idx[4];
    int count = 0;
    REQUIRE_OK(fg_sampler_batch(ref, 0, 5, idx, &count, &err));
    char expect[64];
    snprintf(expect, sizeof expect, "fake.bin: sample %" PRId64 " is corrupt", idx[2]);

    for (size_t w = 0; w < 3; w++) {
        fake_data d;
        fake_init(&d, 100);
        atomic_store(&d.fail_index, idx[2]);
        fg_dataloader *dl = NULL;
        fg_dataloader_options o = loader_opts(&d, NULL, 4, workers[w], 2);
        REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
        REQUIRE_OK(fg_dataloader_start_epoch(dl, 0, 0, &err));
        const fg_batch_view *v = NULL;
        for (int64_t b = 0; b < 5; b++) {
            REQUIRE_OK(fg_dataloader_next(dl, &v, &err));
            check_batch(ref, 0, b, v);
            fg_dataloader_release(dl, v);
        }
        memset(&err, 0, sizeof err);
        CHECK(fg_dataloader_next(dl, &v, &err) == FG_INVALID_ARGUMENT);
        CHECK(v == NULL);
        CHECK(err.status == FG_INVALID_ARGUMENT);
        CHECK_HAS(err.message, "data loader 'train': reading batch 5 of epoch 0 (rank 0)");
        CHECK_HAS(err.message, expect);
        /* Sticky until the next epoch starts. */
        memset(&err, 0, sizeof err);
        CHECK(fg_dataloader_next(dl, &v, &err) == FG_INVALID_ARGUMENT);
        CHECK_HAS(err.message, "batch 5 of epoch 0");
        /* Recovers once the data is fine. */
        atomic_store(&d.fail_index, -1);
        CHECK_EQ_I64(run_epoch(dl, ref, 0, 0), 25);
        fg_dataloader_destroy(dl);
    }
    fg_sampler_destroy(ref);
}

static void test_loader_destroy_midway(void)
{
    fg_error err = {0};
    fake_data d;
    fake_init(&d, 400);
    counting_alloc ca = {0};
    fg_dataloader *dl = NULL;
    fg_dataloader_options o = loader_opts(&d, &ca, 4, 2, 4);
    REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
    CHECK_EQ_I64(fg_dataloader_batches_per_epoch(dl), 100);
    REQUIRE_OK(fg_dataloader_start_epoch(dl, 0, 0, &err));
    const fg_batch_view *v = NULL;
    REQUIRE_OK(fg_dataloader_next(dl, &v, &err));
    fg_dataloader_release(dl, v);
    REQUIRE_OK(fg_dataloader_next(dl, &v, &err)); /* held across destroy */
    CHECK(v != NULL && v->index == 1);
    fg_dataloader_destroy(dl); /* must join without waiting for the other 98 batches */
    /* Look-ahead is bounded by the slots: at most 2 delivered + 6 slots were read. */
    CHECK(atomic_load(&d.reads) <= 2 + 6);
    CHECK_EQ_I64(atomic_load(&ca.frees), atomic_load(&ca.allocs));

    /* Destroy before any epoch, and right after starting one. */
    REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
    fg_dataloader_destroy(dl);
    REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
    REQUIRE_OK(fg_dataloader_start_epoch(dl, 0, 0, &err));
    fg_dataloader_destroy(dl);
    CHECK_EQ_I64(atomic_load(&ca.frees), atomic_load(&ca.allocs));
}

/* Holding every slot and asking for more fails instead of hanging. */
static void test_loader_held_limit(void)
{
    static const int workers[] = {0, 2};
    fg_error err = {0};
    fake_data d;
    fake_init(&d, 40);
    for (size_t w = 0; w < 2; w++) {
        fg_dataloader *dl = NULL;
        fg_dataloader_options o = loader_opts(&d, NULL, 2, workers[w], 2);
        REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
        REQUIRE_OK(fg_dataloader_start_epoch(dl, 0, 0, &err));
        int slots = fg_dataloader_slot_count(dl);
        const fg_batch_view *held[8];
        for (int i = 0; i < slots; i++)
            REQUIRE_OK(fg_dataloader_next(dl, &held[i], &err));
        const fg_batch_view *v = NULL;
        CHECK(fg_dataloader_next(dl, &v, &err) == FG_INVALID_ARGUMENT);
        CHECK(v == NULL);
        CHECK_HAS(err.message, "still holds; release batches");
        fg_dataloader_release(dl, held[0]);
        REQUIRE_OK(fg_dataloader_next(dl, &v, &err));
        CHECK(v != NULL && v->index == slots);
        fg_dataloader_destroy(dl);
    }
}

static void test_loader_options(void)
{
    fg_error err = {0};
    fake_data d;
    fake_init(&d, 40);
    fg_dataloader *dl = NULL;

    fg_dataloader_options o = loader_opts(&d, NULL, 4, 1, 0);
    CHECK(fg_dataloader_create(&o, &dl, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "data loader 'train': prefetch = 0, must be >= 1");
    CHECK(dl == NULL);

    o = loader_opts(&d, NULL, 4, -1, 1);
    CHECK(fg_dataloader_create(&o, &dl, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "num_workers = -1");

    o = loader_opts(&d, NULL, 4, 1, 1);
    o.info.sample_dtype = FG_F16;
    CHECK(fg_dataloader_create(&o, &dl, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "sample dtype f16 is not supported");

    o = loader_opts(&d, NULL, 4, 1, 1);
    o.info.shape[1] = 0;
    CHECK(fg_dataloader_create(&o, &dl, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "sample shape[1] = 0");

    o = loader_opts(&d, NULL, 4, 1, 1);
    o.sampler.length = 41;
    CHECK(fg_dataloader_create(&o, &dl, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "sampler length = 41 but the dataset has 40 samples");

    o = loader_opts(&d, NULL, 0, 1, 1);
    CHECK(fg_dataloader_create(&o, &dl, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "batch_size = 0");

    /* The allocator's message comes through, and what was taken is given back. */
    counting_alloc ca = {0};
    ca.fail = 1;
    o = loader_opts(&d, &ca, 4, 2, 2);
    CHECK(fg_dataloader_create(&o, &dl, &err) == FG_OUT_OF_MEMORY);
    CHECK_HAS(err.message, "pinned: cannot allocate");
    CHECK(dl == NULL);

    o = loader_opts(&d, NULL, 4, 0, 1);
    REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
    const fg_batch_view *v = NULL;
    CHECK(fg_dataloader_next(dl, &v, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "next() before start_epoch()");
    fg_dataloader_destroy(dl);
}

/* Unlabelled data, a subset length, and evaluation shards through the loader. */
static void test_loader_shapes(void)
{
    fg_error err = {0};
    fake_data d;
    fake_init(&d, 30);
    fg_dataloader *dl = NULL;
    fg_dataloader_options o = loader_opts(&d, NULL, 4, 2, 2);
    o.info.num_classes = 0;
    o.info.label_elems = 0;
    o.sampler.length = 10; /* the first 10 samples only */
    o.sampler.shuffle = 0;
    REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
    REQUIRE_OK(fg_dataloader_start_epoch(dl, 0, 0, &err));
    int64_t total = 0;
    for (;;) {
        const fg_batch_view *v = NULL;
        REQUIRE_OK(fg_dataloader_next(dl, &v, &err));
        if (!v)
            break;
        CHECK(v->labels == NULL);
        for (int k = 0; k < v->count; k++)
            CHECK(v->samples[k * FAKE_ELEMS] == fake_value(total + k, 0));
        total += v->count;
        fg_dataloader_release(dl, v);
    }
    CHECK_EQ_I64(total, 10);
    fg_dataloader_destroy(dl);

    /* Evaluation over 3 ranks: counts add up to the dataset exactly. */
    int64_t sum = 0;
    for (int r = 0; r < 3; r++) {
        o = loader_opts(&d, NULL, 4, 1, 2);
        o.sampler.world_size = 3;
        o.sampler.rank = r;
        o.sampler.even_shards = 0;
        REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
        REQUIRE_OK(fg_dataloader_start_epoch(dl, 0, 0, &err));
        const fg_batch_view *v = NULL;
        while (fg_dataloader_next(dl, &v, &err) == FG_OK && v) {
            sum += v->count;
            fg_dataloader_release(dl, v);
        }
        fg_dataloader_destroy(dl);
    }
    CHECK_EQ_I64(sum, 30);
}

/* ---- copy fences ---------------------------------------------------------------------- */

/* A fake backend with events: event_sync marks the event synced (or fails), nothing else is
 * used by the fences. read() checks, for the staging buffer it is about to rewrite, that
 * the event the consumer linked into that slot's fence was synced first. */
typedef struct fake_event {
    atomic_int synced;
    int fail;
} fake_event;

enum { FENCE_BATCHES = 40, FENCE_SLOTS = 3 };

static struct {
    pthread_mutex_t mu;
    const void *buffer[FENCE_BATCHES]; /* staging buffers with a linked event */
    fake_event *event[FENCE_BATCHES];
    int pending;
    atomic_int rewritten_early;
    atomic_int checked;
} g_fence = {.mu = PTHREAD_MUTEX_INITIALIZER};

static fg_status fake_event_sync(void *state, void *event, fg_error *err)
{
    (void)state;
    fake_event *e = event;
    if (e->fail)
        return fg_error_set(err, FG_BACKEND_ERROR, "fake: device lost");
    atomic_store(&e->synced, 1);
    return FG_OK;
}

static const fg_backend_vtable fake_events_backend = {
    .struct_size = sizeof(fg_backend_vtable),
    .event_sync = fake_event_sync,
};

static fg_status fenced_read(void *state, void *dataset, const fg_data_read_args *args,
                             const int64_t *indices, int count, void *samples, void *labels,
                             fg_error *err)
{
    pthread_mutex_lock(&g_fence.mu);
    for (int i = 0; i < g_fence.pending; i++) {
        if (g_fence.buffer[i] != samples)
            continue;
        if (!atomic_load(&g_fence.event[i]->synced))
            atomic_fetch_add(&g_fence.rewritten_early, 1);
        atomic_fetch_add(&g_fence.checked, 1);
        g_fence.pending--;
        g_fence.buffer[i] = g_fence.buffer[g_fence.pending];
        g_fence.event[i] = g_fence.event[g_fence.pending];
        break;
    }
    pthread_mutex_unlock(&g_fence.mu);
    return fake_read(state, dataset, args, indices, count, samples, labels, err);
}

static const fg_data_vtable fenced_vtable = {
    .struct_size = sizeof(fg_data_vtable),
    .read = fenced_read,
};

/* Each delivered batch links an event into its slot's fence, as a device copy out of it
 * would, and is released at once: the loader must wait for that event before it rewrites
 * the slot (with workers, and inline), never before. */
static void test_loader_copy_fence(void)
{
    for (int workers = 0; workers <= 2; workers += 2) {
        fg_error err = {0};
        fake_data d;
        fake_init(&d, 8 * FENCE_BATCHES);
        fg_dataloader_options o = loader_opts(&d, NULL, 8, workers, FENCE_SLOTS - workers);
        if (workers == 0)
            o.prefetch = FENCE_SLOTS;
        o.data = &fenced_vtable;
        o.fence_base = 5;
        fg_dataloader *dl = NULL;
        REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
        CHECK_EQ_I64(fg_dataloader_slot_count(dl), FENCE_SLOTS);
        CHECK_EQ_I64(fg_dataloader_slots_for(workers, o.prefetch), FENCE_SLOTS);
        static fake_event events[FENCE_BATCHES];
        fg_copy_fence_link links[FENCE_SLOTS + 5];
        memset(links, 0, sizeof links);
        atomic_store(&g_fence.rewritten_early, 0);
        atomic_store(&g_fence.checked, 0);
        g_fence.pending = 0;
        REQUIRE_OK(fg_dataloader_start_epoch(dl, 0, 0, &err));
        for (int b = 0; b < FENCE_BATCHES; b++) {
            const fg_batch_view *v = NULL;
            REQUIRE_OK(fg_dataloader_next(dl, &v, &err));
            if (!v) break;
            fg_batch batch = fg_dataloader_batch(dl, v);
            fg_copy_fence *f = batch.staging;
            CHECK(f == v->fence && f->id >= 5 && f->id < 5 + FENCE_SLOTS);
            fg_copy_fence_link *l = &links[f->id];
            atomic_init(&events[b].synced, 0);
            events[b].fail = 0;
            l->be = &fake_events_backend;
            l->event = &events[b];
            pthread_mutex_lock(&g_fence.mu);
            g_fence.buffer[g_fence.pending] = v->samples;
            g_fence.event[g_fence.pending++] = &events[b];
            pthread_mutex_unlock(&g_fence.mu);
            fg_copy_fence_add(f, l);
            fg_copy_fence_add(f, l); /* a second copy out of the same slot: linked once */
            fg_dataloader_release(dl, v);
        }
        fg_dataloader_destroy(dl);
        CHECK_EQ_I64(atomic_load(&g_fence.rewritten_early), 0);
        CHECK_EQ_I64(atomic_load(&g_fence.checked), FENCE_BATCHES - FENCE_SLOTS);
        for (int i = 0; i < FENCE_SLOTS + 5; i++) /* destroy detached the last ones */
            CHECK(atomic_load(&links[i].fence) == NULL);
    }
}

/* A failed wait (the device copy failed) comes back from next(), naming the batch. */
static void test_loader_copy_fence_error(void)
{
    fg_error err = {0};
    fake_data d;
    fake_init(&d, 64);
    fg_dataloader_options o = loader_opts(&d, NULL, 8, 0, 1);
    fg_dataloader *dl = NULL;
    REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
    REQUIRE_OK(fg_dataloader_start_epoch(dl, 3, 0, &err));
    const fg_batch_view *v = NULL;
    REQUIRE_OK(fg_dataloader_next(dl, &v, &err));
    fake_event lost = {.fail = 1};
    fg_copy_fence_link link = {.be = &fake_events_backend, .event = &lost};
    fg_copy_fence_add(v->fence, &link);
    fg_dataloader_release(dl, v);
    CHECK(fg_dataloader_next(dl, &v, &err) == FG_BACKEND_ERROR);
    CHECK_HAS(err.message, "batch 1 of epoch 3: waiting for the device copy out of its "
                           "staging buffer failed: fake: device lost");
    fg_copy_fence_unlink(&link); /* its owner goes away: the fence forgets it */
    CHECK(atomic_load(&link.fence) == NULL);
    REQUIRE_OK(fg_dataloader_start_epoch(dl, 4, 0, &err));
    REQUIRE_OK(fg_dataloader_next(dl, &v, &err));
    CHECK(v != NULL);
    fg_dataloader_release(dl, v);
    fg_dataloader_destroy(dl);
}

/* read() is told the seed, the split and the epoch of every batch, with or without
 * workers (a plugin's augmentation is keyed on them). */
static void test_loader_read_args(void)
{
    for (int workers = 0; workers <= 2; workers += 2) {
        fg_error err = {0};
        fake_data d;
        fake_init(&d, 20);
        fg_dataloader_options o = loader_opts(&d, NULL, 4, workers, 2);
        o.split = FG_SPLIT_TRAIN;
        o.sampler.seed = 1234;
        d.want_seed = 1234;
        d.want_split = FG_SPLIT_TRAIN;
        d.want_epoch = 3;
        fg_dataloader *dl = NULL;
        REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
        REQUIRE_OK(fg_dataloader_start_epoch(dl, 3, 1, &err));
        const fg_batch_view *v = NULL;
        int batches = 0;
        while (fg_dataloader_next(dl, &v, &err) == FG_OK && v) {
            batches++;
            fg_dataloader_release(dl, v);
        }
        fg_dataloader_destroy(dl);
        CHECK_EQ_I64(batches, 4);
        CHECK_EQ_I64(atomic_load(&d.args_seen), 4);
        CHECK_EQ_I64(atomic_load(&d.reads), 4);
    }
}

/* ---- [data] val_split ------------------------------------------------------------------ */

static void test_val_split_parse(void)
{
    fg_error err = {0};
    fg_val_split_spec v;
    REQUIRE_OK(fg_val_split_parse("0.1", "a.ini:7", &v, &err));
    CHECK(v.is_fraction && v.fraction == 0.1 && fg_val_split_enabled(&v));
    REQUIRE_OK(fg_val_split_parse("5000", "a.ini:7", &v, &err));
    CHECK(!v.is_fraction && v.count == 5000 && fg_val_split_enabled(&v));
    REQUIRE_OK(fg_val_split_parse("0", "a.ini:7", &v, &err));
    CHECK(!fg_val_split_enabled(&v));
    REQUIRE_OK(fg_val_split_parse("0.0", "a.ini:7", &v, &err));
    CHECK(!fg_val_split_enabled(&v));
    const char *bad[] = {"1.5", "1.0", "-3", "ten", "0.1x", "", "-0.2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(fg_val_split_parse(bad[i], "a.ini:7", &v, &err) == FG_INVALID_ARGUMENT, "%s", bad[i]);
        CHECK_HAS(err.message, "a.ini:7: [data] val_split = ");
    }
    int64_t n = 0;
    REQUIRE_OK(fg_val_split_parse("0.1", "a.ini:7", &v, &err));
    REQUIRE_OK(fg_val_split_size(&v, 60000, "a.ini:7", &n, &err));
    CHECK_EQ_I64(n, 6000);
    REQUIRE_OK(fg_val_split_size(&v, 5, "a.ini:7", &n, &err)); /* a fraction keeps >= 1 */
    CHECK_EQ_I64(n, 1);
    REQUIRE_OK(fg_val_split_parse("100", "a.ini:7", &v, &err));
    CHECK(fg_val_split_size(&v, 100, "a.ini:7", &n, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "a.ini:7: [data] val_split holds out 100 of the train split's 100");
}

/* Disjoint, a partition of [0, n), ascending, a function of (seed, n) alone. */
static void test_val_split_draw(void)
{
    fg_error err = {0};
    enum { N = 1000, V = 137 };
    int64_t *train = NULL, *val = NULL, *train2 = NULL, *val2 = NULL, *val3 = NULL, *t3 = NULL;
    REQUIRE_OK(fg_val_split_draw(N, V, 42, &train, &val, &err));
    int seen[N] = {0};
    for (int i = 0; i < V; i++) {
        seen[val[i]] += 1;
        if (i > 0) CHECK(val[i] > val[i - 1]);
    }
    for (int i = 0; i < N - V; i++) {
        seen[train[i]] += 2;
        if (i > 0) CHECK(train[i] > train[i - 1]);
    }
    int in_val = 0;
    for (int i = 0; i < N; i++) {
        CHECK(seen[i] == 1 || seen[i] == 2, "sample %d seen %d", i, seen[i]);
        in_val += seen[i] == 1;
    }
    CHECK_EQ_I64(in_val, V);
    /* Drawn at random, not a tail: some held-out sample lies in each half. */
    CHECK(val[0] < N / 2 && val[V - 1] >= N / 2);
    REQUIRE_OK(fg_val_split_draw(N, V, 42, &train2, &val2, &err));
    CHECK(memcmp(val, val2, V * sizeof *val) == 0 && memcmp(train, train2, (N - V) * sizeof *train) == 0);
    REQUIRE_OK(fg_val_split_draw(N, V, 43, &t3, &val3, &err));
    CHECK(memcmp(val, val3, V * sizeof *val) != 0, "another seed holds other samples out");
    free(train), free(val), free(train2), free(val2), free(t3), free(val3);
    CHECK(fg_val_split_draw(10, 10, 1, &train, &val, &err) == FG_INVALID_ARGUMENT);
    CHECK(train == NULL && val == NULL);
}

/* A loader over a subset reads only its indices, bitwise the same for 0 and 2 workers. */
static void test_loader_subset(void)
{
    int64_t subset[] = {3, 5, 8, 13, 21, 34, 55};
    float got[2][7 * FAKE_ELEMS];
    for (int pass = 0; pass < 2; pass++) {
        fg_error err = {0};
        fake_data d;
        fake_init(&d, 60);
        fg_dataloader_options o = loader_opts(&d, NULL, 3, pass * 2, 2);
        o.info.length = 7;
        o.subset = subset;
        o.split = FG_SPLIT_VAL;
        fg_dataloader *dl = NULL;
        REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
        REQUIRE_OK(fg_dataloader_start_epoch(dl, 2, 0, &err));
        const fg_batch_view *v = NULL;
        int n = 0, hit[7] = {0};
        while (fg_dataloader_next(dl, &v, &err) == FG_OK && v) {
            for (int k = 0; k < v->count; k++) {
                int64_t idx = v->labels[k]; /* label = index % 10; recover from the sample */
                int64_t sample = (int64_t)(v->samples[k * FAKE_ELEMS] / 0.125f) / FAKE_ELEMS;
                CHECK_EQ_I64(idx, sample % 10);
                int found = 0;
                for (int j = 0; j < 7; j++)
                    if (subset[j] == sample) found = 1, hit[j]++;
                CHECK(found, "sample %lld is outside the subset", (long long)sample);
                memcpy(&got[pass][n * FAKE_ELEMS], &v->samples[k * FAKE_ELEMS], sizeof(float) * FAKE_ELEMS);
                n++;
            }
            fg_dataloader_release(dl, v);
        }
        fg_dataloader_destroy(dl);
        CHECK_EQ_I64(n, 7);
        for (int j = 0; j < 7; j++) CHECK_EQ_I64(hit[j], 1);
    }
    CHECK(memcmp(got[0], got[1], sizeof got[0]) == 0);
}

/* carve: a second handle on the train split; a failing open leaves nothing behind. */
typedef struct carve_fake {
    int opens, closes, fail;
    int64_t length;
    int last_split;
} carve_fake;

static fg_status carve_open(void *state, int split, void **dataset, fg_dataset_info *info,
                            fg_error *err)
{
    carve_fake *f = state;
    f->last_split = split;
    if (f->fail) return fg_error_set(err, FG_INVALID_ARGUMENT, "train.csv: line 9: bad");
    f->opens++;
    *dataset = f;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->length = f->length;
    info->rank = 1;
    info->shape[0] = 4;
    return FG_OK;
}

static void carve_close(void *state, void *dataset)
{
    (void)dataset;
    ((carve_fake *)state)->closes++;
}

static void test_val_split_carve(void)
{
    fg_error err = {0};
    fg_data_vtable vt = {sizeof vt, carve_open, carve_close, fake_read};
    carve_fake f = {0, 0, 0, 200, 0};
    fg_val_split_spec spec;
    REQUIRE_OK(fg_val_split_parse("0.25", "x.ini:3", &spec, &err));
    fg_dataset_info train = {.struct_size = sizeof train, .length = 200}, val;
    int64_t *ti = NULL, *vi = NULL;
    void *vds = NULL;
    REQUIRE_OK(fg_val_split_carve(&vt, &f, &spec, "x.ini:3", 9, &train, &ti, &vds, &val, &vi, &err));
    CHECK_EQ_I64(f.last_split, FG_SPLIT_TRAIN);
    CHECK_EQ_I64(val.length, 50);
    CHECK_EQ_I64(train.length, 150);
    CHECK_EQ_I64(val.shape[0], 4);
    CHECK(vds == &f && ti && vi);
    free(ti), free(vi);
    f.fail = 1;
    train.length = 200;
    CHECK(fg_val_split_carve(&vt, &f, &spec, "x.ini:3", 9, &train, &ti, &vds, &val, &vi, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "train.csv: line 9: bad");
    CHECK(ti == NULL && vi == NULL && vds == NULL && train.length == 200);
    f.fail = 0;
    f.length = 4; /* 0.25 of 4 = 1 left out, fine; a count of 4 is not */
    REQUIRE_OK(fg_val_split_parse("4", "x.ini:3", &spec, &err));
    train.length = 4;
    CHECK(fg_val_split_carve(&vt, &f, &spec, "x.ini:3", 9, &train, &ti, &vds, &val, &vi, &err) == FG_INVALID_ARGUMENT);
    CHECK_HAS(err.message, "none would be left to train on");
    CHECK_EQ_I64(f.opens, 1);
    CHECK_EQ_I64(f.closes, 0);
}

/* ---- driver -------------------------------------------------------------------------- */

/* [model] ignore_index: its label becomes FG_IGNORED_LABEL in every batch, whatever the
 * workers; another negative label fails the batch naming its sample. */
static void test_loader_ignore_labels(void)
{
    static const int workers[] = {0, 2};
    fg_error err = {0};
    for (size_t w = 0; w < 2; w++) {
        fake_data d;
        fake_init(&d, 40);
        fg_dataloader *dl = NULL;
        fg_dataloader_options o = loader_opts(&d, NULL, 4, workers[w], 2);
        o.ignore_labels = 1;
        o.ignore_label = 5;
        REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
        REQUIRE_OK(fg_dataloader_start_epoch(dl, 0, 0, &err));
        int bad = 0, ignored = 0;
        const fg_batch_view *v = NULL;
        for (int64_t b = 0; b < 10; b++) {
            REQUIRE_OK(fg_dataloader_next(dl, &v, &err));
            for (int k = 0; k < v->count; k++) {
                int64_t i = (int64_t)(v->samples[k * FAKE_ELEMS] / fake_value(1, 0));
                int32_t want = i % 10 == 5 ? FG_IGNORED_LABEL : (int32_t)(i % 10);
                bad += v->labels[k] != want;
                ignored += v->labels[k] == FG_IGNORED_LABEL;
            }
            fg_dataloader_release(dl, v);
        }
        CHECK_EQ_I64(bad, 0);
        CHECK_EQ_I64(ignored, 4);
        fg_dataloader_destroy(dl);

        d.label_shift = 1; /* sample 0 (in batch 0 unshuffled) has label -1, not 5 */
        o.ignore_labels = 0;
        o.sampler.shuffle = 0;
        REQUIRE_OK(fg_dataloader_create(&o, &dl, &err));
        REQUIRE_OK(fg_dataloader_start_epoch(dl, 0, 0, &err));
        memset(&err, 0, sizeof err);
        CHECK(fg_dataloader_next(dl, &v, &err) == FG_INVALID_ARGUMENT);
        CHECK_HAS(err.message, "reading batch 0 of epoch 0");
        CHECK_HAS(err.message, "sample 0 has label -1 (position 0); a negative label is an "
                               "error unless [model] ignore_index names it");
        fg_dataloader_destroy(dl);
    }
}


/* ---- batch copier: copy, or hand over on a host_synchronous backend ------------------- */

static fg_status host_alloc_fn(void *state, int device, size_t bytes, void **ptr, fg_error *err)
{
    (void)state;
    (void)device;
    *ptr = malloc(bytes);
    return *ptr ? FG_OK : fg_error_set(err, FG_OUT_OF_MEMORY, "fake: out of memory");
}

static void host_free_fn(void *state, int device, void *ptr)
{
    (void)state;
    (void)device;
    free(ptr);
}

static fg_status host_copy_fn(void *state, void *queue, void *dst, int dst_device,
                              const void *src, int src_device, size_t bytes, fg_error *err)
{
    (void)state, (void)queue, (void)dst_device, (void)src_device, (void)err;
    memcpy(dst, src, bytes);
    return FG_OK;
}

static int host_sync_yes(void *state, int device)
{
    (void)state;
    return device == 0;
}

/* With host_synchronous the copier hands the staging pointers over and holds no device
 * buffers; without it (or where it says 0) the batch is copied into a buffer of its own. */
static void test_batch_copier_direct(void)
{
    fg_backend_vtable be = {.struct_size = sizeof be, .alloc = host_alloc_fn,
                            .free = host_free_fn, .copy = host_copy_fn};
    float samples[4 * 3];
    int32_t labels[4] = {3, 1, 0, 2};
    for (int i = 0; i < 12; i++) samples[i] = (float)i * 0.5f;
    fg_batch b = {.struct_size = sizeof b, .samples = samples, .labels = labels, .count = 4,
                  .sample_elems = 3};
    for (int direct = 0; direct < 2; direct++) {
        be.host_synchronous = direct ? host_sync_yes : NULL;
        fg_batch_copier_options o = {&be, NULL, 0, NULL, 0, 1, 4 * 3 * sizeof(float),
                                     4 * sizeof(int32_t)};
        fg_batch_copier *c = NULL;
        fg_error err = {FG_OK, ""};
        REQUIRE_OK(fg_batch_copier_create(&o, &c, &err));
        float *x = NULL;
        int32_t *y = NULL;
        REQUIRE_OK(fg_batch_copier_upload(c, 0, &b, &x, &y, &err));
        CHECK(direct ? x == samples && y == labels : x != samples && y != labels);
        CHECK(x && memcmp(x, samples, sizeof samples) == 0);
        CHECK(y && memcmp(y, labels, sizeof labels) == 0);
        CHECK_EQ((int64_t)fg_batch_copier_device_bytes(c),
                 direct ? 0 : (int64_t)(sizeof samples + sizeof labels));
        CHECK_EQ(fg_batch_copier_done(c, 0, &err), FG_OK);
        /* a batch larger than the copier was made for is refused either way */
        fg_batch big = b;
        big.count = 5;
        CHECK_EQ(fg_batch_copier_upload(c, 0, &big, &x, &y, &err), FG_INTERNAL);
        CHECK_HAS(err.message, "does not fit");
        fg_batch_copier_destroy(c);
    }
}

/* ABI 1.4's typed batch: the accessors read the typed fields, or an older struct's samples
 * (f32) and labels (i32); fg_batch_slice moves every pointer by whole samples, each by its
 * own element size. */
static void test_batch_typed(void)
{
    int32_t tokens[4 * 3], targets[4 * 3];
    float values[4 * 2], regress[4];
    for (int i = 0; i < 12; i++) {
        tokens[i] = i;
        targets[i] = 100 + i;
    }
    for (int i = 0; i < 8; i++) values[i] = 0.5f * (float)i;
    for (int i = 0; i < 4; i++) regress[i] = -1.0f - (float)i;
    fg_batch b = {.struct_size = sizeof b, .samples = (const float *)(const void *)tokens,
                  .labels = targets, .count = 4, .sample_elems = 3, .label_elems = 3,
                  .inputs = tokens, .inputs_dtype = FG_I32, .targets = targets,
                  .targets_dtype = FG_I32};
    CHECK(fg_batch_inputs(&b) == (const void *)tokens && fg_batch_inputs_dtype(&b) == FG_I32);
    CHECK(fg_batch_targets(&b) == (const void *)targets && fg_batch_targets_dtype(&b) == FG_I32);
    fg_batch s = fg_batch_slice(&b, 1, 2);
    CHECK_EQ(s.count, 2);
    CHECK_EQ(((const int32_t *)fg_batch_inputs(&s))[0], 3);
    CHECK_EQ(((const int32_t *)fg_batch_targets(&s))[5], 108);
    CHECK(s.samples == (const float *)(const void *)(tokens + 3) && s.labels == targets + 3);
    /* f32 values with one f32 regression target each */
    fg_batch r = {.struct_size = sizeof r, .samples = values, .labels = (const int32_t *)(const void *)regress,
                  .count = 4, .sample_elems = 2, .label_elems = 1, .inputs = values,
                  .inputs_dtype = FG_F32, .targets = regress, .targets_dtype = FG_F32};
    fg_batch rs = fg_batch_slice(&r, 2, 2);
    CHECK(((const float *)fg_batch_inputs(&rs))[0] == 2.0f);
    CHECK(((const float *)fg_batch_targets(&rs))[1] == -4.0f);
    /* a struct of ABI 1.3 ends before the typed fields: samples and labels, f32 and i32 */
    fg_batch old = b;
    old.struct_size = (uint32_t)offsetof(fg_batch, inputs);
    CHECK(fg_batch_inputs(&old) == (const void *)b.samples && fg_batch_inputs_dtype(&old) == FG_F32);
    CHECK(fg_batch_targets(&old) == (const void *)b.labels && fg_batch_targets_dtype(&old) == FG_I32);
    fg_batch os = fg_batch_slice(&old, 2, 1);
    CHECK(os.samples == b.samples + 6 && os.labels == targets + 6 && os.count == 1);
}

static const struct {
    const char *name;
    void (*fn)(void);
} tests[] = {
    {"sampler_permutation", test_sampler_permutation},
    {"sampler_determinism", test_sampler_determinism},
    {"sampler_identity", test_sampler_identity},
    {"sampler_drop_last", test_sampler_drop_last},
    {"sampler_distributed_train", test_sampler_distributed_train},
    {"sampler_distributed_eval", test_sampler_distributed_eval},
    {"sampler_options", test_sampler_options},
    {"sampler_groups", test_sampler_groups},
    {"loader_same_batches", test_loader_same_batches},
    {"loader_resume", test_loader_resume},
    {"loader_abandon_epoch", test_loader_abandon_epoch},
    {"loader_read_error", test_loader_read_error},
    {"loader_destroy_midway", test_loader_destroy_midway},
    {"loader_held_limit", test_loader_held_limit},
    {"loader_options", test_loader_options},
    {"loader_shapes", test_loader_shapes},
    {"loader_copy_fence", test_loader_copy_fence},
    {"loader_copy_fence_error", test_loader_copy_fence_error},
    {"loader_read_args", test_loader_read_args},
    {"val_split_parse", test_val_split_parse},
    {"val_split_draw", test_val_split_draw},
    {"val_split_carve", test_val_split_carve},
    {"loader_subset", test_loader_subset},
    {"loader_ignore_labels", test_loader_ignore_labels},
    {"batch_copier_direct", test_batch_copier_direct},
    {"batch_typed", test_batch_typed},
};

int main(int argc, char **argv)
{
    int ran = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && strcmp(argv[1], "all") != 0 && strcmp(argv[1], tests[i].name) != 0)
            continue;
        tests[i].fn();
        ran++;
    }
    if (ran == 0) {
        fprintf(stderr, "no test named '%s'\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    return fg_test_report(argc > 1 ? argv[1] : "all");
}
