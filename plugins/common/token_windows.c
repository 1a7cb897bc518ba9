/* Windows of a token array at seeded or evenly spread offsets. */
#include "token_windows.h"

#include <stdlib.h>
#include <string.h>

#include "data_plugin.h"
#include "plugin_options.h"

#define GOLDEN 0x9e3779b97f4a7c15ull

/* splitmix64's finalizer: every input bit reaches every output bit. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t fg_token_window_start(const fg_token_span *span, int32_t context, int random,
                              uint64_t seed, int64_t epoch, int64_t index, int64_t windows)
{
    uint64_t starts = (uint64_t)(span->count - context); /* valid starts: [0, starts) */
    if (random) {
        uint64_t k = mix64(seed + GOLDEN);
        k = mix64(k ^ ((uint64_t)epoch + 2 * GOLDEN));
        k = mix64(k ^ ((uint64_t)index + 3 * GOLDEN));
        return (int64_t)(k % starts);
    }
    if (windows <= 1)
        return 0;
    /* index * (starts - 1) / (windows - 1) without overflow for any realistic corpus. */
    return (int64_t)((unsigned __int128)(uint64_t)index * (starts - 1) /
                     (uint64_t)(windows - 1));
}

static int32_t token_at(const fg_token_span *span, int64_t i)
{
    if (span->elem_bytes == 1)
        return ((const uint8_t *)span->tokens)[i];
    return ((const uint16_t *)span->tokens)[i];
}

void fg_token_window_copy(const fg_token_span *span, int64_t start, int32_t context,
                          int32_t *inputs, int32_t *labels)
{
    for (int32_t t = 0; t < context; t++) {
        if (inputs)
            inputs[t] = token_at(span, start + t);
        if (labels)
            labels[t] = token_at(span, start + t + 1);
    }
}

void fg_token_dataset_info(const fg_token_dataset *ds, fg_dataset_info *info)
{
    fg_dataset_info full;
    memset(&full, 0, sizeof full);
    full.struct_size = sizeof full;
    full.length = ds->windows;
    full.rank = 1;
    full.shape[0] = ds->context;
    full.sample_dtype = FG_I32;
    full.num_classes = ds->vocab;
    full.label_dtype = FG_I32;
    full.label_elems = ds->context;
    fg_plugin_copy_dataset_info(info, &full);
}

/* Window k's tokens into the caller's rows: from memory, or fetched into `window` first. */
static fg_status copy_window(const fg_token_dataset *ds, int64_t start, void *window,
                             int32_t *inputs, int32_t *labels, fg_error *err)
{
    if (!ds->span.fetch) {
        fg_token_window_copy(&ds->span, start, ds->context, inputs, labels);
        return FG_OK;
    }
    fg_status st = ds->span.fetch(ds->span.fetch_ctx, start, (int64_t)ds->context + 1, window,
                                  err);
    if (st != FG_OK)
        return st;
    fg_token_span fetched = {window, ds->span.elem_bytes, (int64_t)ds->context + 1, NULL, NULL};
    fg_token_window_copy(&fetched, 0, ds->context, inputs, labels);
    return FG_OK;
}

fg_status fg_token_dataset_read(const char *who, const fg_token_dataset *ds,
                                const fg_data_read_args *args, const int64_t *indices,
                                int count, void *samples, void *labels, fg_error *err)
{
    fg_status st = fg_plugin_check_read(who, ds->split, ds->windows, indices, count, samples,
                                        err);
    if (st != FG_OK)
        return st;
    int random = ds->random && (!FG_HAS_FIELD(args, fg_data_read_args, split) ||
                                args->split == FG_SPLIT_TRAIN);
    uint64_t seed = FG_HAS_FIELD(args, fg_data_read_args, seed) ? args->seed : 0;
    int64_t epoch = FG_HAS_FIELD(args, fg_data_read_args, epoch) ? args->epoch : 0;
    size_t row = (size_t)ds->context;
    void *window = NULL;
    if (ds->span.fetch && !(window = malloc((row + 1) * (size_t)ds->span.elem_bytes)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", who);
    for (int k = 0; k < count && st == FG_OK; k++) {
        int64_t start = fg_token_window_start(&ds->span, ds->context, random, seed, epoch,
                                              indices[k], ds->windows);
        st = copy_window(ds, start, window, (int32_t *)samples + k * row,
                         labels ? (int32_t *)labels + k * row : NULL, err);
    }
    free(window);
    return st;
}

fg_status fg_token_window_options_read(const fg_host *host, const char *who,
                                       fg_token_window_options *o, fg_error *err)
{
    int64_t context = 0;
    fg_status st = fg_plugin_get_int(host, who, "context", &context, err);
    if (st == FG_OK)
        st = fg_plugin_get_int(host, who, "train_windows", &o->train_windows, err);
    if (st == FG_OK)
        st = fg_plugin_get_int(host, who, "val_windows", &o->val_windows, err);
    if (st == FG_OK && (context < 1 || context > (1 << 20)))
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: option context = %lld is outside "
                          "[1, 1048576]", who, (long long)context);
    if (st == FG_OK && (o->train_windows < 0 || o->val_windows < 0))
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: options train_windows and val_windows "
                          "must be >= 0", who);
    o->context = (int32_t)context;
    return st;
}

int64_t fg_token_window_count(const fg_token_window_options *o, int train, int64_t tokens)
{
    int64_t asked = train ? o->train_windows : o->val_windows;
    if (asked > 0)
        return asked;
    int64_t n = tokens / o->context;
    return n > 0 ? n : 1;
}
