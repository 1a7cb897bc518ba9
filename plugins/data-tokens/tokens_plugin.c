/* fulgur-data-tokens.so: language-model windows of pre-tokenized files (nanoGPT's raw
 * uint16, llm.c's headered uint16), a file or a glob of shards per split (tokens_shards.c),
 * each checked whole at open and read a window at a time (tokens_file.c). A sample is a
 * window of context + 1 tokens. */
#include <stdlib.h>
#include <string.h>

#include "data_path.h"
#include "data_plugin.h"
#include "plugin_options.h"
#include "token_windows.h"
#include "tokens_shards.h"
#include "plugin_created.h"

#define NO_RANGE .min = 1, .max = 0

static const fg_option tokens_options[] = {
    {.key = "dir", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "folder that relative file names are resolved against"},
    {.key = "train_file", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "training tokens (e.g. nanoGPT's train.bin, llm.c's *_train.bin), or a glob of "
             "shards read in name order as one stream (out/train_*.bin); empty: none"},
    {.key = "val_file", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "validation tokens, a file or a glob of shards; empty: no val split"},
    {.key = "test_file", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "test tokens (predict reads it too), a file or a glob of shards; empty: no "
             "test split"},
    {.key = "format", .type = FG_OPT_ENUM, .default_value = "auto", NO_RANGE,
     .choices = "auto|nanogpt|llmc",
     .help = "nanogpt: raw uint16; llmc: 256 int32 header (magic 20240520, version 1, "
             "count) then uint16; auto: llmc when the file starts with its magic"},
    {.key = "vocab_size", .type = FG_OPT_INT, .default_value = FG_OPT_REQUIRED, .min = 1,
     .max = 65536, .help = "token ids are below it (GPT-2: 50257)"},
    {.key = "context", .type = FG_OPT_INT, .default_value = "64", .min = 1, .max = 1 << 20,
     .help = "tokens per sample; a window holds context + 1"},
    {.key = "train_windows", .type = FG_OPT_INT, .default_value = "0", .min = 0,
     .max = INT64_MAX,
     .help = "samples per training epoch, at seeded random offsets; 0: tokens / context"},
    {.key = "val_windows", .type = FG_OPT_INT, .default_value = "0", .min = 0,
     .max = INT64_MAX,
     .help = "val and test samples, evenly spread; 0: tokens / context of the file"},
};

typedef struct tokens_state {
    char *files[FG_SPLIT_TEST + 1]; /* by fg_split, resolved; "" when none */
    tokens_format format;
    int32_t vocab;
    fg_token_window_options win;
} tokens_state;

typedef struct tokens_dataset {
    fg_token_dataset windows;
    tokens_shards shards;
} tokens_dataset;

static void tokens_deinit(void *state)
{
    tokens_state *s = state;
    if (!s)
        return;
    for (int i = 0; i <= FG_SPLIT_TEST; i++)
        free(s->files[i]);
    free(s);
}

static fg_status read_files(const fg_host *host, tokens_state *s, fg_error *err)
{
    static const char *const keys[] = {NULL, "train_file", "val_file", "test_file"};
    const char *dir = NULL;
    return fg_plugin_split_paths(host, "tokens", keys, s->files, &dir, err);
}

static fg_status read_format(const fg_host *host, tokens_state *s, fg_error *err)
{
    const char *format = NULL;
    int64_t vocab = 0;
    fg_status st = fg_plugin_get_string(host, "tokens", "format", &format, err);
    if (st == FG_OK)
        st = fg_plugin_get_int(host, "tokens", "vocab_size", &vocab, err);
    if (st == FG_OK)
        st = fg_token_window_options_read(host, "tokens", &s->win, err);
    if (st != FG_OK)
        return st;
    if (strcmp(format, "auto") == 0)
        s->format = TOKENS_AUTO;
    else if (strcmp(format, "nanogpt") == 0)
        s->format = TOKENS_NANOGPT;
    else if (strcmp(format, "llmc") == 0)
        s->format = TOKENS_LLMC;
    else
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: option format = \"%s\": auto, "
                            "nanogpt or llmc", format);
    if (vocab < 1 || vocab > 65536)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: option vocab_size = %lld is "
                            "outside [1, 65536]", (long long)vocab);
    s->vocab = (int32_t)vocab;
    return FG_OK;
}

static fg_status tokens_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    tokens_state *s = calloc(1, sizeof *s);
    if (!s)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokens: out of memory");
    fg_status st = read_files(host, s, err);
    if (st == FG_OK)
        st = read_format(host, s, err);
    return FG_PLUGIN_CREATED(st, s, state, tokens_deinit);
}

static void tokens_close(void *state, void *dataset)
{
    tokens_dataset *ds = dataset;
    if (!ds)
        return;
    tokens_shards_close(&ds->shards);
    free(ds);
}

static fg_status tokens_open(void *state, int split, void **dataset, fg_dataset_info *info,
                             fg_error *err)
{
    tokens_state *s = state;
    *dataset = NULL;
    if (!fg_plugin_split_name(split))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "tokens: unknown split %d", split);
    int file_split = split == FG_SPLIT_PREDICT ? FG_SPLIT_TEST : split;
    const char *path = s->files[file_split];
    if (path[0] == '\0')
        return fg_error_set(err, FG_NOT_FOUND, "tokens: the %s split is not configured (option "
                            "%s_file is empty)", fg_plugin_split_name(split),
                            fg_plugin_split_name(file_split));
    tokens_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "tokens: out of memory");
    static const char *const keys[] = {NULL, "train_file", "val_file", "test_file"};
    fg_status st = tokens_shards_open(keys[file_split], path, s->format, s->vocab,
                                      (int64_t)s->win.context + 1, &ds->shards, err);
    if (st != FG_OK) {
        free(ds);
        return st;
    }
    ds->windows = (fg_token_dataset){
        .split = fg_plugin_split_name(split),
        .span = {.elem_bytes = 2, .count = ds->shards.total, .fetch = tokens_shards_read,
                 .fetch_ctx = &ds->shards},
        .context = s->win.context,
        .vocab = s->vocab,
        .windows = fg_token_window_count(&s->win, split == FG_SPLIT_TRAIN, ds->shards.total),
        .random = split == FG_SPLIT_TRAIN,
    };
    if (info)
        fg_token_dataset_info(&ds->windows, info);
    *dataset = ds;
    return FG_OK;
}

static fg_status tokens_read(void *state, void *dataset, const fg_data_read_args *args,
                             const int64_t *indices, int count, void *samples, void *labels,
                             fg_error *err)
{
    const tokens_dataset *ds = dataset;
    return fg_token_dataset_read("tokens", &ds->windows, args, indices, count, samples, labels,
                                 err);
}

FG_PLUGIN_DEFINE_VTABLE(fg_data_vtable, FG_KIND_DATA, 0, "tokens", "1.0.0",
                        "language-model windows of pre-tokenized files (nanoGPT raw uint16, llm.c "
                        "headered uint16)",
                        FG_PLUGIN_OPTIONS(tokens_options), tokens_init, tokens_deinit,
                        .open = tokens_open, .close = tokens_close, .read = tokens_read);
