/* The ranks' fingerprint and the search for the first difference (rank_agreement.h). */
#include "rank_agreement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "config.h"
#include "core_util.h"
#include "grow_array.h"
#include "fulgur/comm.h"
#include "runtime.h"

#define ITEM_NAME 120 /* int32 slots of a name on the wire (one byte each) */

typedef struct agree_item {
    char name[ITEM_NAME];
    uint64_t hash;
} agree_item;

typedef struct agree_list {
    agree_item *items;
    size_t count, cap;
} agree_list;

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static int add(agree_list *l, const char *name, const void *value, size_t n)
{
    if (fg_plugin_grow_array(&l->items, &l->cap, l->count + 1, 64, sizeof *l->items) != 0)
        return -1;
    agree_item *it = &l->items[l->count++];
    snprintf(it->name, sizeof it->name, "%s", name);
    it->hash = fnv1a(0xcbf29ce484222325ull, value, n);
    return 0;
}

/* Keys that may differ between ranks: where each finds its plugins and the checkpoint's
 * path (its contents are compared). */
static int per_rank(const char *section, const char *key)
{
    return (strcmp(section, "trainer") == 0 && strcmp(key, "ckpt_path") == 0) ||
           strcmp(section, "plugins") == 0;
}

static int add_config(agree_list *l, const fg_config *cfg)
{
    char name[ITEM_NAME];
    for (size_t s = 0; s < fg_config_section_count(cfg); s++) {
        const char *section = fg_config_section_name(cfg, s);
        for (size_t k = 0; k < fg_config_entry_count(cfg, section); k++) {
            const char *key = fg_config_entry_key(cfg, section, k);
            if (per_rank(section, key))
                continue;
            const char *v = fg_config_get(cfg, section, key);
            snprintf(name, sizeof name, "[%s] %s", section, key);
            if (add(l, name, v ? v : "", v ? strlen(v) : 0) != 0)
                return -1;
        }
    }
    return 0;
}

static int add_layout(agree_list *l, const fg_model *m)
{
    char name[ITEM_NAME];
    for (size_t i = 0; i < fg_model_tensor_count(m); i++) {
        const fg_tensor_info *t = fg_model_tensor(m, i);
        int64_t shape[6] = {t->rank, t->shape[0], t->shape[1], t->shape[2], t->shape[3],
                            (int64_t)t->offset};
        snprintf(name, sizeof name, "tensor %s", t->name);
        if (add(l, name, shape, sizeof shape) != 0)
            return -1;
    }
    return 0;
}

/* A hash of up to four samples (first, last and two between) with their labels, read
 * unaugmented: ranks whose files differ under equal keys (the same path on different nodes,
 * a fixed number of windows over different corpora) disagree here. A split that cannot be
 * read hashes as such; the loader names the failure later. */
static int add_samples(agree_list *l, const fg_rank_agreement *a, const char *name,
                       const fg_data_split *s)
{
    const fg_data_vtable *vt = a->data;
    if (!s->dataset || s->info.length < 1 || !vt || !vt->read)
        return 0;
    size_t elems = 1;
    for (int d = 0; d < s->info.rank && d < FG_MAX_DIMS; d++)
        elems *= (size_t)s->info.shape[d];
    size_t sample = elems * fg_dtype_size((fg_dtype)s->info.sample_dtype);
    size_t labels = (size_t)s->info.label_elems * fg_dtype_size((fg_dtype)s->info.label_dtype);
    int64_t n = s->info.length, at[4] = {0, n / 3, 2 * n / 3, n - 1};
    int count = n < 4 ? (int)n : 4;
    if (n < 4)
        for (int i = 0; i < count; i++)
            at[i] = i;
    unsigned char *buf = malloc((size_t)count * (sample + labels) + 1);
    if (!buf)
        return -1;
    fg_data_read_args args = {sizeof args, FG_SPLIT_TEST, 0, 0}; /* never augmented */
    fg_error e = {0};
    fg_status st = vt->read(a->data_state, s->dataset, &args, at, count, buf,
                            labels ? buf + (size_t)count * sample : NULL, &e);
    int rc = st == FG_OK ? add(l, name, buf, (size_t)count * (sample + labels))
                         : add(l, name, "(unreadable)", 12);
    free(buf);
    return rc;
}

