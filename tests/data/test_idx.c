/* fulgur-data-idx.so, loaded with dlopen: the real Fashion-MNIST files, generated good
 * and broken IDX files (each broken one answers with its status and a message naming
 * the file and the fault), splits, normalization and concurrent reads.
 * Usage: fulgur_test_data_idx <case> */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data_test.h"
#include "idx_fixture.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

typedef struct idx_case {
    const fg_plugin *plugin;
    fixture fx;
    fg_fake_host fh;
    test_instance in;
    fg_error err;
} idx_case;

static int setup(idx_case *c, int with_fixture)
{
    memset(c, 0, sizeof *c);
    c->plugin = load_data_plugin(FG_TEST_IDX_PLUGIN, "idx");
    if (!c->plugin)
        return -1;
    fg_fake_host_init(&c->fh, c->plugin, NULL);
    if (with_fixture) {
        if (fixture_create(&c->fx) != 0)
            return -1;
        fg_fake_host_set(&c->fh, "dir", c->fx.dir);
    }
    return 0;
}

static void teardown(idx_case *c)
{
    instance_deinit(&c->in);
    if (c->fx.dir[0])
        fixture_destroy(&c->fx);
}

/* The same files for the train and the test split: each case needs one pair. */
static void use_files(idx_case *c, const char *images, const char *labels)
{
    fg_fake_host_set(&c->fh, "train_images", images);
    fg_fake_host_set(&c->fh, "train_labels", labels);
    fg_fake_host_set(&c->fh, "test_images", images);
    fg_fake_host_set(&c->fh, "test_labels", labels);
}

/* init (once) then open; the status, with c->err filled on failure. */
static fg_status open_split(idx_case *c, int split, void **ds, fg_dataset_info *info)
{
    *ds = NULL;
    c->err.status = FG_OK;
    c->err.message[0] = '\0';
    if (!c->in.state) {
        fg_status st = instance_init(&c->in, c->plugin, &c->fh, &c->err);
        if (st != FG_OK)
            return st;
    }
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    return c->in.vt->open(c->in.state, split, ds, info, &c->err);
}

static void close_split(idx_case *c, void *ds)
{
    if (ds)
        c->in.vt->close(c->in.state, ds);
}

/* Opens the train split and expects it to fail with st and every fragment. */
static void expect_open_failure(idx_case *c, fg_status st, const char *const *fragments)
{
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(c, FG_SPLIT_TRAIN, &ds, &info), st, c->err);
    CHECK(ds == NULL);
    CHECK_EQ(c->err.status, st);
    for (int i = 0; fragments[i]; i++)
        CHECK_CONTAINS(c->err.message, fragments[i]);
    close_split(c, ds);
}

/* ---- the real Fashion-MNIST files -------------------------------------------------- */

static int fashion_present(void)
{
    FILE *f = fopen(FASHION_DIR "/train-images-idx3-ubyte.gz", "rb");
    if (!f) {
        fprintf(stderr, "skipped: " FASHION_DIR " is missing (apt install dataset-fashion-mnist)\n");
        return 0;
    }
    fclose(f);
    return 1;
}

/* Item `index` of an IDX images file decompressed here, independently of the plugin. */
static int reference_image(const char *path, int64_t index, uint8_t pixels[784])
{
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return -1;
    int ok = gzseek(gz, 16 + index * 784, SEEK_SET) >= 0 && gzread(gz, pixels, 784) == 784;
    gzclose(gz);
    return ok ? 0 : -1;
}

/* Reads a whole split in batches: label histogram, pixel range, and checks against the
 * reference decoding for the first and the last item. */
