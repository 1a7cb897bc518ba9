/* fulgur-data-text.so: byte-level language-model data from UTF-8 text files (vocab 256,
 * no tokenizer). Train and validation come from one corpus split by fraction at a fixed
 * seed (text_corpus.c); test, when set, from its own files. A sample is a window of
 * context + 1 bytes: the first context as input, the next byte at every position as label. */
#include <stdlib.h>
#include <string.h>

#include "data_plugin.h"
#include "plugin_options.h"
#include "text_corpus.h"
#include "token_windows.h"
#include "plugin_created.h"

#define NO_RANGE .min = 1, .max = 0

static const fg_option text_options[] = {
    {.key = "dir", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "folder that relative file names are resolved against"},
    {.key = "files", .type = FG_OPT_LIST, .default_value = FG_OPT_REQUIRED, NO_RANGE,
     .help = "UTF-8 text files, concatenated in order: the train and val splits"},
    {.key = "test_files", .type = FG_OPT_LIST, .default_value = "", NO_RANGE,
     .help = "text files of the test split; empty: no test split"},
    {.key = "context", .type = FG_OPT_INT, .default_value = "64", .min = 1, .max = 1 << 20,
     .help = "tokens (bytes) per sample; a window holds context + 1"},
    {.key = "val_fraction", .type = FG_OPT_FLOAT, .default_value = "0.1", .min = 0,
     .max = 0.5,
     .help = "share of the corpus, in 4096-byte chunks chosen by split_seed, kept for "
             "validation"},
    {.key = "split_seed", .type = FG_OPT_INT, .default_value = "1337", .min = 0,
     .max = INT64_MAX, .help = "seed of the train/val chunk choice (not trainer.seed: the "
                               "split stays when the run's seed changes)"},
    {.key = "train_windows", .type = FG_OPT_INT, .default_value = "0", .min = 0,
     .max = INT64_MAX,
     .help = "samples per training epoch, at seeded random offsets; 0: train bytes / context"},
    {.key = "val_windows", .type = FG_OPT_INT, .default_value = "0", .min = 0,
     .max = INT64_MAX,
     .help = "val and test samples, evenly spread; 0: bytes / context of the split"},
};

typedef struct text_state {
    text_bytes split[FG_SPLIT_TEST + 1]; /* by fg_split; PREDICT reads TEST */
    fg_token_window_options win;
} text_state;

static void text_deinit(void *state)
{
    text_state *s = state;
    if (!s)
        return;
    for (int i = 0; i <= FG_SPLIT_TEST; i++)
        text_bytes_free(&s->split[i]);
    free(s);
}

/* A configured split must hold at least one window. */
static fg_status check_long_enough(const text_state *s, int split, int configured,
                                   fg_error *err)
{
    if (!configured || s->split[split].count >= (int64_t)s->win.context + 1)
        return FG_OK;
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "text: the %s split holds %lld bytes, fewer than one window of context "
                        "+ 1 = %d%s", fg_plugin_split_name(split),
                        (long long)s->split[split].count, s->win.context + 1,
                        split == FG_SPLIT_TEST ? " (option test_files)"
                                               : ": lower context, or change val_fraction "
                                                 "(the split is in 4096-byte chunks)");
}

static fg_status read_corpus(const fg_host *host, text_state *s, fg_error *err)
{
    text_split_spec spec = {0};
    const char *test_files = NULL;
    int64_t seed = 0;
    fg_status st = fg_plugin_get_string(host, "text", "dir", &spec.dir, err);
    if (st == FG_OK)
        st = fg_plugin_get_string(host, "text", "files", &spec.files, err);
    if (st == FG_OK)
        st = fg_plugin_get_string(host, "text", "test_files", &test_files, err);
    if (st == FG_OK)
        st = fg_plugin_get_float(host, "text", "val_fraction", &spec.val_fraction, err);
    if (st == FG_OK)
        st = fg_plugin_get_int(host, "text", "split_seed", &seed, err);
    if (st == FG_OK && !(spec.val_fraction >= 0 && spec.val_fraction <= 0.5))
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "text: option val_fraction = %g is outside "
                          "[0, 0.5]", spec.val_fraction);
    spec.split_seed = (uint64_t)seed;
    if (st == FG_OK)
        st = text_corpus_split(&spec, &s->split[FG_SPLIT_TRAIN], &s->split[FG_SPLIT_VAL], err);
    if (st == FG_OK && test_files[0])
        st = text_corpus_read(spec.dir, test_files, &s->split[FG_SPLIT_TEST], err);
    if (st == FG_OK)
        st = check_long_enough(s, FG_SPLIT_TRAIN, 1, err);
    if (st == FG_OK)
        st = check_long_enough(s, FG_SPLIT_VAL, spec.val_fraction > 0, err);
    if (st == FG_OK)
        st = check_long_enough(s, FG_SPLIT_TEST, test_files[0] != '\0', err);
    return st;
}

static fg_status text_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    text_state *s = calloc(1, sizeof *s);
    if (!s)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "text: out of memory");
    fg_status st = fg_token_window_options_read(host, "text", &s->win, err);
    if (st == FG_OK)
        st = read_corpus(host, s, err);
    return FG_PLUGIN_CREATED(st, s, state, text_deinit);
}

static fg_status text_open(void *state, int split, void **dataset, fg_dataset_info *info,
                           fg_error *err)
{
    text_state *s = state;
    *dataset = NULL;
    if (!fg_plugin_split_name(split))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "text: unknown split %d", split);
    const text_bytes *b = &s->split[split == FG_SPLIT_PREDICT ? FG_SPLIT_TEST : split];
    if (b->count == 0)
        return fg_error_set(err, FG_NOT_FOUND, "text: the %s split is not configured (%s)",
                            fg_plugin_split_name(split),
                            split == FG_SPLIT_VAL ? "val_fraction = 0" : "test_files is empty");
    fg_token_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "text: out of memory");
    ds->split = fg_plugin_split_name(split);
    ds->span = (fg_token_span){.tokens = b->bytes, .elem_bytes = 1, .count = b->count};
    ds->context = s->win.context;
    ds->vocab = 256;
    ds->windows = fg_token_window_count(&s->win, split == FG_SPLIT_TRAIN, b->count);
    ds->random = split == FG_SPLIT_TRAIN;
    if (info)
        fg_token_dataset_info(ds, info);
    *dataset = ds;
    return FG_OK;
}

static void text_close(void *state, void *dataset)
{
    free(dataset);
}

static fg_status text_read(void *state, void *dataset, const fg_data_read_args *args,
                           const int64_t *indices, int count, void *samples, void *labels,
                           fg_error *err)
{
    return fg_token_dataset_read("text", dataset, args, indices, count, samples, labels, err);
}

FG_PLUGIN_DEFINE_VTABLE(fg_data_vtable, FG_KIND_DATA, 0, "text", "1.0.0",
                        "byte-level language-model windows of UTF-8 text files (vocab 256), "
                        "train/val split by fraction at a fixed seed",
                        FG_PLUGIN_OPTIONS(text_options), text_init, text_deinit,
                        .open = text_open, .close = text_close, .read = text_read);
