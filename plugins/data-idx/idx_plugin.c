/* fulgur-data-idx.so: the descriptor, the option schema and the data vtable over
 * idx_dataset. The instance holds only the validated options and resolved paths. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fulgur/data.h"
#include "data_path.h"
#include "data_plugin.h"
#include "idx_dataset.h"
#include "idx_file.h"
#include "plugin_created.h"
#include "plugin_options.h"

#define NO_RANGE .min = 1, .max = 0

static const fg_option idx_options[] = {
    {.key = "dir", .type = FG_OPT_STRING, .default_value = IDX_FASHION_DIR, NO_RANGE,
     .help = "folder that relative file names are resolved against"},
    {.key = "train_images", .type = FG_OPT_STRING, .default_value = IDX_FASHION_TRAIN_IMAGES,
     NO_RANGE, .help = "training images (IDX rank 3, plain or gzip); empty: no train split"},
    {.key = "train_labels", .type = FG_OPT_STRING, .default_value = IDX_FASHION_TRAIN_LABELS,
     NO_RANGE, .help = "training labels (IDX rank 1, plain or gzip)"},
    {.key = "test_images", .type = FG_OPT_STRING, .default_value = IDX_FASHION_TEST_IMAGES,
     NO_RANGE, .help = "test images (IDX rank 3, plain or gzip); empty: no test split"},
    {.key = "test_labels", .type = FG_OPT_STRING, .default_value = IDX_FASHION_TEST_LABELS,
     NO_RANGE, .help = "test labels (IDX rank 1, plain or gzip)"},
    {.key = "val_fraction", .type = FG_OPT_FLOAT, .default_value = "0", .min = 0, .max = 0.5,
     .help = "last fraction of the train files held out as the val split; 0: val reads the "
             "test files, standing in until [data] val_split (drawn at random) replaces them"},
    {.key = "normalize", .type = FG_OPT_BOOL, .default_value = "false", NO_RANGE,
     .help = "map pixels to (x/255 - mean) / std instead of x/255"},
    {.key = "mean", .type = FG_OPT_FLOAT, .default_value = "0.2860", .min = -1e6, .max = 1e6,
     .help = "mean subtracted when normalize = true (Fashion-MNIST's by default)"},
    {.key = "std", .type = FG_OPT_FLOAT, .default_value = "0.3530", .min = 1e-6, .max = 1e6,
     .help = "standard deviation divided by when normalize = true (Fashion-MNIST's by default)"},
    {.key = "num_classes", .type = FG_OPT_INT, .default_value = "10", .min = 1, .max = 65535,
     .help = "labels must be < num_classes; a larger one is an error naming the item"},
};

typedef struct idx_state {
    char *train_images; /* resolved paths; "" when the option is empty */
    char *train_labels;
    char *test_images;
    char *test_labels;
    double val_fraction;
    idx_transform transform;
} idx_state;

/* ---- options ----------------------------------------------------------------------- */

static fg_status read_path(const fg_host *host, const char *dir, const char *key, char **out,
                           fg_error *err)
{
    const char *name = NULL;
    fg_status st = fg_plugin_get_string(host, "idx", key, &name, err);
    return st == FG_OK ? fg_plugin_resolve_path("idx", dir, name, out, err) : st;
}

static fg_status read_numbers(const fg_host *host, idx_state *s, fg_error *err)
{
    fg_status st = fg_plugin_get_float(host, "idx", "val_fraction", &s->val_fraction, err);
    if (st == FG_OK)
        st = fg_plugin_get_bool(host, "idx", "normalize", &s->transform.normalize, err);
    if (st == FG_OK)
        st = fg_plugin_get_float(host, "idx", "mean", &s->transform.mean, err);
    if (st == FG_OK)
        st = fg_plugin_get_float(host, "idx", "std", &s->transform.std, err);
    if (st == FG_OK)
        st = fg_plugin_get_int(host, "idx", "num_classes", &s->transform.num_classes, err);
    if (st != FG_OK)
        return st;
    /* The host validated the schema ranges; a host that did not must not get NaNs or
     * divisions by zero out of us. */
    if (!(s->val_fraction >= 0.0 && s->val_fraction <= 0.5))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "idx: val_fraction = %g is outside [0, 0.5]", s->val_fraction);
    if (!(s->transform.std >= 1e-6))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "idx: std = %g must be >= 1e-6",
                            s->transform.std);
    if (s->transform.num_classes < 1 || s->transform.num_classes > 65535)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "idx: num_classes = %lld is outside [1, 65535]",
                            (long long)s->transform.num_classes);
    return FG_OK;
}

static void idx_deinit(void *state)
{
    idx_state *s = state;
    if (s) {
        free(s->train_images);
        free(s->train_labels);
        free(s->test_images);
        free(s->test_labels);
    }
    free(s);
}