static int add_data(agree_list *l, const fg_rank_agreement *a)
{
    const struct {
        const char *name;
        const fg_data_split *s;
    } splits[] = {{"data: the train split's size", a->train},
                  {"data: the val split's size", a->val},
                  {"data: the test split's size", a->test}};
    for (size_t i = 0; i < sizeof splits / sizeof *splits; i++) {
        int64_t n = splits[i].s->dataset ? splits[i].s->info.length : -1;
        if (add(l, splits[i].name, &n, sizeof n) != 0)
            return -1;
    }
    return add_samples(l, a, "data: the train split's samples", a->train);
}

/* The checkpoint being resumed: its metadata (step, epoch, format, ...) and tensor names. */
static int add_checkpoint(agree_list *l, struct fg_ckpt *c)
{
    char name[ITEM_NAME];
    const char *none = "(no checkpoint)";
    if (!c)
        return add(l, "checkpoint: the one resumed", none, strlen(none));
    for (size_t i = 0; i < fg_ckpt_meta_count(c); i++) {
        const char *key = fg_ckpt_meta_key(c, i), *v = fg_ckpt_meta(c, key);
        snprintf(name, sizeof name, "checkpoint: metadata %s", key);
        if (add(l, name, v ? v : "", v ? strlen(v) : 0) != 0)
            return -1;
    }
    size_t n = fg_ckpt_tensor_count(c);
    return add(l, "checkpoint: its number of tensors", &n, sizeof n);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const agree_item *)a)->name, ((const agree_item *)b)->name);
}

static uint64_t fingerprint(const agree_list *l)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < l->count; i++) {
        h = fnv1a(h, l->items[i].name, strlen(l->items[i].name) + 1);
        h = fnv1a(h, &l->items[i].hash, sizeof l->items[i].hash);
    }
    return h;
}

/* The hash as four 16-bit chunks, and their negations: a max all-reduce gives each chunk's
 * maximum and minus its minimum; every rank agrees when they coincide. */
static void chunks(uint64_t h, int32_t out[8])
{
    for (int i = 0; i < 4; i++) {
        out[i] = (int32_t)((h >> (16 * i)) & 0xffff);
        out[4 + i] = -out[i];
    }
}

typedef struct comm_ref {
    const fg_comm_vtable *vt;
    void *state;
} comm_ref;

static fg_status wire(comm_ref *c, fg_status st, const char *what, const fg_error *e,
                      fg_error *err)
{
    return st == FG_OK ? FG_OK
                       : fg_error_set(err, st, "rank agreement: %s: %s", what, e->message);
}

/* Rank 0's items on the wire: per item ITEM_NAME name bytes and 4 hash chunks. */
enum { RECORD = ITEM_NAME + 4 };

static const agree_item *find(const agree_list *l, const char *name)
{
    agree_item key;
    memcpy(key.name, name, sizeof key.name);
    key.name[sizeof key.name - 1] = '\0';
    return bsearch(&key, l->items, l->count, sizeof key, by_name);
}

/* Index (in rank 0's order) of this rank's first differing item; n0 + 1 + i for an item i
 * of its own that rank 0 lacks; INT32_MAX when none. */
static int32_t first_difference(const agree_list *mine, const int32_t *theirs, int32_t n0)
{
    char name[ITEM_NAME];
    for (int32_t k = 0; k < n0; k++) {
        const int32_t *r = theirs + (size_t)k * RECORD;
        for (int i = 0; i < ITEM_NAME; i++)
            name[i] = (char)r[i];
        const agree_item *it = find(mine, name);
        int32_t c[8];
        if (it)
            chunks(it->hash, c);
        if (!it || memcmp(c, r + ITEM_NAME, 4 * sizeof *c) != 0)
            return k;
    }
    for (size_t i = 0; i < mine->count; i++) {
        int known = 0;
        for (int32_t k = 0; k < n0 && !known; k++) {
            const int32_t *r = theirs + (size_t)k * RECORD;
            int same = 1;
            for (int j = 0; j < ITEM_NAME && same; j++)
                same = (char)r[j] == mine->items[i].name[j];
            known = same;
        }
        if (!known)
            return n0 + 1 + (int32_t)i;
    }
    return INT32_MAX;
}

static void encode(const agree_list *l, int32_t *out)
{
    for (size_t k = 0; k < l->count; k++) {
        int32_t *r = out + k * RECORD;
        for (int i = 0; i < ITEM_NAME; i++)
            r[i] = (unsigned char)l->items[k].name[i];
        int32_t c[8];
        chunks(l->items[k].hash, c);
        memcpy(r + ITEM_NAME, c, 4 * sizeof *c);
    }
}

