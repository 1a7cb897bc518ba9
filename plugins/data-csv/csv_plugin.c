/* fulgur-data-csv.so: numeric tables. A split is one CSV file read whole at open();
 * read() copies rows. Classification gives i32 classes, regression f32 targets (the
 * dataset info says which). What needs the train file (the class count when num_classes
 * = 0, standardisation's statistics) is computed once, at the first open that needs it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_path.h"
#include "data_plugin.h"
#include "csv_table.h"
#include "fulgur/data.h"
#include "plugin_created.h"
#include "plugin_options.h"

#define NO_RANGE .min = 1, .max = 0

static const fg_option csv_options[] = {
    {.key = "dir", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "folder that relative file names are resolved against"},
    {.key = "train_file", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "training table (CSV with a header row); empty: no train split"},
    {.key = "val_file", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "validation table, the same columns; empty: no val split"},
    {.key = "test_file", .type = FG_OPT_STRING, .default_value = "", NO_RANGE,
     .help = "test table, the same columns (predict reads it too); empty: no test split"},
    {.key = "target", .type = FG_OPT_STRING, .default_value = FG_OPT_REQUIRED, NO_RANGE,
     .help = "name of the target column"},
    {.key = "features", .type = FG_OPT_LIST, .default_value = "", NO_RANGE,
     .help = "names of the feature columns, in sample order; empty: every column but the "
             "target"},
    {.key = "task", .type = FG_OPT_ENUM, .default_value = "classification", NO_RANGE,
     .choices = "classification|regression",
     .help = "classification: integer classes 0..K-1 (i32 labels); regression: float targets "
             "(f32)"},
    {.key = "num_classes", .type = FG_OPT_INT, .default_value = "0", .min = 0, .max = 65535,
     .help = "classification: classes are < num_classes; 0: the train file's largest + 1"},
    {.key = "delimiter", .type = FG_OPT_STRING, .default_value = ",", NO_RANGE,
     .help = "the field separator: one character, or \"tab\""},
    {.key = "standardize", .type = FG_OPT_BOOL, .default_value = "false", NO_RANGE,
     .help = "scale every feature to zero mean and unit variance with the train file's "
             "statistics (a constant feature is only centred)"},
};

enum { FILE_SLOTS = FG_SPLIT_PREDICT + 1 };

typedef struct csv_state {
    char *files[FILE_SLOTS]; /* by fg_split, resolved; PREDICT reads TEST's; "" when none */
    csv_spec spec;           /* all but the path */
    int64_t num_classes;     /* the option */
    int standardize;
    /* From the train file, once needed: */
    int train_ready;
    int32_t train_classes;   /* largest class + 1 */
    int32_t features;
    float *mean;             /* (features) */
    float *scale;            /* (features) 1 / std, or 1 for a constant feature */
} csv_state;

typedef struct csv_dataset {
    const char *name;
    csv_table table;
    int32_t num_classes;
} csv_dataset;

/* ---- init ---------------------------------------------------------------------------- */

static fg_status read_files(const fg_host *host, csv_state *s, fg_error *err)
{
    static const char *const keys[] = {NULL, "train_file", "val_file", "test_file"};
    const char *dir = NULL;
    fg_status st = fg_plugin_split_paths(host, "csv", keys, s->files, &dir, err);
    if (st == FG_OK)
        st = fg_plugin_resolve_path("csv", "", s->files[FG_SPLIT_TEST],
                                    &s->files[FG_SPLIT_PREDICT], err);
    return st;
}

