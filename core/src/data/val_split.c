/* [data] val_split: held-out validation samples. See val_split.h. */
#include "val_split.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

/* Keys the held-out permutation apart from every epoch's shuffle under the same seed. */
#define FG_VAL_SPLIT_STREAM 0x76616C5F73706C69ull /* "val_spli" */

fg_status fg_val_split_parse(const char *text, const char *origin, fg_val_split_spec *out,
                             fg_error *err)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return FG_OK;
    const char *where = origin ? origin : "[data] val_split";
    char *end = NULL;
    errno = 0;
    if (strpbrk(text, ".eE")) {
        double f = strtod(text, &end);
        if (errno || end == text || *end != '\0' || !(f >= 0.0 && f < 1.0))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: [data] val_split = %s: a fraction must be in [0, 1) "
                                "(0.1 holds out a tenth of the train samples) or a count "
                                "(5000)", where, text);
        out->is_fraction = f > 0.0;
        out->fraction = f;
        return FG_OK;
    }
    long long n = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0' || n < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [data] val_split = %s is neither a fraction in [0, 1) nor a "
                            "count of samples >= 0", where, text);
    out->count = n;
    return FG_OK;
}

int fg_val_split_enabled(const fg_val_split_spec *spec)
{
    return spec->is_fraction || spec->count > 0;
}

fg_status fg_val_split_size(const fg_val_split_spec *spec, int64_t length, const char *origin,
                            int64_t *val_count, fg_error *err)
{
    const char *where = origin ? origin : "[data] val_split";
    int64_t n = spec->is_fraction ? (int64_t)floor(spec->fraction * (double)length)
                                  : spec->count;
    if (spec->is_fraction && n < 1)
        n = 1;
    if (n >= length)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [data] val_split holds out %" PRId64 " of the train split's %"
                            PRId64 " samples: none would be left to train on",
                            where, n, length);
    *val_count = n;
    return FG_OK;
}

fg_status fg_val_split_draw(int64_t length, int64_t val_count, uint64_t seed, int64_t **train,
                            int64_t **val, fg_error *err)
{
    *train = *val = NULL;
    size_t n = (size_t)length;
    int64_t *perm = NULL, *t = NULL, *v = NULL;
    unsigned char *held = NULL;
    if (length < 2 || val_count < 1 || val_count >= length ||
        (uint64_t)length > SIZE_MAX / sizeof(int64_t))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "val_split: cannot hold %" PRId64 " of %" PRId64 " samples out",
                            val_count, length);
    perm = malloc(n * sizeof *perm);
    held = calloc(n, 1);
    t = malloc((n - (size_t)val_count) * sizeof *t);
    v = malloc((size_t)val_count * sizeof *v);
    if (!perm || !held || !t || !v) {
        free(perm), free(held), free(t), free(v);
        return fg_error_set(err, FG_OUT_OF_MEMORY,
                            "val_split: out of memory for %" PRId64 " indices", length);
    }
    fg_sampler_permutation(seed ^ FG_VAL_SPLIT_STREAM, 0, perm, length);
    for (int64_t i = 0; i < val_count; i++)
        held[perm[i]] = 1;
    size_t nt = 0, nv = 0;
    for (size_t i = 0; i < n; i++) {
        if (held[i])
            v[nv++] = (int64_t)i;
        else
            t[nt++] = (int64_t)i;
    }
    free(perm);
    free(held);
    *train = t;
    *val = v;
    return FG_OK;
}

fg_status fg_val_split_carve(const fg_data_vtable *dv, void *data_state,
                             const fg_val_split_spec *spec, const char *origin, uint64_t seed,
                             fg_dataset_info *train_info, int64_t **train_idx, void **val_ds,
                             fg_dataset_info *val_info, int64_t **val_idx, fg_error *err)
{
    *train_idx = *val_idx = NULL;
    *val_ds = NULL;
    int64_t val_count = 0;
    fg_status st = fg_val_split_size(spec, train_info->length, origin, &val_count, err);
    if (st != FG_OK)
        return st;
    fg_dataset_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    fg_error e = {FG_OK, ""};
    void *ds = NULL;
    /* A handle of its own: the val loader never shares the train loader's dataset. */
    st = dv->open(data_state, FG_SPLIT_TRAIN, &ds, &info, &e);
    if (st != FG_OK)
        return fg_error_set(err, st, "[data] val_split: opening the train split again for the "
                            "held-out samples: %s", e.message);
    if (info.length != train_info->length) {
        if (dv->close)
            dv->close(data_state, ds);
        return fg_error_set(err, FG_INTERNAL, "[data] val_split: the train split opened with %"
                            PRId64 " samples, then %" PRId64, train_info->length, info.length);
    }
    st = fg_val_split_draw(info.length, val_count, seed, train_idx, val_idx, err);
    if (st != FG_OK) {
        if (dv->close)
            dv->close(data_state, ds);
        return st;
    }
    info.length = val_count;
    *val_info = info;
    train_info->length -= val_count;
    *val_ds = ds;
    return FG_OK;
}
