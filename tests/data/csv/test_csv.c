/* fulgur-data-csv.so, loaded with dlopen through the fake host of tests/data: the format
 * (header, quotes, CRLF, BOM, blank lines, delimiters), feature and target selection,
 * classification and regression labels, standardisation, and every broken table
 * answering with the file, the line and the column.
 * Usage: fulgur_test_data_csv <case> */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_test.h"

#ifndef FG_TEST_CSV_PLUGIN
#error "FG_TEST_CSV_PLUGIN must name the plugin to test"
#endif

typedef struct csv_case {
    const fg_plugin *plugin;
    char dir[64];
    fg_fake_host fh;
    test_instance in;
    fg_error err;
} csv_case;

static int setup(csv_case *c)
{
    memset(c, 0, sizeof *c);
    c->plugin = load_data_plugin(FG_TEST_CSV_PLUGIN, "csv");
    snprintf(c->dir, sizeof c->dir, "/tmp/fulgur-csv-XXXXXX");
    if (!c->plugin || !mkdtemp(c->dir))
        return -1;
    fg_fake_host_init(&c->fh, c->plugin, NULL);
    fg_fake_host_set(&c->fh, "dir", c->dir);
    fg_fake_host_set(&c->fh, "target", "y");
    return 0;
}

static void write_file(csv_case *c, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(text, 1, strlen(text), f) == strlen(text));
    if (f)
        fclose(f);
}

static void teardown(csv_case *c)
{
    instance_deinit(&c->in);
    const char *names[] = {"train.csv", "val.csv", "test.csv"};
    char path[256];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", c->dir, names[i]);
        unlink(path);
    }
    rmdir(c->dir);
}

/* A fresh instance from the keys set so far, then open. */
static fg_status open_split(csv_case *c, int split, void **ds, fg_dataset_info *info)
{
    *ds = NULL;
    instance_deinit(&c->in);
    fg_status st = instance_init(&c->in, c->plugin, &c->fh, &c->err);
    if (st != FG_OK)
        return st;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    return c->in.vt->open(c->in.state, split, ds, info, &c->err);
}

static void read_all(csv_case *c, void *ds, int n, float *x, void *labels)
{
    int64_t idx[64];
    for (int i = 0; i < n; i++)
        idx[i] = i;
    CHECK_STATUS(c->in.vt->read(c->in.state, ds, &test_read_args, idx, n, x, labels, &c->err),
                 FG_OK, c->err);
}

static void check_floats(const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "value %d: %g, expected %g\n", i, (double)got[i], (double)want[i]);
            fg_test_failures++;
        }
}

/* ---- the format ---------------------------------------------------------------------- */

static int case_basic(void)
{
    csv_case c;
    if (setup(&c) != 0)
        return 1;
    /* BOM, CRLF, quotes (with a delimiter and an escaped quote in an ignored column),
     * spaces, a blank line, the target in the middle, an ignored text column */
    write_file(&c, "train.csv",
               "\xef\xbb\xbf" "a, y ,\"b\",note\r\n"
               "1.5, 2, -3,\"x, \"\"quoted\"\"\"\r\n"
               "\r\n"
               " 4e1 ,0,\"5\",plain\r\n"
               "16,1,  .25 ,\r\n");
    fg_fake_host_set(&c.fh, "train_file", "train.csv");
    fg_fake_host_set(&c.fh, "features", "b, a");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    if (ds) {
        CHECK_EQ(info.length, 3);
        CHECK_EQ(info.rank, 1);
        CHECK_EQ(info.shape[0], 2);
        CHECK_EQ(info.sample_dtype, FG_F32);
        CHECK_EQ(info.num_classes, 3); /* the largest class + 1 */
        CHECK_EQ(info.label_dtype, FG_I32);
        CHECK_EQ(info.label_elems, 1);
        float x[6];
        int32_t y[3];
        read_all(&c, ds, 3, x, y);
        const float want[] = {-3, 1.5f, 5, 40, 0.25f, 16};
        check_floats(x, want, 6);
        CHECK_EQ(y[0], 2);
        CHECK_EQ(y[1], 0);
        CHECK_EQ(y[2], 1);
        c.in.vt->close(c.in.state, ds);
    }
    /* tab-separated, every column but the target, classes written as 2.0 */
    write_file(&c, "train.csv", "y\tp\tq\n2.0\t1\t2\n0\t3\t4\n");
    fg_fake_host_set(&c.fh, "features", "");
    fg_fake_host_set(&c.fh, "delimiter", "tab");
    fg_fake_host_set(&c.fh, "num_classes", "5");
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    if (ds) {
        CHECK_EQ(info.shape[0], 2);
        CHECK_EQ(info.num_classes, 5);
        float x[4];
        int32_t y[2];
        read_all(&c, ds, 2, x, y);
        const float want[] = {1, 2, 3, 4};
        check_floats(x, want, 4);
        CHECK_EQ(y[0], 2);
        CHECK_EQ(y[1], 0);
        c.in.vt->close(c.in.state, ds);
    }
    CHECK_STATUS(open_split(&c, FG_SPLIT_VAL, &ds, &info), FG_NOT_FOUND, c.err);
    CHECK_CONTAINS(c.err.message, "val split is not configured (option val_file is empty)");
    teardown(&c);
    return 0;
}