static fg_status read_format(const fg_host *host, csv_state *s, fg_error *err)
{
    const char *task = NULL, *delimiter = NULL;
    fg_status st = fg_plugin_get_string(host, "csv", "target", &s->spec.target, err);
    if (st == FG_OK)
        st = fg_plugin_get_string(host, "csv", "features", &s->spec.features, err);
    if (st == FG_OK)
        st = fg_plugin_get_string(host, "csv", "task", &task, err);
    if (st == FG_OK)
        st = fg_plugin_get_string(host, "csv", "delimiter", &delimiter, err);
    if (st == FG_OK)
        st = fg_plugin_get_int(host, "csv", "num_classes", &s->num_classes, err);
    if (st == FG_OK)
        st = fg_plugin_get_bool(host, "csv", "standardize", &s->standardize, err);
    if (st != FG_OK)
        return st;
    if (s->spec.target[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: option target is empty: name the "
                            "target column");
    if (strcmp(task, "classification") != 0 && strcmp(task, "regression") != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: option task = \"%s\": "
                            "classification or regression", task);
    s->spec.regression = strcmp(task, "regression") == 0;
    if (strcmp(delimiter, "tab") == 0)
        s->spec.delimiter = '\t';
    else if (strlen(delimiter) == 1 && delimiter[0] != '"' && delimiter[0] != '\n' &&
             delimiter[0] != '\r')
        s->spec.delimiter = delimiter[0];
    else
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: option delimiter = \"%s\": one "
                            "character other than a quote or a line end, or \"tab\"", delimiter);
    if (s->num_classes < 0 || s->num_classes > 65535)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: option num_classes = %lld is "
                            "outside [0, 65535]", (long long)s->num_classes);
    return FG_OK;
}

static void csv_deinit(void *state)
{
    csv_state *s = state;
    if (!s)
        return;
    for (int i = 0; i < FILE_SLOTS; i++)
        free(s->files[i]);
    free(s->mean);
    free(s->scale);
    free(s);
}

static fg_status csv_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    csv_state *s = calloc(1, sizeof *s);
    if (!s)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "csv: out of memory");
    fg_status st = read_files(host, s, err);
    if (st == FG_OK)
        st = read_format(host, s, err);
    return FG_PLUGIN_CREATED(st, s, state, csv_deinit);
}

/* ---- what the train file decides ------------------------------------------------------ */

static fg_status stats_of(csv_state *s, const csv_table *t, fg_error *err)
{
    s->features = t->features;
    s->train_classes = t->max_class + 1;
    s->mean = calloc((size_t)t->features, sizeof *s->mean);
    s->scale = calloc((size_t)t->features, sizeof *s->scale);
    if (!s->mean || !s->scale)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "csv: out of memory");
    for (int32_t j = 0; j < t->features; j++) {
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < t->rows; i++)
            sum += t->x[(size_t)i * (size_t)t->features + (size_t)j];
        double mean = sum / (double)t->rows;
        for (int64_t i = 0; i < t->rows; i++) {
            double d = t->x[(size_t)i * (size_t)t->features + (size_t)j] - mean;
            sq += d * d;
        }
        double sd = sqrt(sq / (double)t->rows); /* population std, as sklearn's StandardScaler */
        s->mean[j] = (float)mean;
        s->scale[j] = sd > 0 ? (float)(1.0 / sd) : 1.0f;
    }
    s->train_ready = 1;
    return FG_OK;
}

static int needs_train(const csv_state *s)
{
    return s->standardize || (!s->spec.regression && s->num_classes == 0);
}

/* `t` is the train table when split is TRAIN; otherwise the train file is read here. */
static fg_status ensure_train_stats(csv_state *s, int split, const csv_table *t, fg_error *err)
{
    if (s->train_ready || !needs_train(s))
        return FG_OK;
    if (split == FG_SPLIT_TRAIN)
        return stats_of(s, t, err);
    if (s->files[FG_SPLIT_TRAIN][0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: %s, but train_file is empty",
                            s->standardize ? "standardize = true scales by the train file's "
                                             "statistics"
                                           : "num_classes = 0 takes the class count from the "
                                             "train file: set num_classes");
    csv_spec spec = s->spec;
    spec.path = s->files[FG_SPLIT_TRAIN];
    csv_table train;
    fg_status st = csv_table_read(&spec, &train, err);
    if (st == FG_OK)
        st = stats_of(s, &train, err);
    csv_table_free(&train);
    return st;
}

/* ---- open ---------------------------------------------------------------------------- */

static fg_status check_classes(const csv_state *s, const csv_dataset *ds, const char *path,
                               fg_error *err)
{
    for (int64_t i = 0; i < ds->table.rows; i++)
        if (ds->table.classes[i] >= ds->num_classes)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "csv: %s:%lld: target column \"%s\": class %d, but num_classes "
                                "= %d (%s)", path, (long long)ds->table.lines[i], s->spec.target,
                                ds->table.classes[i], ds->num_classes,
                                s->num_classes ? "the option"
                                               : "the train file's largest class + 1");
    return FG_OK;
}