/* Every rank learns the lowest rank that differs and the item's name. */
static fg_status name_the_difference(comm_ref *c, const fg_rank_agreement *a, const agree_list *l,
                                     fg_error *err)
{
    fg_error e = {0};
    int32_t n0 = (int32_t)l->count;
    fg_status st = wire(c, c->vt->broadcast(c->state, NULL, &n0, 1, FG_I32, 0, &e), "broadcast",
                        &e, err);
    int32_t *theirs = st == FG_OK ? calloc((size_t)n0 * RECORD + 1, sizeof *theirs) : NULL;
    if (st == FG_OK && !theirs)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "rank agreement: out of memory");
    if (st == FG_OK && a->ranks.rank == 0)
        encode(l, theirs);
    if (st == FG_OK)
        st = wire(c, c->vt->broadcast(c->state, NULL, theirs, (size_t)n0 * RECORD, FG_I32, 0, &e),
                  "broadcast", &e, err);
    /* lowest (item, rank): a max of the negated code */
    int32_t k = st == FG_OK ? first_difference(l, theirs, n0) : INT32_MAX;
    int64_t code = k == INT32_MAX ? INT64_MIN + 1
                                  : -((int64_t)k * a->ranks.world_size + a->ranks.rank);
    if (st == FG_OK)
        st = wire(c, c->vt->all_reduce(c->state, NULL, &code, 1, FG_I64, FG_REDUCE_MAX, &e),
                  "all_reduce", &e, err);
    if (st == FG_OK && code == INT64_MIN + 1) { /* only if the hashes of equal lists differ */
        free(theirs);
        return fg_error_set(err, FG_INTERNAL, "rank agreement: the ranks' fingerprints differ "
                            "but no item does");
    }
    int32_t item = 0, rank = 0;
    if (st == FG_OK) {
        item = (int32_t)(-code / a->ranks.world_size);
        rank = (int32_t)(-code % a->ranks.world_size);
    }
    int32_t name[ITEM_NAME] = {0};
    if (st == FG_OK && item < n0)
        memcpy(name, theirs + (size_t)item * RECORD, sizeof name);
    else if (st == FG_OK && a->ranks.rank == rank)
        for (int i = 0; i < ITEM_NAME; i++)
            name[i] = (unsigned char)l->items[item - n0 - 1].name[i];
    if (st == FG_OK && item >= n0)
        st = wire(c, c->vt->broadcast(c->state, NULL, name, ITEM_NAME, FG_I32, rank, &e),
                  "broadcast", &e, err);
    free(theirs);
    if (st != FG_OK)
        return st;
    char text[ITEM_NAME + 1];
    for (int i = 0; i < ITEM_NAME; i++)
        text[i] = (char)name[i];
    text[ITEM_NAME] = '\0';
    return fg_error_set(err, FG_INVALID_ARGUMENT, "rank %d does not match rank 0: %s %s (every "
                        "rank must run the same config, model, data and checkpoint)", rank,
                        text, item < n0 ? "differs" : "is only on that rank");
}

fg_status fg_agree_across_ranks(const fg_rank_agreement *a, fg_error *err)
{
    comm_ref c = {a->ranks.world_size < 2 ? NULL : a->ranks.comm, a->ranks.comm_state};
    if (!c.vt)
        return FG_OK;
    if (!c.vt->all_reduce || !c.vt->broadcast)
        return FG_OK; /* a comm without them cannot agree: nothing to compare with */
    agree_list l = {0};
    int bad = add_config(&l, a->cfg) || add_layout(&l, a->model) || add_data(&l, a) ||
              add_checkpoint(&l, a->resumed);
    if (bad) {
        free(l.items);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "rank agreement: out of memory");
    }
    qsort(l.items, l.count, sizeof *l.items, by_name);
    int32_t sum[8];
    chunks(fingerprint(&l), sum);
    fg_error e = {0};
    fg_status st = wire(&c, c.vt->all_reduce(c.state, NULL, sum, 8, FG_I32, FG_REDUCE_MAX, &e),
                        "all_reduce", &e, err);
    int agree = 1;
    for (int i = 0; st == FG_OK && i < 4; i++)
        agree &= sum[i] == -sum[4 + i];
    if (st == FG_OK && !agree)
        st = name_the_difference(&c, a, &l, err);
    free(l.items);
    return st;
}