static void check_fashion_split(idx_case *c, int split, int64_t length, int64_t per_class,
                                const char *images_file)
{
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(c, split, &ds, &info), FG_OK, c->err);
    if (!ds)
        return;
    CHECK_EQ(info.struct_size, sizeof info);
    CHECK_EQ(info.length, length);
    CHECK_EQ(info.rank, 3);
    CHECK_EQ(info.shape[0], 1);
    CHECK_EQ(info.shape[1], 28);
    CHECK_EQ(info.shape[2], 28);
    CHECK_EQ(info.sample_dtype, FG_F32);
    CHECK_EQ(info.num_classes, 10);
    CHECK_EQ(info.label_dtype, FG_I32);
    CHECK_EQ(info.label_elems, 1);

    enum { BATCH = 1000 };
    float *samples = malloc((size_t)BATCH * 784 * sizeof *samples);
    int32_t labels[BATCH];
    int64_t indices[BATCH];
    int64_t histogram[10] = {0};
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t start = 0; start < length; start += BATCH) {
        int n = (int)(length - start < BATCH ? length - start : BATCH);
        for (int k = 0; k < n; k++)
            indices[k] = start + k;
        CHECK_STATUS(c->in.vt->read(c->in.state, ds, &test_read_args, indices, n, samples, labels, &c->err), FG_OK,
                     c->err);
        for (int k = 0; k < n; k++) {
            if (labels[k] >= 0 && labels[k] < 10)
                histogram[labels[k]]++;
            else
                CHECK_EQ(labels[k], -1);
        }
        for (size_t p = 0; p < (size_t)n * 784; p++) {
            lo = samples[p] < lo ? samples[p] : lo;
            hi = samples[p] > hi ? samples[p] : hi;
        }
    }
    for (int k = 0; k < 10; k++)
        CHECK_EQ(histogram[k], per_class);
    CHECK(lo == 0.0f);
    CHECK(hi == 1.0f);

    /* First label of both files: 9 (ankle boot), read from the files themselves. */
    indices[0] = 0;
    indices[1] = length - 1;
    CHECK_STATUS(c->in.vt->read(c->in.state, ds, &test_read_args, indices, 2, samples, labels, &c->err), FG_OK,
                 c->err);
    CHECK_EQ(labels[0], 9);
    uint8_t ref[784];
    for (int k = 0; k < 2; k++) {
        CHECK(reference_image(images_file, indices[k], ref) == 0);
        int bad = 0;
        for (int p = 0; p < 784; p++)
            bad += fabsf(samples[k * 784 + p] - (float)(ref[p] / 255.0)) > 1e-7f;
        CHECK_EQ(bad, 0);
    }
    free(samples);
    close_split(c, ds);
}

static int case_fashion_mnist(void)
{
    if (!fashion_present())
        return TEST_SKIPPED;
    idx_case c;
    if (setup(&c, 0) != 0)
        return 1;
    check_fashion_split(&c, FG_SPLIT_TRAIN, 60000, 6000, FASHION_DIR "/train-images-idx3-ubyte.gz");
    check_fashion_split(&c, FG_SPLIT_TEST, 10000, 1000, FASHION_DIR "/t10k-images-idx3-ubyte.gz");
    /* val_fraction = 0 (the default): val reads the test files. */
    check_fashion_split(&c, FG_SPLIT_VAL, 10000, 1000, FASHION_DIR "/t10k-images-idx3-ubyte.gz");
    teardown(&c);
    return 0;
}

/* ---- good generated files ---------------------------------------------------------- */

/* 20 images of 4 x 5 and their labels i % 10, through read(). */
static void check_generated(idx_case *c, int split, int64_t first_item, int64_t length)
{
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(c, split, &ds, &info), FG_OK, c->err);
    if (!ds)
        return;
    CHECK_EQ(info.length, length);
    CHECK_EQ(info.rank, 3);
    CHECK_EQ(info.shape[0], 1);
    CHECK_EQ(info.shape[1], 4);
    CHECK_EQ(info.shape[2], 5);
    float samples[20 * 20];
    int32_t labels[20];
    int64_t indices[20];
    for (int k = 0; k < length; k++)
        indices[k] = length - 1 - k; /* any order */
    CHECK_STATUS(c->in.vt->read(c->in.state, ds, &test_read_args, indices, (int)length, samples, labels, &c->err),
                 FG_OK, c->err);
    int bad = 0;
    for (int k = 0; k < length; k++) {
        int64_t item = first_item + indices[k];
        CHECK_EQ(labels[k], item % 10);
        for (int p = 0; p < 20; p++)
            bad += samples[k * 20 + p] != (float)(fixture_pixel(item, p) / 255.0);
    }
    CHECK_EQ(bad, 0);
    /* labels may be NULL */
    CHECK_STATUS(c->in.vt->read(c->in.state, ds, &test_read_args, indices, 1, samples, NULL, &c->err), FG_OK, c->err);
    close_split(c, ds);
}