static void standardize(const csv_state *s, csv_table *t)
{
    for (int64_t i = 0; i < t->rows; i++) {
        float *x = t->x + (size_t)i * (size_t)t->features;
        for (int32_t j = 0; j < t->features; j++)
            x[j] = (x[j] - s->mean[j]) * s->scale[j];
    }
}

static void fill_info(const csv_state *s, const csv_dataset *ds, fg_dataset_info *info)
{
    fg_dataset_info full;
    memset(&full, 0, sizeof full);
    full.struct_size = sizeof full;
    full.length = ds->table.rows;
    full.rank = 1;
    full.shape[0] = ds->table.features;
    full.sample_dtype = FG_F32;
    full.num_classes = ds->num_classes;
    full.label_dtype = s->spec.regression ? FG_F32 : FG_I32;
    full.label_elems = 1;
    fg_plugin_copy_dataset_info(info, &full);
}

static void csv_close(void *state, void *dataset)
{
    csv_dataset *ds = dataset;
    if (!ds)
        return;
    csv_table_free(&ds->table);
    free(ds);
}

static fg_status csv_open(void *state, int split, void **dataset, fg_dataset_info *info,
                          fg_error *err)
{
    csv_state *s = state;
    *dataset = NULL;
    const char *name = fg_plugin_split_name(split);
    if (!name)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "csv: unknown split %d", split);
    if (s->files[split][0] == '\0')
        return fg_error_set(err, FG_NOT_FOUND, "csv: the %s split is not configured (option "
                            "%s_file is empty)", name,
                            split == FG_SPLIT_PREDICT ? "test" : name);
    csv_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "csv: out of memory");
    ds->name = name;
    csv_spec spec = s->spec;
    spec.path = s->files[split];
    fg_status st = csv_table_read(&spec, &ds->table, err);
    if (st == FG_OK)
        st = ensure_train_stats(s, split, &ds->table, err);
    if (st == FG_OK && s->train_ready && ds->table.features != s->features)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "csv: %s has %d feature columns, the train "
                          "file %s has %d", spec.path, ds->table.features,
                          s->files[FG_SPLIT_TRAIN], s->features);
    if (st == FG_OK && !s->spec.regression) {
        ds->num_classes = s->num_classes ? (int32_t)s->num_classes : s->train_classes;
        st = check_classes(s, ds, spec.path, err);
    }
    if (st != FG_OK) {
        csv_close(state, ds);
        return st;
    }
    if (s->standardize)
        standardize(s, &ds->table);
    if (info)
        fill_info(s, ds, info);
    *dataset = ds;
    return FG_OK;
}

/* ---- read ---------------------------------------------------------------------------- */

/* Rows are fixed at open: no augmentation, args unused. */
static fg_status csv_read(void *state, void *dataset, const fg_data_read_args *args,
                          const int64_t *indices, int count, void *samples, void *labels,
                          fg_error *err)
{
    const csv_dataset *ds = dataset;
    const csv_table *t = &ds->table;
    fg_status st = fg_plugin_check_read("csv", ds->name, t->rows, indices, count, samples, err);
    if (st != FG_OK)
        return st;
    size_t row = (size_t)t->features;
    for (int k = 0; k < count; k++) {
        int64_t i = indices[k];
        memcpy((float *)samples + (size_t)k * row, t->x + (size_t)i * row, row * sizeof(float));
        if (labels && t->classes)
            ((int32_t *)labels)[k] = t->classes[i];
        else if (labels)
            ((float *)labels)[k] = t->targets[i];
    }
    return FG_OK;
}

FG_PLUGIN_DEFINE_VTABLE(fg_data_vtable, FG_KIND_DATA, 0, "csv", "1.0.0",
                        "numeric CSV tables: feature columns and a target column by name "
                        "(classification or regression)",
                        FG_PLUGIN_OPTIONS(csv_options), csv_init, csv_deinit,
                        .open = csv_open, .close = csv_close, .read = csv_read);