/* Regression: f32 targets through the ABI, num_classes 0. */
static int case_regression(void)
{
    csv_case c;
    if (setup(&c) != 0)
        return 1;
    write_file(&c, "train.csv", "x1,x2,y\n1,2,0.5\n3,4,-1.25e2\n");
    fg_fake_host_set(&c.fh, "train_file", "train.csv");
    fg_fake_host_set(&c.fh, "task", "regression");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    if (ds) {
        CHECK_EQ(info.num_classes, 0);
        CHECK_EQ(info.label_dtype, FG_F32);
        CHECK_EQ(info.label_elems, 1);
        float x[4], y[2];
        read_all(&c, ds, 2, x, y);
        const float want_x[] = {1, 2, 3, 4}, want_y[] = {0.5f, -125.0f};
        check_floats(x, want_x, 4);
        check_floats(y, want_y, 2);
        c.in.vt->close(c.in.state, ds);
    }
    teardown(&c);
    return 0;
}

/* standardize: train statistics (population std), applied to every split. */
static int case_standardize(void)
{
    csv_case c;
    if (setup(&c) != 0)
        return 1;
    write_file(&c, "train.csv", "a,b,y\n1,5,0\n3,5,1\n");
    write_file(&c, "test.csv", "a,b,y\n5,6,1\n");
    fg_fake_host_set(&c.fh, "train_file", "train.csv");
    fg_fake_host_set(&c.fh, "test_file", "test.csv");
    fg_fake_host_set(&c.fh, "standardize", "true");
    void *ds = NULL;
    fg_dataset_info info;
    /* the test split first: the train file is read for its statistics */
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_OK, c.err);
    if (ds) {
        CHECK_EQ(info.num_classes, 2);
        float x[2];
        int32_t y[1];
        read_all(&c, ds, 1, x, y);
        const float want[] = {3, 1}; /* a: (5 - 2) / 1; b is constant: only centred */
        check_floats(x, want, 2);
        c.in.vt->close(c.in.state, ds);
    }
    CHECK_STATUS(c.in.vt->open(c.in.state, FG_SPLIT_TRAIN, &ds, &info, &c.err), FG_OK, c.err);
    if (ds) {
        float x[4];
        int32_t y[2];
        read_all(&c, ds, 2, x, y);
        const float want[] = {-1, 0, 1, 0};
        check_floats(x, want, 4);
        c.in.vt->close(c.in.state, ds);
    }
    teardown(&c);
    return 0;
}

/* ---- broken tables ------------------------------------------------------------------- */

typedef struct bad_table {
    const char *text;          /* train.csv */
    const char *key, *value;   /* one option to set, or NULL */
    const char *fragments[3];
} bad_table;

static const bad_table bad_tables[] = {
    {"a,b,y\n1,2,0\n3,4\n", NULL, NULL, {"train.csv:3:", "2 fields, the header has 3", "ragged"}},
    {"a,b,y\n1,2,0,9\n", NULL, NULL, {"train.csv:2:", "4 fields, the header has 3", NULL}},
    {"a,b,y\n1,2,0\n1,abc,1\n", NULL, NULL, {"train.csv:3:", "column \"b\" (column 2)", "\"abc\" is not a number"}},
    {"a,b,y\n1,,0\n", NULL, NULL, {"train.csv:2:", "column \"b\" (column 2) is empty", "missing value"}},
    {"a,b,y\n1,nan,0\n", NULL, NULL, {"train.csv:2:", "\"nan\" is not a finite number", NULL}},
    {"a,b,y\n1,1e999,0\n", NULL, NULL, {"train.csv:2:", "is not a finite number", NULL}},
    {"a,b,y\n1,0x10,0\n", NULL, NULL, {"train.csv:2:", "\"0x10\" is not a number", "hexadecimal"}},
    {"a,b,y\n1,-0x1p3,0\n", NULL, NULL, {"train.csv:2:", "\"-0x1p3\" is not a number", "hexadecimal"}},
    {"a,b,y\n1,2,0X1\n", NULL, NULL, {"train.csv:2:", "column \"y\" (column 3)", "hexadecimal"}},
    {"a,b,label\n1,2,0\n", NULL, NULL, {"train.csv:1:", "no column named \"y\" (the target)", "a, b, label"}},
    {"a,b,y\n1,2,0\n", "features", "a,c", {"no column named \"c\" (the feature)", NULL, NULL}},
    {"a,b,y\n1,2,0\n", "features", "a,y", {"\"y\" is the target and cannot be a feature", NULL, NULL}},
    {"a,a,y\n1,2,0\n", NULL, NULL, {"train.csv:1:", "names column \"a\" twice (columns 1 and 2)", NULL}},
    {"", NULL, NULL, {"train.csv", "empty file: no header row", NULL}},
    {"a,b,y\n\n", NULL, NULL, {"train.csv", "no data rows after the header", NULL}},
    {"a,b,y\n1,\"2,0\n", NULL, NULL, {"train.csv:2:", "field 2: a quote is not closed", NULL}},
    {"a,b,y\n1,\"2\"x,0\n", NULL, NULL, {"train.csv:2:", "text after the closing quote", NULL}},
    {"a,b,y\n1,2,1.5\n", NULL, NULL, {"train.csv:2:", "\"1.5\" is not a class", "task = regression"}},
    {"a,b,y\n1,2,-1\n", NULL, NULL, {"train.csv:2:", "\"-1\" is not a class", NULL}},
    {"a,b,y\n1,2,setosa\n", NULL, NULL, {"train.csv:2:", "column \"y\" (column 3)", "\"setosa\" is not a number"}},
    {"a,b,y\n1,2,3\n", "num_classes", "3", {"train.csv:2:", "class 3, but num_classes = 3", "the option"}},
    {"a,b,y\n1,2,0\n", "delimiter", ";;", {"delimiter", "one character", NULL}},
};

