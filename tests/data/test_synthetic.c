/* fulgur-data-synthetic.so, loaded with dlopen: shapes and splits, determinism in
 * (seed, split, index), value and label ranges, labels a linear model learns, bad
 * options, out-of-range reads and concurrent reads.
 * Usage: fulgur_test_data_synthetic <case> */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data_test.h"

typedef struct syn_case {
    const fg_plugin *plugin;
    fg_fake_host fh;
    test_instance in;
    fg_error err;
} syn_case;

static int setup(syn_case *c)
{
    memset(c, 0, sizeof *c);
    c->plugin = load_data_plugin(FG_TEST_SYNTHETIC_PLUGIN, "synthetic");
    if (!c->plugin)
        return -1;
    fg_fake_host_init(&c->fh, c->plugin, NULL);
    return 0;
}

static fg_status init(syn_case *c)
{
    instance_deinit(&c->in);
    return instance_init(&c->in, c->plugin, &c->fh, &c->err);
}

static fg_status open_split(syn_case *c, int split, void **ds, fg_dataset_info *info)
{
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    c->err.message[0] = '\0';
    return c->in.vt->open(c->in.state, split, ds, info, &c->err);
}

/* Reads indices [first, first + n) of an open split. */
static void read_range(syn_case *c, void *ds, int64_t first, int n, float *samples,
                       int32_t *labels)
{
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    for (int k = 0; k < n; k++)
        idx[k] = first + k;
    CHECK_STATUS(c->in.vt->read(c->in.state, ds, &test_read_args, idx, n, samples, labels, &c->err), FG_OK, c->err);
    free(idx);
}

/* ---- cases ------------------------------------------------------------------------- */

static int case_defaults(void)
{
    syn_case c;
    if (setup(&c) != 0)
        return 1;
    CHECK_STATUS(init(&c), FG_OK, c.err);
    void *train = NULL, *test = NULL, *predict = NULL, *val = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &train, &info), FG_OK, c.err);
    CHECK_EQ(info.struct_size, sizeof info);
    CHECK_EQ(info.length, 60000);
    CHECK_EQ(info.rank, 3);
    CHECK_EQ(info.shape[0], 1);
    CHECK_EQ(info.shape[1], 28);
    CHECK_EQ(info.shape[2], 28);
    CHECK_EQ(info.shape[3], 0);
    CHECK_EQ(info.sample_dtype, FG_F32);
    CHECK_EQ(info.num_classes, 10);
    CHECK_EQ(info.label_dtype, FG_I32);
    CHECK_EQ(info.label_elems, 1);
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &test, &info), FG_OK, c.err);
    CHECK_EQ(info.length, 10000);
    CHECK_STATUS(open_split(&c, FG_SPLIT_PREDICT, &predict, &info), FG_OK, c.err);
    CHECK_EQ(info.length, 10000);
    CHECK_STATUS(open_split(&c, FG_SPLIT_VAL, &val, &info), FG_NOT_FOUND, c.err);
    CHECK(val == NULL);
    CHECK_CONTAINS(c.err.message, "val split is not configured");
    CHECK_STATUS(open_split(&c, 0, &val, &info), FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "unknown split 0");

    /* predict serves the test samples */
    float a[2 * 784], b[2 * 784];
    int32_t la[2], lb[2];
    read_range(&c, test, 9998, 2, a, la);
    read_range(&c, predict, 9998, 2, b, lb);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(la, lb, sizeof la) == 0);

    c.in.vt->close(c.in.state, train);
    c.in.vt->close(c.in.state, test);
    c.in.vt->close(c.in.state, predict);
    instance_deinit(&c.in);
    return 0;
}

