/* fulgur-data-synthetic.so: the descriptor, the option schema and the data vtable over
 * synthetic_gen. Nothing is stored per sample: a dataset is a split and a length. */
#include <stdlib.h>
#include <string.h>

#include "fulgur/data.h"
#include "data_plugin.h"
#include "synthetic_gen.h"
#include "synthetic_shape.h"
#include "plugin_created.h"

#define NO_RANGE .min = 1, .max = 0
#define SIZE_RANGE .min = 0, .max = 1e12

static const fg_option synthetic_options[] = {
    {.key = "shape", .type = FG_OPT_LIST, .default_value = "1,28,28", NO_RANGE,
     .help = "shape of one sample, comma-separated; values are uniform in [0, 1)"},
    {.key = "num_classes", .type = FG_OPT_INT, .default_value = "10", .min = 1, .max = 65535,
     .help = "label = argmax over classes of a fixed random linear projection of "
             "(sample - 0.5): learnable by a linear model"},
    {.key = "train_size", .type = FG_OPT_INT, .default_value = "60000", SIZE_RANGE,
     .help = "samples in the train split; 0: no train split"},
    {.key = "test_size", .type = FG_OPT_INT, .default_value = "10000", SIZE_RANGE,
     .help = "samples in the test split (predict reads the same samples); 0: no test split"},
    {.key = "val_size", .type = FG_OPT_INT, .default_value = "0", SIZE_RANGE,
     .help = "samples in the val split; 0: no val split"},
    {.key = "seed", .type = FG_OPT_INT, .default_value = "0", NO_RANGE,
     .help = "sample i of a split is a pure function of (seed, split, i): same seed, same data"},
};

typedef struct synthetic_state {
    synthetic_model model;
    int32_t rank;
    int64_t shape[FG_MAX_DIMS];
    int64_t size[FG_SPLIT_PREDICT + 1]; /* by fg_split; PREDICT mirrors TEST */
} synthetic_state;

typedef struct synthetic_dataset {
    const synthetic_state *state;
    const char *name;
    int stream; /* the split whose samples this is: PREDICT reads TEST's */
    int64_t length;
} synthetic_dataset;

/* ---- options ----------------------------------------------------------------------- */

static fg_status get_int_in(const fg_host *host, const char *key, int64_t min, int64_t max,
                            int64_t *out, fg_error *err)
{
    fg_status st = host->get_int(host, key, out);
    if (st != FG_OK)
        return fg_error_set(err, st, "synthetic: cannot read option %s: %s", key,
                            fg_status_name(st));
    if (*out < min || *out > max)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "synthetic: option %s = %lld is outside [%lld, %lld]", key,
                            (long long)*out, (long long)min, (long long)max);
    return FG_OK;
}

static fg_status read_options(const fg_host *host, synthetic_state *s, int64_t *elements,
                              int64_t *num_classes, int64_t *seed, fg_error *err)
{
    const char *shape = NULL;
    fg_status st = host->get_string(host, "shape", &shape);
    if (st != FG_OK || !shape)
        return fg_error_set(err, st != FG_OK ? st : FG_INVALID_ARGUMENT,
                            "synthetic: cannot read option shape: %s", fg_status_name(st));
    st = synthetic_parse_shape(shape, &s->rank, s->shape, elements, err);
    const int64_t max_size = (int64_t)1e12;
    if (st == FG_OK)
        st = get_int_in(host, "num_classes", 1, 65535, num_classes, err);
    if (st == FG_OK)
        st = get_int_in(host, "train_size", 0, max_size, &s->size[FG_SPLIT_TRAIN], err);
    if (st == FG_OK)
        st = get_int_in(host, "test_size", 0, max_size, &s->size[FG_SPLIT_TEST], err);
    if (st == FG_OK)
        st = get_int_in(host, "val_size", 0, max_size, &s->size[FG_SPLIT_VAL], err);
    if (st == FG_OK)
        st = get_int_in(host, "seed", INT64_MIN, INT64_MAX, seed, err);
    s->size[FG_SPLIT_PREDICT] = s->size[FG_SPLIT_TEST];
    return st;
}

static void synthetic_deinit(void *state)
{
    synthetic_state *s = state;
    if (s)
        synthetic_model_destroy(&s->model);
    free(s);
}

static fg_status synthetic_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    synthetic_state *s = calloc(1, sizeof *s);
    if (!s)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "synthetic: out of memory");
    int64_t elements = 0, num_classes = 0, seed = 0;
    fg_status st = read_options(host, s, &elements, &num_classes, &seed, err);
    if (st == FG_OK)
        st = synthetic_model_create(&s->model, (uint64_t)seed, elements, (int32_t)num_classes,
                                    err);
    return FG_PLUGIN_CREATED(st, s, state, synthetic_deinit);
}

/* ---- the data vtable --------------------------------------------------------------- */

static fg_status synthetic_open(void *state, int split, void **dataset, fg_dataset_info *info,
                                fg_error *err)
{
    const synthetic_state *s = state;
    *dataset = NULL;
    const char *name = fg_plugin_split_name(split);
    if (!name)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "synthetic: unknown split %d", split);
    if (s->size[split] == 0)
        return fg_error_set(err, FG_NOT_FOUND,
                            "synthetic: the %s split is not configured (its size is 0)", name);
    synthetic_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "synthetic: out of memory");
    ds->state = s;
    ds->name = name;
    ds->stream = split == FG_SPLIT_PREDICT ? FG_SPLIT_TEST : split;
    ds->length = s->size[split];
    if (info) {
        fg_dataset_info full;
        memset(&full, 0, sizeof full);
        full.struct_size = sizeof full;
        full.length = ds->length;
        full.rank = s->rank;
        memcpy(full.shape, s->shape, sizeof full.shape);
        full.sample_dtype = FG_F32;
        full.num_classes = s->model.num_classes;
        full.label_dtype = FG_I32;
        full.label_elems = 1;
        fg_plugin_copy_dataset_info(info, &full);
    }
    *dataset = ds;
    return FG_OK;
}

static void synthetic_close(void *state, void *dataset)
{
    free(dataset);
}

/* Samples are a function of (seed, split, index) only: args (epoch) is not needed. */
static fg_status synthetic_read(void *state, void *dataset, const fg_data_read_args *args,
                                const int64_t *indices, int count, void *samples, void *labels,
                                fg_error *err)
{
    const synthetic_dataset *ds = dataset;
    const synthetic_model *m = &ds->state->model;
    fg_status st = fg_plugin_check_read("synthetic", ds->name, ds->length, indices, count,
                                        samples, err);
    if (st != FG_OK)
        return st;
    for (int k = 0; k < count; k++) {
        float *out = (float *)samples + (size_t)k * (size_t)m->elements;
        synthetic_sample(m, ds->stream, indices[k], out);
        if (labels)
            ((int32_t *)labels)[k] = synthetic_label(m, out);
    }
    return FG_OK;
}

FG_PLUGIN_DEFINE_VTABLE(fg_data_vtable, FG_KIND_DATA, 0, "synthetic", "1.0.0",
                        "deterministic random samples in [0,1) with labels a linear model can "
                        "learn",
                        FG_PLUGIN_OPTIONS(synthetic_options), synthetic_init, synthetic_deinit,
                        .open = synthetic_open, .close = synthetic_close, .read = synthetic_read);