static void check_bad_table(csv_case *c, const bad_table *b)
{
    write_file(c, "train.csv", b->text);
    fg_fake_host saved = c->fh;
    fg_fake_host_set(&c->fh, "train_file", "train.csv");
    if (b->key)
        fg_fake_host_set(&c->fh, b->key, b->value);
    void *ds = NULL;
    fg_dataset_info info;
    fg_status st = open_split(c, FG_SPLIT_TRAIN, &ds, &info);
    CHECK_STATUS(st, FG_INVALID_ARGUMENT, c->err);
    CHECK(ds == NULL);
    for (int f = 0; f < 3 && b->fragments[f]; f++)
        CHECK_CONTAINS(c->err.message, b->fragments[f]);
    fprintf(stderr, "ok: %s\n", c->err.message);
    if (ds)
        c->in.vt->close(c->in.state, ds);
    c->fh = saved;
}

static int case_bad_inputs(void)
{
    csv_case c;
    if (setup(&c) != 0)
        return 1;
    for (size_t i = 0; i < sizeof bad_tables / sizeof bad_tables[0]; i++)
        check_bad_table(&c, &bad_tables[i]);

    /* a test class the train file does not have, with num_classes inferred */
    write_file(&c, "train.csv", "a,y\n1,0\n2,1\n");
    write_file(&c, "test.csv", "a,y\n1,0\n\n2,2\n");
    fg_fake_host_set(&c.fh, "train_file", "train.csv");
    fg_fake_host_set(&c.fh, "test_file", "test.csv");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "test.csv:4: target column \"y\": class 2, but num_classes = 2");
    CHECK_CONTAINS(c.err.message, "the train file's largest class + 1");
    /* other feature columns than the train file's */
    write_file(&c, "test.csv", "a,b,y\n1,2,0\n");
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "has 2 feature columns, the train file");
    /* the class count without a train file */
    fg_fake_host_set(&c.fh, "train_file", "");
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "num_classes = 0 takes the class count from the train file");
    /* a missing file */
    fg_fake_host_set(&c.fh, "train_file", "nope.csv");
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "nope.csv: cannot open");
    /* an index out of range */
    write_file(&c, "train.csv", "a,y\n1,0\n");
    fg_fake_host_set(&c.fh, "train_file", "train.csv");
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    if (ds) {
        int64_t idx = 1;
        float x[1];
        int32_t y[1];
        CHECK_STATUS(c.in.vt->read(c.in.state, ds, &test_read_args, &idx, 1, x, y, &c.err),
                     FG_INVALID_ARGUMENT, c.err);
        CHECK_CONTAINS(c.err.message, "index 1 (position 0 of 1) is out of range");
        c.in.vt->close(c.in.state, ds);
    }
    teardown(&c);
    return 0;
}

static int case_concurrent(void)
{
    csv_case c;
    if (setup(&c) != 0)
        return 1;
    enum { ROWS = 997 };
    char *text = malloc(ROWS * 64 + 64), *p = text;
    p += sprintf(p, "f0,f1,f2,y\n");
    for (int i = 0; i < ROWS; i++)
        p += sprintf(p, "%d,%d.5,%d,%d\n", i, i * 3, -i, i % 7);
    write_file(&c, "train.csv", text);
    free(text);
    fg_fake_host_set(&c.fh, "train_file", "train.csv");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    if (ds) {
        CHECK_EQ(info.num_classes, 7);
        check_concurrent_reads(&c.in, ds, ROWS, 3);
        c.in.vt->close(c.in.state, ds);
    }
    teardown(&c);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(void);
    } cases[] = {
        {"basic", case_basic},         {"regression", case_regression},
        {"standardize", case_standardize}, {"bad_inputs", case_bad_inputs},
        {"concurrent", case_concurrent},
    };
    if (argc != 2) {
        fprintf(stderr, "usage: %s <case>\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            int rc = cases[i].run();
            if (rc != 0 || fg_test_failures != 0) {
                fprintf(stderr, "%s: %d check(s) failed\n", argv[1], fg_test_failures);
                return 1;
            }
            return 0;
        }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