static int case_sizes(void)
{
    syn_case c;
    if (setup(&c) != 0)
        return 1;
    fg_fake_host_set(&c.fh, "shape", "3, 2,5");
    fg_fake_host_set(&c.fh, "train_size", "7");
    fg_fake_host_set(&c.fh, "test_size", "0");
    fg_fake_host_set(&c.fh, "val_size", "5");
    fg_fake_host_set(&c.fh, "num_classes", "3");
    CHECK_STATUS(init(&c), FG_OK, c.err);
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_VAL, &ds, &info), FG_OK, c.err);
    CHECK_EQ(info.length, 5);
    CHECK_EQ(info.rank, 3);
    CHECK_EQ(info.shape[0], 3);
    CHECK_EQ(info.shape[1], 2);
    CHECK_EQ(info.shape[2], 5);
    CHECK_EQ(info.num_classes, 3);
    c.in.vt->close(c.in.state, ds);
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    CHECK_EQ(info.length, 7);
    c.in.vt->close(c.in.state, ds);
    ds = NULL;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_NOT_FOUND, c.err);
    CHECK_CONTAINS(c.err.message, "test split is not configured (its size is 0)");
    CHECK_STATUS(open_split(&c, FG_SPLIT_PREDICT, &ds, &info), FG_NOT_FOUND, c.err);

    /* A caller built against an older, shorter fg_dataset_info: nothing past its end
     * is written. */
    fg_dataset_info old;
    memset(&old, 0, sizeof old);
    old.struct_size = (uint32_t)offsetof(fg_dataset_info, num_classes);
    old.num_classes = -7;
    CHECK_STATUS(c.in.vt->open(c.in.state, FG_SPLIT_TRAIN, &ds, &old, &c.err), FG_OK, c.err);
    CHECK_EQ(old.struct_size, offsetof(fg_dataset_info, num_classes));
    CHECK_EQ(old.length, 7);
    CHECK_EQ(old.sample_dtype, FG_F32);
    CHECK_EQ(old.num_classes, -7);
    c.in.vt->close(c.in.state, ds);
    instance_deinit(&c.in);
    return 0;
}

/* Same (seed, split, index): same bytes, in any batch, from any instance; anything else
 * different: the samples and labels are functions of where they are. */
static int case_determinism(void)
{
    syn_case c, d;
    if (setup(&c) != 0 || setup(&d) != 0)
        return 1;
    fg_fake_host_set(&c.fh, "seed", "42");
    fg_fake_host_set(&c.fh, "val_size", "100");
    fg_fake_host_set(&d.fh, "seed", "42");
    CHECK_STATUS(init(&c), FG_OK, c.err);
    CHECK_STATUS(init(&d), FG_OK, d.err);
    void *c_train, *d_train, *c_test, *c_val;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &c_train, &info), FG_OK, c.err);
    CHECK_STATUS(open_split(&d, FG_SPLIT_TRAIN, &d_train, &info), FG_OK, d.err);
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &c_test, &info), FG_OK, c.err);
    CHECK_STATUS(open_split(&c, FG_SPLIT_VAL, &c_val, &info), FG_OK, c.err);

    enum { N = 64, E = 784 };
    static float x[N * E], y[N * E];
    int32_t lx[N], ly[N];
    read_range(&c, c_train, 1000, N, x, lx);
    read_range(&d, d_train, 1000, N, y, ly);
    CHECK(memcmp(x, y, sizeof x) == 0);
    CHECK(memcmp(lx, ly, sizeof lx) == 0);

    /* one at a time, backwards: the same */
    for (int k = N - 1; k >= 0; k--) {
        int64_t i = 1000 + k;
        int32_t l = -1;
        CHECK_STATUS(d.in.vt->read(d.in.state, d_train, &test_read_args, &i, 1, y, &l, &d.err), FG_OK, d.err);
        CHECK(memcmp(y, x + k * E, E * sizeof *y) == 0);
        CHECK_EQ(l, lx[k]);
    }

    /* other split, same indices: different samples */
    read_range(&c, c_test, 1000, N, y, ly);
    CHECK(memcmp(x, y, sizeof x) != 0);
    read_range(&c, c_val, 0, N, y, ly);
    CHECK(memcmp(x, y, sizeof x) != 0);
    /* neighbours differ */
    CHECK(memcmp(x, x + E, E * sizeof *x) != 0);

    /* other seed: different samples */
    c.in.vt->close(c.in.state, c_train);
    c.in.vt->close(c.in.state, c_test);
    c.in.vt->close(c.in.state, c_val);
    d.in.vt->close(d.in.state, d_train);
    fg_fake_host_set(&d.fh, "seed", "43");
    CHECK_STATUS(init(&d), FG_OK, d.err);
    CHECK_STATUS(open_split(&d, FG_SPLIT_TRAIN, &d_train, &info), FG_OK, d.err);
    read_range(&d, d_train, 1000, N, y, ly);
    CHECK(memcmp(x, y, sizeof x) != 0);
    d.in.vt->close(d.in.state, d_train);
    instance_deinit(&c.in);
    instance_deinit(&d.in);
    return 0;
}