static int case_plain_and_gzip(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(20, 10);
    /* Names say nothing: gzip is detected by its magic bytes. */
    CHECK(write_plain(&c.fx, "plain-images.gz", &images) == 0);
    CHECK(write_gzip(&c.fx, "gz-images", &images) == 0);
    CHECK(write_plain(&c.fx, "plain-labels", &labels) == 0);
    CHECK(write_gzip(&c.fx, "gz-labels.idx", &labels) == 0);
    fg_fake_host_set(&c.fh, "train_images", "plain-images.gz");
    fg_fake_host_set(&c.fh, "train_labels", "gz-labels.idx");
    fg_fake_host_set(&c.fh, "test_images", "gz-images");
    fg_fake_host_set(&c.fh, "test_labels", "plain-labels");
    check_generated(&c, FG_SPLIT_TRAIN, 0, 20);
    check_generated(&c, FG_SPLIT_TEST, 0, 20);
    check_generated(&c, FG_SPLIT_PREDICT, 0, 20);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_absolute_paths(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(20, 10);
    CHECK(write_gzip(&c.fx, "i", &images) == 0);
    CHECK(write_gzip(&c.fx, "l", &labels) == 0);
    char pi[512], pl[512];
    fg_fake_host_set(&c.fh, "dir", "/nonexistent-dir");
    use_files(&c, fixture_path(&c.fx, "i", pi, sizeof pi), fixture_path(&c.fx, "l", pl, sizeof pl));
    check_generated(&c, FG_SPLIT_TRAIN, 0, 20);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_val_fraction(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(20, 10);
    bytes test_images = idx_images(10, 4, 5), test_labels = idx_labels(10, 10);
    CHECK(write_gzip(&c.fx, "train-i", &images) == 0);
    CHECK(write_gzip(&c.fx, "train-l", &labels) == 0);
    CHECK(write_gzip(&c.fx, "test-i", &test_images) == 0);
    CHECK(write_gzip(&c.fx, "test-l", &test_labels) == 0);
    fg_fake_host_set(&c.fh, "train_images", "train-i");
    fg_fake_host_set(&c.fh, "train_labels", "train-l");
    fg_fake_host_set(&c.fh, "test_images", "test-i");
    fg_fake_host_set(&c.fh, "test_labels", "test-l");
    /* Default: val reads the test files. */
    check_generated(&c, FG_SPLIT_VAL, 0, 10);
    instance_deinit(&c.in);
    /* 0.25: train is items [0, 15), val [15, 20) of the train files. */
    fg_fake_host_set(&c.fh, "val_fraction", "0.25");
    check_generated(&c, FG_SPLIT_TRAIN, 0, 15);
    check_generated(&c, FG_SPLIT_VAL, 15, 5);
    check_generated(&c, FG_SPLIT_TEST, 0, 10);
    instance_deinit(&c.in);
    /* Out of the schema's range: the plugin refuses it even from a lax host. */
    fg_fake_host_set(&c.fh, "val_fraction", "0.75");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "val_fraction = 0.75");
    bytes_free(&images);
    bytes_free(&labels);
    bytes_free(&test_images);
    bytes_free(&test_labels);
    teardown(&c);
    return 0;
}

static int case_empty_split(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(20, 10);
    CHECK(write_gzip(&c.fx, "i", &images) == 0);
    CHECK(write_gzip(&c.fx, "l", &labels) == 0);
    use_files(&c, "i", "l");
    fg_fake_host_set(&c.fh, "test_images", "");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_NOT_FOUND, c.err);
    CHECK_CONTAINS(c.err.message, "test split is not configured (option test_images is empty)");
    CHECK_STATUS(open_split(&c, FG_SPLIT_VAL, &ds, &info), FG_NOT_FOUND, c.err);
    CHECK_STATUS(open_split(&c, 99, &ds, &info), FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "unknown split 99");
    check_generated(&c, FG_SPLIT_TRAIN, 0, 20);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_normalize(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(3, 4, 5), labels = idx_labels(3, 10);
    CHECK(write_plain(&c.fx, "i", &images) == 0);
    CHECK(write_plain(&c.fx, "l", &labels) == 0);
    use_files(&c, "i", "l");
    fg_fake_host_set(&c.fh, "normalize", "true");
    fg_fake_host_set(&c.fh, "mean", "0.5");
    fg_fake_host_set(&c.fh, "std", "0.25");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    float samples[20];
    int64_t index = 2;
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &test_read_args, &index, 1, samples, NULL, &c.err), FG_OK, c.err);
    int bad = 0;
    for (int p = 0; p < 20; p++)
        bad += fabsf(samples[p] - (float)((fixture_pixel(2, p) / 255.0 - 0.5) / 0.25)) > 1e-6f;
    CHECK_EQ(bad, 0);
    close_split(&c, ds);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