static fg_status idx_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    const char *dir = NULL;
    fg_status st = fg_plugin_get_string(host, "idx", "dir", &dir, err);
    if (st != FG_OK)
        return st;
    idx_state *s = calloc(1, sizeof *s);
    if (!s)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "idx: out of memory");
    st = read_path(host, dir, "train_images", &s->train_images, err);
    if (st == FG_OK)
        st = read_path(host, dir, "train_labels", &s->train_labels, err);
    if (st == FG_OK)
        st = read_path(host, dir, "test_images", &s->test_images, err);
    if (st == FG_OK)
        st = read_path(host, dir, "test_labels", &s->test_labels, err);
    if (st == FG_OK)
        st = read_numbers(host, s, err);
    return FG_PLUGIN_CREATED(st, s, state, idx_deinit);
}

/* ---- the data vtable --------------------------------------------------------------- */

/* TRAIN: the train files less the val tail; VAL: that tail, or the test files when
 * val_fraction = 0; TEST and PREDICT: the test files. */
static fg_status split_source(const idx_state *s, int split, idx_split_source *src,
                              fg_error *err)
{
    int from_train = split == FG_SPLIT_TRAIN || (split == FG_SPLIT_VAL && s->val_fraction > 0);
    src->images_path = from_train ? s->train_images : s->test_images;
    src->labels_path = from_train ? s->train_labels : s->test_labels;
    src->first = 0.0;
    src->last = 1.0;
    switch (split) {
    case FG_SPLIT_TRAIN:
        src->name = "train";
        src->last = 1.0 - s->val_fraction;
        break;
    case FG_SPLIT_VAL:
        src->name = "val";
        if (s->val_fraction > 0)
            src->first = 1.0 - s->val_fraction;
        break;
    case FG_SPLIT_TEST: src->name = "test"; break;
    case FG_SPLIT_PREDICT: src->name = "predict"; break;
    default:
        return fg_error_set(err, FG_INVALID_ARGUMENT, "idx: unknown split %d", split);
    }
    const char *empty_key = NULL;
    if (src->images_path[0] == '\0')
        empty_key = from_train ? "train_images" : "test_images";
    else if (src->labels_path[0] == '\0')
        empty_key = from_train ? "train_labels" : "test_labels";
    if (empty_key)
        return fg_error_set(err, FG_NOT_FOUND,
                            "idx: the %s split is not configured (option %s is empty)",
                            src->name, empty_key);
    return FG_OK;
}

/* The test files must hold images of the train files' size; the trainer would only see two
 * shapes differ, this names both files and both shapes. */
static fg_status check_same_image_size(const idx_state *s, const idx_split_source *src,
                                       const fg_dataset_info *info, fg_error *err)
{
    if (strcmp(src->images_path, s->train_images) == 0 || s->train_images[0] == '\0')
        return FG_OK;
    idx_array train;
    fg_error ignored = {FG_OK, ""};
    if (idx_file_read_header(s->train_images, 3, "images", &train, &ignored) != FG_OK)
        return FG_OK; /* the train split reports its own file's fault */
    if (train.dims[1] == info->shape[1] && train.dims[2] == info->shape[2])
        return FG_OK;
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "idx: %s: the %s images are (%lld, %lld) but the train images %s are "
                        "(%lld, %lld): every split needs images of one size",
                        src->images_path, src->name, (long long)info->shape[1],
                        (long long)info->shape[2], s->train_images, (long long)train.dims[1],
                        (long long)train.dims[2]);
}

static fg_status idx_open(void *state, int split, void **dataset, fg_dataset_info *info,
                          fg_error *err)
{
    const idx_state *s = state;
    *dataset = NULL;
    idx_split_source src;
    fg_status st = split_source(s, split, &src, err);
    if (st != FG_OK)
        return st;
    idx_dataset *ds = NULL;
    st = idx_dataset_open(&src, &s->transform, &ds, err);
    if (st != FG_OK)
        return st;
    fg_dataset_info full;
    idx_dataset_info(ds, s->transform.num_classes, &full);
    /* The test files serve validation only until [data] val_split replaces them. */
    full.stand_in = split == FG_SPLIT_VAL && s->val_fraction == 0;
    st = check_same_image_size(s, &src, &full, err);
    if (st != FG_OK) {
        idx_dataset_close(ds);
        return st;
    }
    if (info)
        fg_plugin_copy_dataset_info(info, &full);
    *dataset = ds;
    return FG_OK;
}

static void idx_close(void *state, void *dataset)
{
    idx_dataset_close(dataset);
}

/* No augmentation: args is not needed. */
static fg_status idx_read(void *state, void *dataset, const fg_data_read_args *args,
                          const int64_t *indices, int count, void *samples, void *labels,
                          fg_error *err)
{
    return idx_dataset_read(dataset, indices, count, samples, labels, err);
}

FG_PLUGIN_DEFINE_VTABLE(fg_data_vtable, FG_KIND_DATA, 0, "idx", "1.0.0",
                        "MNIST-format IDX image/label files, plain or gzip (Fashion-MNIST by "
                        "default)",
                        FG_PLUGIN_OPTIONS(idx_options), idx_init, idx_deinit,
                        .open = idx_open, .close = idx_close, .read = idx_read);