/* Values in [0, 1) with mean near 1/2; labels in range, every class used, none rare. */
static void check_ranges(syn_case *c, int classes, int64_t elems, int n)
{
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c->err);
    if (!ds)
        return;
    float *x = malloc((size_t)n * (size_t)elems * sizeof *x);
    int32_t *l = malloc((size_t)n * sizeof *l);
    read_range(c, ds, 0, n, x, l);
    float lo = INFINITY, hi = -INFINITY;
    double sum = 0.0;
    for (size_t p = 0; p < (size_t)n * (size_t)elems; p++) {
        lo = x[p] < lo ? x[p] : lo;
        hi = x[p] > hi ? x[p] : hi;
        sum += x[p];
    }
    CHECK(lo >= 0.0f);
    CHECK(hi < 1.0f);
    double mean = sum / ((double)n * (double)elems);
    CHECK(fabs(mean - 0.5) < 0.01);
    int *histogram = calloc((size_t)classes, sizeof *histogram);
    int out_of_range = 0;
    for (int k = 0; k < n; k++) {
        if (l[k] < 0 || l[k] >= classes)
            out_of_range++;
        else
            histogram[l[k]]++;
    }
    CHECK_EQ(out_of_range, 0);
    for (int k = 0; k < classes; k++)
        if (histogram[k] < n / classes / 4) {
            fprintf(stderr, "class %d has %d of %d samples\n", k, histogram[k], n);
            fg_test_failures++;
        }
    free(histogram);
    free(x);
    free(l);
    c->in.vt->close(c->in.state, ds);
}

static int case_ranges(void)
{
    syn_case c;
    if (setup(&c) != 0)
        return 1;
    CHECK_STATUS(init(&c), FG_OK, c.err);
    check_ranges(&c, 10, 784, 5000);
    /* More elements than the projection reads (strided features). */
    fg_fake_host_set(&c.fh, "shape", "3,64,64");
    fg_fake_host_set(&c.fh, "num_classes", "7");
    CHECK_STATUS(init(&c), FG_OK, c.err);
    check_ranges(&c, 7, 3 * 64 * 64, 700);
    /* Many classes: fewer features each, still every label in range. */
    fg_fake_host_set(&c.fh, "shape", "16");
    fg_fake_host_set(&c.fh, "num_classes", "65535");
    CHECK_STATUS(init(&c), FG_OK, c.err);
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    float x[100 * 16];
    int32_t l[100];
    read_range(&c, ds, 0, 100, x, l);
    int bad = 0;
    for (int k = 0; k < 100; k++)
        bad += l[k] < 0 || l[k] >= 65535;
    CHECK_EQ(bad, 0);
    c.in.vt->close(c.in.state, ds);
    instance_deinit(&c.in);
    return 0;
}

/* Softmax regression, plain SGD: the labels are an argmax of a linear function of the
 * sample, so a linear model must reach high held-out accuracy where chance is 10%. */
static int case_learnable(void)
{
    enum { D = 64, K = 10, NTRAIN = 4000, NTEST = 1000, EPOCHS = 15 };
    syn_case c;
    if (setup(&c) != 0)
        return 1;
    fg_fake_host_set(&c.fh, "shape", "1,8,8");
    fg_fake_host_set(&c.fh, "seed", "7");
    CHECK_STATUS(init(&c), FG_OK, c.err);
    void *train = NULL, *test = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &train, &info), FG_OK, c.err);
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &test, &info), FG_OK, c.err);
    if (!train || !test)
        return 1;
    static float x[NTRAIN * D], xt[NTEST * D];
    static int32_t y[NTRAIN], yt[NTEST];
    read_range(&c, train, 0, NTRAIN, x, y);
    read_range(&c, test, 0, NTEST, xt, yt);
    static double w[K * D], b[K];
    memset(w, 0, sizeof w);
    memset(b, 0, sizeof b);
    const double lr = 0.5;
    for (int epoch = 0; epoch < EPOCHS; epoch++)
        for (int n = 0; n < NTRAIN; n++) {
            const float *xn = x + n * D;
            double z[K], zmax = -INFINITY, total = 0.0;
            for (int k = 0; k < K; k++) {
                z[k] = b[k];
                for (int j = 0; j < D; j++)
                    z[k] += w[k * D + j] * (xn[j] - 0.5);
                zmax = z[k] > zmax ? z[k] : zmax;
            }
            for (int k = 0; k < K; k++)
                total += (z[k] = exp(z[k] - zmax));
            for (int k = 0; k < K; k++) {
                double g = z[k] / total - (k == y[n]);
                b[k] -= lr * g;
                for (int j = 0; j < D; j++)
                    w[k * D + j] -= lr * g * (xn[j] - 0.5);
            }
        }
    int correct = 0;
    for (int n = 0; n < NTEST; n++) {
        int best = 0;
        double best_z = -INFINITY;
        for (int k = 0; k < K; k++) {
            double z = b[k];
            for (int j = 0; j < D; j++)
                z += w[k * D + j] * (xt[n * D + j] - 0.5);
            if (z > best_z) {
                best_z = z;
                best = k;
            }
        }
        correct += best == yt[n];
    }
    double accuracy = (double)correct / NTEST;
    fprintf(stderr, "held-out accuracy of softmax regression: %.3f\n", accuracy);
    CHECK(accuracy > 0.7);
    c.in.vt->close(c.in.state, train);
    c.in.vt->close(c.in.state, test);
    instance_deinit(&c.in);
    return 0;
}