/* ---- broken files ------------------------------------------------------------------ */

static int case_missing_file(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes labels = idx_labels(20, 10);
    CHECK(write_plain(&c.fx, "l", &labels) == 0);
    use_files(&c, "no-such-images", "l");
    char path[512];
    fixture_path(&c.fx, "no-such-images", path, sizeof path);
    const char *frag[] = {path, "No such file or directory", NULL};
    expect_open_failure(&c, FG_NOT_FOUND, frag);
    CHECK(strstr(c.err.message, "dataset-fashion-mnist") == NULL);
    instance_deinit(&c.in);

    /* A Fashion-MNIST file name: say which package has it. */
    use_files(&c, "train-images-idx3-ubyte.gz", "l");
    fixture_path(&c.fx, "train-images-idx3-ubyte.gz", path, sizeof path);
    const char *hint[] = {path, "No such file or directory",
                          "install the Debian package dataset-fashion-mnist", NULL};
    expect_open_failure(&c, FG_NOT_FOUND, hint);
    CHECK(strstr(c.err.message, "/fulgur-data-") != NULL); /* the path tried, not the default */
    instance_deinit(&c.in);

    /* A folder where a file belongs: refused at open as not a regular file. */
    use_files(&c, c.fx.dir, "l");
    const char *folder[] = {c.fx.dir, "not a regular file", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, folder);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_truncated_plain(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(20, 10);
    images.len -= 7; /* 400 bytes of pixels declared, 393 present */
    CHECK(write_plain(&c.fx, "short-images", &images) == 0);
    CHECK(write_plain(&c.fx, "l", &labels) == 0);
    use_files(&c, "short-images", "l");
    const char *frag[] = {"short-images", "truncated", "20 images", "400 bytes", "read 393", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, frag);
    instance_deinit(&c.in);

    /* Cut inside the header. */
    images.len = 10;
    CHECK(write_plain(&c.fx, "short-header", &images) == 0);
    use_files(&c, "short-header", "l");
    const char *head[] = {"short-header", "truncated header", "expected 16 bytes, read 10", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, head);
    instance_deinit(&c.in);

    /* An empty file. */
    images.len = 0;
    CHECK(write_plain(&c.fx, "empty", &images) == 0);
    use_files(&c, "empty", "l");
    const char *empty[] = {"empty", "truncated header", "read 0", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, empty);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_truncated_gzip(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(200, 28, 28), labels = idx_labels(200, 10);
    bytes gz = gzip_bytes(&images);
    CHECK(gz.len > 100);
    gz.len /= 2;
    CHECK(write_plain(&c.fx, "cut.gz", &gz) == 0);
    CHECK(write_plain(&c.fx, "l", &labels) == 0);
    use_files(&c, "cut.gz", "l");
    const char *frag[] = {"cut.gz", "truncated or corrupt gzip stream", "of 156816 expected bytes",
                          "zlib: unexpected end of file", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, frag);
    bytes_free(&gz);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_corrupt_gzip(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(200, 28, 28), labels = idx_labels(200, 10);
    bytes gz = gzip_bytes(&images);
    CHECK(gz.len > 100);
    /* Flip bytes in the middle of the deflate stream (past the 10-byte gzip header). */
    for (size_t k = gz.len / 2; k < gz.len / 2 + 8; k++)
        gz.data[k] ^= 0x5a;
    CHECK(write_plain(&c.fx, "flipped.gz", &gz) == 0);
    CHECK(write_plain(&c.fx, "l", &labels) == 0);
    use_files(&c, "flipped.gz", "l");
    const char *frag[] = {"flipped.gz", "truncated or corrupt gzip stream", "zlib: ", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, frag);
    fprintf(stderr, "corrupt gzip message: %s\n", c.err.message);
    bytes_free(&gz);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_wrong_magic(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(20, 10);
    images.data[2] = 0x0d; /* IDX float instead of unsigned byte */
    CHECK(write_plain(&c.fx, "float-images", &images) == 0);
    CHECK(write_plain(&c.fx, "l", &labels) == 0);
    use_files(&c, "float-images", "l");
    const char *frag[] = {"float-images", "wrong magic", "expected 0x00000803", "found 0x00000d03",
                          NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, frag);
    instance_deinit(&c.in);

    /* A text file. */
    bytes text = {(uint8_t *)"hello, world\n", 13};
    CHECK(write_plain(&c.fx, "text-labels", &text) == 0);
    images.data[2] = 0x08;
    CHECK(write_plain(&c.fx, "i", &images) == 0);
    use_files(&c, "i", "text-labels");
    const char *lab[] = {"text-labels", "wrong magic", "expected 0x00000801", "found 0x68656c6c",
                         NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, lab);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_wrong_rank(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(20, 10);
    CHECK(write_plain(&c.fx, "i", &images) == 0);
    CHECK(write_plain(&c.fx, "l", &labels) == 0);
    /* The files swapped: images where labels belong and the other way round. */
    use_files(&c, "l", "i");
    const char *frag[] = {"/l: wrong rank", "expected 3 dimensions for images", "found 1", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, frag);
    instance_deinit(&c.in);

    uint32_t dims[2] = {20, 20};
    bytes rank2 = idx_bytes(0x00000802u, dims, 2, images.data + 16, 400);
    CHECK(write_plain(&c.fx, "rank2", &rank2) == 0);
    use_files(&c, "rank2", "l");
    const char *r2[] = {"rank2: wrong rank", "found 2 (magic 0x00000802)", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, r2);
    bytes_free(&rank2);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_bad_dimensions(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes labels = idx_labels(20, 10);
    CHECK(write_plain(&c.fx, "l", &labels) == 0);
    uint32_t zero[3] = {20, 0, 5};
    bytes z = idx_bytes(0x00000803u, zero, 3, NULL, 0);
    CHECK(write_plain(&c.fx, "zero-rows", &z) == 0);
    use_files(&c, "zero-rows", "l");
    const char *frag[] = {"zero-rows", "dimension 1 of the header is 0", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, frag);
    instance_deinit(&c.in);

    /* 65536 x 65536 pixels per image: refused before any allocation. */
    uint32_t huge[3] = {60000, 65536, 65536};
    bytes h = idx_bytes(0x00000803u, huge, 3, NULL, 0);
    CHECK(write_plain(&c.fx, "huge", &h) == 0);
    use_files(&c, "huge", "l");
    const char *big[] = {"huge", "images of more than 16777216 bytes each", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, big);
    instance_deinit(&c.in);

    /* A count that lies (4 billion images, 16 present): an error, not a 64 GB malloc. */
    uint32_t lie[3] = {0xffffffffu, 4, 4};
    uint8_t px[16] = {0};
    bytes l = idx_bytes(0x00000803u, lie, 3, px, 16);
    CHECK(write_plain(&c.fx, "liar", &l) == 0);
    use_files(&c, "liar", "l");
    const char *liar[] = {"liar", "truncated", "4294967295 images", "read 16", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, liar);
    bytes_free(&l);
    bytes_free(&h);
    bytes_free(&z);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_trailing_data(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(20, 10);
    CHECK(write_plain(&c.fx, "i", &images) == 0);
    labels.data = realloc(labels.data, labels.len + 3);
    memset(labels.data + labels.len, 0, 3);
    labels.len += 3;
    CHECK(write_gzip(&c.fx, "long-labels", &labels) == 0);
    use_files(&c, "i", "long-labels");
    const char *frag[] = {"long-labels", "3 bytes of trailing data after the 20 labels", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, frag);
    instance_deinit(&c.in);

    /* The same in a plain file. */
    CHECK(write_plain(&c.fx, "long-plain-labels", &labels) == 0);
    use_files(&c, "i", "long-plain-labels");
    const char *plain[] = {"long-plain-labels", "3 bytes of trailing data after the 20 labels", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, plain);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_count_mismatch(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(19, 10);
    CHECK(write_plain(&c.fx, "twenty-images", &images) == 0);
    CHECK(write_gzip(&c.fx, "nineteen-labels", &labels) == 0);
    use_files(&c, "twenty-images", "nineteen-labels");
    const char *frag[] = {"counts disagree", "twenty-images holds 20 images",
                          "nineteen-labels holds 19 labels", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, frag);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_label_range(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(20, 10);
    labels.data[8 + 7] = 10; /* item 7 */
    CHECK(write_plain(&c.fx, "i", &images) == 0);
    CHECK(write_plain(&c.fx, "bad-labels", &labels) == 0);
    use_files(&c, "i", "bad-labels");
    const char *frag[] = {"bad-labels", "label 10 of item 7", "num_classes = 10", NULL};
    expect_open_failure(&c, FG_INVALID_ARGUMENT, frag);
    instance_deinit(&c.in);

    /* With 11 classes the same file is fine. */
    fg_fake_host_set(&c.fh, "num_classes", "11");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    CHECK_EQ(info.num_classes, 11);
    int64_t index = 7;
    int32_t label = -1;
    float samples[20];
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &test_read_args, &index, 1, samples, &label, &c.err), FG_OK, c.err);
    CHECK_EQ(label, 10);
    close_split(&c, ds);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

static int case_index_out_of_range(void)
{
    idx_case c;
    if (setup(&c, 1) != 0)
        return 1;
    bytes images = idx_images(20, 4, 5), labels = idx_labels(20, 10);
    CHECK(write_plain(&c.fx, "i", &images) == 0);
    CHECK(write_plain(&c.fx, "l", &labels) == 0);
    use_files(&c, "i", "l");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    float samples[3 * 20];
    int32_t labels_out[3];
    int64_t past[3] = {0, 20, 1};
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &test_read_args, past, 3, samples, labels_out, &c.err),
                 FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "index 20 (position 1 of 3) is out of range for the train split "
                                  "of length 20");
    int64_t negative[1] = {-1};
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &test_read_args, negative, 1, samples, labels_out, &c.err),
                 FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "index -1 (position 0 of 1)");
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &test_read_args, negative, -2, samples, labels_out, &c.err),
                 FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "count -2");
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &test_read_args, NULL, 0, NULL, NULL, &c.err), FG_OK, c.err);
    close_split(&c, ds);
    bytes_free(&images);
    bytes_free(&labels);
    teardown(&c);
    return 0;
}