static void expect_init_failure(syn_case *c, const char *key, const char *value,
                                const char *fragment)
{
    fg_fake_host_set(&c->fh, key, value);
    CHECK_STATUS(init(c), FG_INVALID_ARGUMENT, c->err);
    CHECK(c->in.state == NULL);
    CHECK_CONTAINS(c->err.message, fragment);
}

static int case_bad_options(void)
{
    syn_case c;
    if (setup(&c) != 0)
        return 1;
    expect_init_failure(&c, "shape", "1,x,3", "shape = \"1,x,3\": dimension 1 is not a positive integer");
    expect_init_failure(&c, "shape", "0,3", "shape = \"0,3\": dimension 0 is not a positive integer");
    expect_init_failure(&c, "shape", "2,-3", "dimension 1 is not a positive integer");
    expect_init_failure(&c, "shape", "", "shape = \"\" is empty");
    expect_init_failure(&c, "shape", "1;28", "unexpected ';' after dimension 0");
    expect_init_failure(&c, "shape", "1,1,1,1,1,1,1,1,1", "has more than 8 dimensions");
    expect_init_failure(&c, "shape", "4096,4097", "holds more than 16777216 elements");
    fg_fake_host_set(&c.fh, "shape", "1,1,1,1,1,1,1,2");
    CHECK_STATUS(init(&c), FG_OK, c.err);
    /* Out of the schema's ranges: refused even when the host lets it through. */
    expect_init_failure(&c, "num_classes", "0", "option num_classes = 0 is outside [1, 65535]");
    fg_fake_host_set(&c.fh, "num_classes", "10");
    expect_init_failure(&c, "train_size", "-1", "option train_size = -1 is outside");
    instance_deinit(&c.in);
    return 0;
}

static int case_index_out_of_range(void)
{
    syn_case c;
    if (setup(&c) != 0)
        return 1;
    fg_fake_host_set(&c.fh, "train_size", "100");
    CHECK_STATUS(init(&c), FG_OK, c.err);
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    float x[2 * 784];
    int32_t l[2];
    int64_t idx[2] = {99, 100};
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &test_read_args, idx, 2, x, l, &c.err), FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message,
                   "index 100 (position 1 of 2) is out of range for the train split of length 100");
    idx[0] = -5;
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &test_read_args, idx, 1, x, NULL, &c.err), FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "index -5 (position 0 of 1)");
    c.in.vt->close(c.in.state, ds);
    instance_deinit(&c.in);
    return 0;
}

static int case_concurrent(void)
{
    syn_case c;
    if (setup(&c) != 0)
        return 1;
    fg_fake_host_set(&c.fh, "test_size", "3000");
    CHECK_STATUS(init(&c), FG_OK, c.err);
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_OK, c.err);
    if (ds)
        check_concurrent_reads(&c.in, ds, info.length, 784);
    c.in.vt->close(c.in.state, ds);
    instance_deinit(&c.in);
    return 0;
}

/* ---- main -------------------------------------------------------------------------- */

static const data_case cases[] = {
    {"defaults", case_defaults},
    {"sizes", case_sizes},
    {"determinism", case_determinism},
    {"ranges", case_ranges},
    {"learnable", case_learnable},
    {"bad_options", case_bad_options},
    {"index_out_of_range", case_index_out_of_range},
    {"concurrent", case_concurrent},
};

int main(int argc, char **argv)
{
    return data_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