/* ---- concurrent reads -------------------------------------------------------------- */

static int case_concurrent(void)
{
    idx_case c;
    if (fashion_present()) {
        if (setup(&c, 0) != 0)
            return 1;
        fg_fake_host_set(&c.fh, "normalize", "true");
    } else {
        /* Without the package: a generated file of the same size. */
        if (setup(&c, 1) != 0)
            return 1;
        bytes images = idx_images(10000, 28, 28), labels = idx_labels(10000, 10);
        CHECK(write_gzip(&c.fx, "i", &images) == 0);
        CHECK(write_gzip(&c.fx, "l", &labels) == 0);
        use_files(&c, "i", "l");
        bytes_free(&images);
        bytes_free(&labels);
    }
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_OK, c.err);
    if (ds)
        check_concurrent_reads(&c.in, ds, info.length, 784);
    close_split(&c, ds);
    teardown(&c);
    return 0;
}

/* ---- main -------------------------------------------------------------------------- */

static const data_case cases[] = {
    {"fashion_mnist", case_fashion_mnist},
    {"plain_and_gzip", case_plain_and_gzip},
    {"absolute_paths", case_absolute_paths},
    {"val_fraction", case_val_fraction},
    {"empty_split", case_empty_split},
    {"normalize", case_normalize},
    {"missing_file", case_missing_file},
    {"truncated_plain", case_truncated_plain},
    {"truncated_gzip", case_truncated_gzip},
    {"corrupt_gzip", case_corrupt_gzip},
    {"wrong_magic", case_wrong_magic},
    {"wrong_rank", case_wrong_rank},
    {"bad_dimensions", case_bad_dimensions},
    {"trailing_data", case_trailing_data},
    {"count_mismatch", case_count_mismatch},
    {"label_range", case_label_range},
    {"index_out_of_range", case_index_out_of_range},
    {"concurrent", case_concurrent},
};

int main(int argc, char **argv)
{
    return data_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
