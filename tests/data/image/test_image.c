/* fulgur-data-image_folder.so, loaded with dlopen through the fake host of tests/data:
 * ImageFolder's class and file order, every broken input answering with a message that
 * names the file, augmentation that depends on (seed, epoch, index) only, and the
 * semantics of each augmentation. Two cases compare against outside references:
 * `reference DIR` (pixels Pillow decoded, written by pil_reference.py) and
 * `fashion_png DIR` (the Fashion-MNIST PNG export against the IDX files).
 * Usage: fulgur_test_data_image <case> [DIR] */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <png.h>
#include <zlib.h>

#include "data_test.h"
#include "image_fixture.h"

#ifndef FG_TEST_IMAGE_FOLDER_PLUGIN
#error "FG_TEST_IMAGE_FOLDER_PLUGIN must name the plugin to test"
#endif

typedef struct img_case {
    const fg_plugin *plugin;
    image_tree tree;
    fg_fake_host fh;
    test_instance in;
    fg_error err;
} img_case;

static int setup(img_case *c)
{
    memset(c, 0, sizeof *c);
    c->plugin = load_data_plugin(FG_TEST_IMAGE_FOLDER_PLUGIN, "image_folder");
    if (!c->plugin || image_tree_create(&c->tree) != 0)
        return -1;
    fg_fake_host_init(&c->fh, c->plugin, NULL);
    fg_fake_host_set(&c->fh, "dir", c->tree.root);
    return 0;
}

static void teardown(img_case *c)
{
    instance_deinit(&c->in);
    image_tree_destroy(&c->tree);
}

/* A fresh instance from the keys set so far (the previous one is dropped). */
static fg_status reinit(img_case *c)
{
    instance_deinit(&c->in);
    return instance_init(&c->in, c->plugin, &c->fh, &c->err);
}

static fg_status open_split(img_case *c, int split, void **ds, fg_dataset_info *info)
{
    *ds = NULL;
    c->err.status = FG_OK;
    c->err.message[0] = '\0';
    if (!c->in.state) {
        fg_status st = reinit(c);
        if (st != FG_OK)
            return st;
    }
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    return c->in.vt->open(c->in.state, split, ds, info, &c->err);
}

static fg_data_read_args read_args(int split, uint64_t seed, int64_t epoch)
{
    fg_data_read_args a = {sizeof a, split, seed, epoch};
    return a;
}

static fg_status read_one(img_case *c, void *ds, const fg_data_read_args *a, int64_t index,
                          float *out, int32_t *label)
{
    c->err.status = FG_OK;
    c->err.message[0] = '\0';
    return c->in.vt->read(c->in.state, ds, a, &index, 1, out, label, &c->err);
}

static uint8_t to_byte(float v)
{
    float b = rintf(v * 255.0f);
    return (uint8_t)(b < 0 ? 0 : b > 255 ? 255 : b);
}

/* ---- classes and file order ---------------------------------------------------------- */

typedef struct order_item {
    const char *rel;
    int label;
    unsigned seed;
} order_item;

/* Mean absolute difference between a (3, h, w) sample and pattern `seed`, in bytes. */
static double pattern_distance(const float *x, int h, int w, unsigned seed)
{
    uint8_t *p = pattern_pixels(h, w, 3, seed);
    double diff = 0;
    for (int ch = 0; ch < 3; ch++)
        for (int i = 0; i < h * w; i++)
            diff += fabs((double)to_byte(x[ch * h * w + i]) - p[i * 3 + ch]);
    free(p);
    return diff / (3.0 * h * w);
}

/* torchvision's order: classes sorted (hidden and upper case included), each class's
 * files as sorted(os.walk()) then sorted names: "a/s-x" before "a/s/t". */
static const order_item expected_order[] = {
    {"train/.hidden/h.png", 0, 1}, {"train/C/c.png", 1, 2},   {"train/a/z.png", 2, 3},
    {"train/a/s/y.png", 2, 4},     {"train/a/s-x/w.JPG", 2, 5}, {"train/a/s/t/v.jpeg", 2, 6},
    {"train/b/b0.png", 3, 7},      {"train/b/b1.png", 3, 8},
};

static int case_classes(void)
{
    img_case c;
    if (setup(&c) != 0)
        return 1;
    enum { H = 6, W = 8, N = sizeof expected_order / sizeof expected_order[0] };
    for (int i = N - 1; i >= 0; i--) /* written in reverse: the order is not creation order */
        CHECK(write_pattern(&c.tree, expected_order[i].rel, H, W, 3, expected_order[i].seed) == 0);
    char path[1024];
    CHECK(write_text(image_tree_path(&c.tree, "train/a/notes.txt", path, sizeof path), "x") == 0);
    CHECK(write_text(image_tree_path(&c.tree, "train/README", path, sizeof path), "x") == 0);
    /* no regular files without an image extension: counted with the skipped ones */
    CHECK(mkfifo(image_tree_path(&c.tree, "train/a/pipe", path, sizeof path), 0644) == 0);
    CHECK(symlink("nowhere", image_tree_path(&c.tree, "train/a/gone.txt", path, sizeof path)) == 0);
    fg_fake_host_set(&c.fh, "train_dir", "train");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    CHECK_CONTAINS(c.fh.log, "(3 other files skipped, 1 outside the class folders)");
    if (!ds) {
        teardown(&c);
        return 1;
    }
    CHECK_EQ(info.length, N);
    CHECK_EQ(info.num_classes, 4);
    CHECK_EQ(info.rank, 3);
    CHECK_EQ(info.shape[0], 3);
    CHECK_EQ(info.shape[1], H);
    CHECK_EQ(info.shape[2], W);
    CHECK_EQ(info.label_dtype, FG_I32);
    CHECK_EQ(info.label_elems, 1);
    fg_data_read_args a = read_args(FG_SPLIT_TEST, 0, 0);
    float x[3 * H * W];
    for (int k = 0; k < N; k++) {
        int32_t label = -1;
        CHECK_STATUS(read_one(&c, ds, &a, k, x, &label), FG_OK, c.err);
        CHECK_EQ(label, expected_order[k].label);
        /* the pixels tell which file it was: exact for PNG, nearest pattern for JPEG */
        unsigned nearest = 0;
        double best = 1e30;
        for (unsigned seed = 1; seed <= N; seed++) {
            double diff = pattern_distance(x, H, W, seed);
            if (diff < best) {
                best = diff;
                nearest = seed;
            }
        }
        int jpeg = strstr(expected_order[k].rel, ".png") == NULL;
        if (nearest != expected_order[k].seed || (!jpeg && best != 0.0)) {
            fprintf(stderr, "sample %d is not %s (nearest pattern %u, mean abs diff %.2f)\n",
                    k, expected_order[k].rel, nearest, best);
            fg_test_failures++;
        }
    }
    c.in.vt->close(c.in.state, ds);
    teardown(&c);
    return 0;
}

/* ---- broken inputs ------------------------------------------------------------------- */

/* Files of class "ok" in name order; each but the good ones fails to read. */
typedef struct bad_file {
    const char *name;
    const char *fragments[3];
} bad_file;

static const bad_file bad_files[] = {
    {"a_good.png", {NULL}},
    {"b_big.png", {"b_big.png", "10 x 10 pixels", "expected 6 x 8"}},
    {"c_trunc.png", {"c_trunc.png", "PNG", "truncated"}},
    {"d_trunc.jpg", {"d_trunc.jpg", "JPEG", "truncated"}},
    {"e_zero.png", {"e_zero.png", "empty file (0 bytes)", NULL}},
    {"f_text.png", {"f_text.png", "not a PNG or JPEG file", "3c 68 74 6d"}},
    {"g_cmyk.jpg", {"g_cmyk.jpg", "CMYK", NULL}},
    {"h_jpeg_named.png", {NULL}}, /* the content decides the format, not the name */
    {"i_garbage.jpg", {"i_garbage.jpg", "JPEG", NULL}},
};

static void write_bad_files(img_case *c)
{
    char path[1024], src[1024];
    CHECK(write_pattern(&c->tree, "train/ok/a_good.png", 6, 8, 3, 1) == 0);
    CHECK(write_pattern(&c->tree, "train/ok/b_big.png", 10, 10, 3, 2) == 0);
    CHECK(write_pattern(&c->tree, "src/big.png", 6, 8, 3, 3) == 0);
    CHECK(copy_prefix(image_tree_path(&c->tree, "src/big.png", src, sizeof src),
                      image_tree_path(&c->tree, "train/ok/c_trunc.png", path, sizeof path),
                      -30) == 0);
    CHECK(write_pattern(&c->tree, "src/big.jpg", 6, 8, 3, 4) == 0);
    CHECK(copy_prefix(image_tree_path(&c->tree, "src/big.jpg", src, sizeof src),
                      image_tree_path(&c->tree, "train/ok/d_trunc.jpg", path, sizeof path),
                      -40) == 0);
    CHECK(write_text(image_tree_path(&c->tree, "train/ok/e_zero.png", path, sizeof path), "") == 0);
    CHECK(write_text(image_tree_path(&c->tree, "train/ok/f_text.png", path, sizeof path),
                     "<html>not an image</html>") == 0);
    CHECK(write_pattern(&c->tree, "train/ok/g_cmyk.jpg", 6, 8, 4, 5) == 0);
    CHECK(write_pattern(&c->tree, "src/j.jpg", 6, 8, 3, 6) == 0);
    CHECK(copy_prefix(image_tree_path(&c->tree, "src/j.jpg", src, sizeof src),
                      image_tree_path(&c->tree, "train/ok/h_jpeg_named.png", path, sizeof path),
                      LONG_MAX) == 0);
    /* a JPEG start of image followed by noise */
    CHECK(write_text(image_tree_path(&c->tree, "train/ok/i_garbage.jpg", path, sizeof path),
                     "\xff\xd8\xff\xe0 this is not JPEG data at all, just text") == 0);
}

static void check_bad_reads(img_case *c)
{
    fg_fake_host_set(&c->fh, "train_dir", "train");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c->err);
    if (!ds)
        return;
    CHECK_EQ(info.length, sizeof bad_files / sizeof bad_files[0]);
    fg_data_read_args a = read_args(FG_SPLIT_TRAIN, 1, 0);
    float x[3 * 6 * 8];
    for (size_t k = 0; k < sizeof bad_files / sizeof bad_files[0]; k++) {
        const bad_file *b = &bad_files[k];
        int32_t label = 0;
        fg_status st = read_one(c, ds, &a, (int64_t)k, x, &label);
        CHECK_STATUS(st, b->fragments[0] ? FG_INVALID_ARGUMENT : FG_OK, c->err);
        for (int f = 0; f < 3 && b->fragments[f]; f++)
            CHECK_CONTAINS(c->err.message, b->fragments[f]);
        if (st != FG_OK)
            fprintf(stderr, "ok: %s -> %s\n", b->name, c->err.message);
    }
    c->in.vt->close(c->in.state, ds);
}

/* Opens the train split from train_dir = dir and expects the failure. */
static void expect_open_failure(img_case *c, const char *dir, const char *fragment)
{
    fg_fake_host_set(&c->fh, "train_dir", dir);
    void *ds = NULL;
    fg_dataset_info info;
    CHECK(reinit(c) == FG_OK);
    CHECK_STATUS(open_split(c, FG_SPLIT_TRAIN, &ds, &info), FG_INVALID_ARGUMENT, c->err);
    CHECK(ds == NULL);
    CHECK_CONTAINS(c->err.message, fragment);
    CHECK_CONTAINS(c->err.message, dir);
    fprintf(stderr, "ok: train_dir %s -> %s\n", dir, c->err.message);
}

static void expect_init_failure(img_case *c, const char *key, const char *value,
                                const char *fragment)
{
    fg_fake_host_set(&c->fh, key, value);
    CHECK_STATUS(reinit(c), FG_INVALID_ARGUMENT, c->err);
    CHECK_CONTAINS(c->err.message, fragment);
    fprintf(stderr, "ok: %s = %s -> %s\n", key, value, c->err.message);
}

static int case_bad_inputs(void)
{
    img_case c;
    if (setup(&c) != 0)
        return 1;
    write_bad_files(&c);
    check_bad_reads(&c);

    char path[1024];
    CHECK(image_tree_mkdir(&c.tree, "empty_class/x") == 0);
    CHECK(write_pattern(&c.tree, "empty_class/y/a.png", 6, 8, 3, 1) == 0);
    expect_open_failure(&c, "empty_class", "holds no .png, .jpg or .jpeg file");
    CHECK(write_text(image_tree_path(&c.tree, "no_classes/a.png", path, sizeof path), "x") == 0);
    expect_open_failure(&c, "no_classes", "has no class folders");
    expect_open_failure(&c, "missing", "No such file or directory");
    expect_open_failure(&c, "no_classes/a.png", "is not a folder");
    /* an entry with an image extension that is no regular file: named, not skipped */
    CHECK(write_pattern(&c.tree, "dangling/k/a.png", 6, 8, 3, 1) == 0);
    CHECK(symlink("nowhere.png", image_tree_path(&c.tree, "dangling/k/b.png", path, sizeof path)) == 0);
    expect_open_failure(&c, "dangling", "dangling/k/b.png is a dangling symbolic link");
    CHECK(write_pattern(&c.tree, "fifo/k/a.png", 6, 8, 3, 1) == 0);
    CHECK(mkfifo(image_tree_path(&c.tree, "fifo/k/b.PNG", path, sizeof path), 0644) == 0);
    expect_open_failure(&c, "fifo", "fifo/k/b.PNG is a FIFO, not an image file");

    /* val's classes must be train's */
    CHECK(write_pattern(&c.tree, "val/ok/a.png", 6, 8, 3, 1) == 0);
    CHECK(write_pattern(&c.tree, "val/zz/a.png", 6, 8, 3, 1) == 0);
    fg_fake_host_set(&c.fh, "train_dir", "train");
    fg_fake_host_set(&c.fh, "val_dir", "val");
    CHECK(reinit(&c) == FG_OK);
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_VAL, &ds, &info), FG_INVALID_ARGUMENT, c.err);
    CHECK_CONTAINS(c.err.message, "the val split's classes differ from the train split's");
    CHECK_CONTAINS(c.err.message, "zz");
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_NOT_FOUND, c.err);
    CHECK_CONTAINS(c.err.message, "test split is not configured (option test_dir is empty)");

    expect_init_failure(&c, "resize", "32", "set center_crop");
    fg_fake_host_set(&c.fh, "resize", "");
    expect_init_failure(&c, "mean", "0.5,0.5", "give 1 or 3");
    fg_fake_host_set(&c.fh, "mean", "0.5,x,1");
    CHECK_STATUS(reinit(&c), FG_INVALID_ARGUMENT, c.err);
    fg_fake_host_set(&c.fh, "mean", "0");
    expect_init_failure(&c, "std", "0", "must be > 0");
    fg_fake_host_set(&c.fh, "std", "1");
    expect_init_failure(&c, "rrc_scale", "0.5,0.1", "0 < LOW <= HIGH");
    fg_fake_host_set(&c.fh, "rrc_scale", "0.08,1");
    expect_init_failure(&c, "center_crop", "0", "is not a size");
    teardown(&c);
    return 0;
}

/* ---- files changed under the loader (issue 30, defects 4 and 9) ---------------------- */

/* A gray PNG of h x w zeros: a few KB of file for h * w bytes of pixels. */
static int write_blank_png(const char *path, int h, int w)
{
    FILE *f = fopen(path, "wb");
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep row = calloc((size_t)w, 1);
    int rc = -1;
    if (f && info && row && !setjmp(png_jmpbuf(png))) {
        png_init_io(png, f);
        png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_GRAY,
                     PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
        png_write_info(png, info);
        for (int y = 0; y < h; y++)
            png_write_row(png, row);
        png_write_end(png, info);
        rc = 0;
    }
    png_destroy_write_struct(&png, &info);
    free(row);
    if (f)
        fclose(f);
    return rc;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Three 6 x 8 gray images indexed as the train split; *ds NULL on failure. */
static void open_three(img_case *c, void **ds)
{
    CHECK(write_pattern(&c->tree, "train/ok/a.png", 6, 8, 1, 1) == 0);
    CHECK(write_pattern(&c->tree, "train/ok/b.png", 6, 8, 1, 2) == 0);
    CHECK(write_pattern(&c->tree, "train/ok/c.png", 6, 8, 1, 3) == 0);
    fg_fake_host_set(&c->fh, "train_dir", "train");
    fg_fake_host_set(&c->fh, "mode", "grayscale");
    fg_dataset_info info;
    CHECK_STATUS(open_split(c, FG_SPLIT_TRAIN, ds, &info), FG_OK, c->err);
    CHECK_EQ(info.length, 3);
}

/* b.png replaced by a FIFO after indexing: the read fails at once naming it, where the
 * decoder's open waited for a writer forever (alarm() ends a test that hangs). */
static int case_swapped_fifo(void)
{
    img_case c;
    if (setup(&c) != 0)
        return 1;
    void *ds = NULL;
    open_three(&c, &ds);
    char path[1024];
    image_tree_path(&c.tree, "train/ok/b.png", path, sizeof path);
    CHECK(unlink(path) == 0 && mkfifo(path, 0644) == 0);
    fg_data_read_args a = read_args(FG_SPLIT_VAL, 1, 0);
    float x[6 * 8];
    int32_t label = 0;
    if (ds) {
        alarm(30);
        CHECK_STATUS(read_one(&c, ds, &a, 1, x, &label), FG_INVALID_ARGUMENT, c.err);
        alarm(0);
        CHECK_CONTAINS(c.err.message, path);
        CHECK_CONTAINS(c.err.message, "not a regular file");
        CHECK_STATUS(read_one(&c, ds, &a, 0, x, &label), FG_OK, c.err);
        c.in.vt->close(c.in.state, ds);
    }
    teardown(&c);
    return 0;
}

/* c.png replaced by 60 KB of PNG declaring 8000 x 8000 pixels against the split's 6 x 8:
 * refused from its header, before 64 MB of pixels are taken (a decompression bomb). */
static int case_bomb(void)
{
    img_case c;
    if (setup(&c) != 0)
        return 1;
    void *ds = NULL;
    open_three(&c, &ds);
    char path[1024];
    CHECK(write_blank_png(image_tree_path(&c.tree, "train/ok/c.png", path, sizeof path),
                          8000, 8000) == 0);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size < 200 * 1024, "the bomb is %lld bytes",
          (long long)sb.st_size);
    fg_data_read_args a = read_args(FG_SPLIT_VAL, 1, 0);
    float x[6 * 8];
    int32_t label = 0;
    if (ds) {
        long before = peak_rss_kb();
        CHECK_STATUS(read_one(&c, ds, &a, 2, x, &label), FG_INVALID_ARGUMENT, c.err);
        CHECK_CONTAINS(c.err.message, "c.png: 8000 x 8000 pixels (height x width), expected 6 x 8");
        long grew = peak_rss_kb() - before;
        CHECK(grew < 16 * 1024, "reading the bomb raised the peak RSS by %ld KB", grew);
        c.in.vt->close(c.in.state, ds);
    }
    teardown(&c);
    return 0;
}

/* ---- augmentation: a function of (seed, epoch, index) --------------------------------- */

enum { AUG_N = 12, AUG_H = 12, AUG_W = 16 };

static void write_aug_tree(img_case *c)
{
    char rel[64];
    for (int i = 0; i < AUG_N; i++) {
        snprintf(rel, sizeof rel, "train/%c/%02d.%s", 'a' + i % 3, i, i % 2 ? "png" : "jpg");
        CHECK(write_pattern(&c->tree, rel, AUG_H, AUG_W, 3, (unsigned)i) == 0);
    }
    fg_fake_host_set(&c->fh, "train_dir", "train");
}

typedef struct aug_job {
    img_case *c;
    void *ds;
    fg_data_read_args args;
    size_t elems;
    const float *ref; /* (AUG_N, elems): each sample read alone */
    int start;
    int mismatches;
    fg_status status;
    fg_error err;
} aug_job;

/* Reads all samples in batches of 5 of a rotated, strided order. */
static void *aug_reader(void *arg)
{
    aug_job *j = arg;
    int64_t order[AUG_N];
    for (int k = 0; k < AUG_N; k++)
        order[k] = (j->start + 5 * k) % AUG_N;
    float *buf = malloc(5 * j->elems * sizeof *buf);
    for (int k = 0; k < AUG_N && j->status == FG_OK; k += 5) {
        int n = AUG_N - k < 5 ? AUG_N - k : 5;
        j->status = j->c->in.vt->read(j->c->in.state, j->ds, &j->args, order + k, n, buf, NULL,
                                      &j->err);
        for (int m = 0; m < n && j->status == FG_OK; m++)
            j->mismatches += memcmp(buf + m * j->elems, j->ref + order[k + m] * j->elems,
                                    j->elems * sizeof *buf) != 0;
    }
    free(buf);
    return NULL;
}

static void read_each(img_case *c, void *ds, const fg_data_read_args *a, size_t elems, float *out)
{
    for (int i = 0; i < AUG_N; i++)
        CHECK_STATUS(read_one(c, ds, a, i, out + i * elems, NULL), FG_OK, c->err);
}

static int differs(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) != 0;
}

/* The keys set on c must augment; `elems` floats per sample. */
static void check_determinism(img_case *c, size_t elems)
{
    void *ds = NULL;
    fg_dataset_info info;
    CHECK(reinit(c) == FG_OK);
    CHECK_STATUS(open_split(c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c->err);
    if (!ds)
        return;
    CHECK_EQ((int64_t)(info.shape[0] * info.shape[1] * info.shape[2]), (int64_t)elems);
    size_t total = AUG_N * elems;
    float *ref = malloc(total * sizeof *ref), *other = malloc(total * sizeof *other);
    fg_data_read_args a = read_args(FG_SPLIT_TRAIN, 5, 2);
    read_each(c, ds, &a, elems, ref);

    aug_job jobs[4];
    pthread_t threads[4];
    for (int t = 0; t < 4; t++) {
        jobs[t] = (aug_job){c, ds, a, elems, ref, 3 * t + 1, 0, FG_OK, {FG_OK, ""}};
        CHECK(pthread_create(&threads[t], NULL, aug_reader, &jobs[t]) == 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(threads[t], NULL);
        CHECK_STATUS(jobs[t].status, FG_OK, jobs[t].err);
        CHECK_EQ(jobs[t].mismatches, 0);
    }
    fg_data_read_args e3 = read_args(FG_SPLIT_TRAIN, 5, 3), s6 = read_args(FG_SPLIT_TRAIN, 6, 2);
    read_each(c, ds, &e3, elems, other);
    CHECK(differs(ref, other, total)); /* another epoch, other draws */
    read_each(c, ds, &s6, elems, other);
    CHECK(differs(ref, other, total)); /* another seed, other draws */
    read_each(c, ds, &a, elems, other);
    CHECK(!differs(ref, other, total)); /* and back */

    /* The same dataset read for validation is not augmented: it equals an instance
     * without any augmentation key, at any seed and epoch. */
    fg_data_read_args v = read_args(FG_SPLIT_VAL, 5, 2);
    read_each(c, ds, &v, elems, other);
    CHECK(differs(ref, other, total));
    float *plain = malloc(total * sizeof *plain);
    fg_fake_host plain_host = c->fh;
    const char *aug_keys[] = {"random_crop_padding", "hflip", "random_resized_crop",
                              "brightness", "contrast"};
    for (size_t k = 0; k < sizeof aug_keys / sizeof aug_keys[0]; k++)
        fg_fake_host_set(&c->fh, aug_keys[k], k == 2 ? "false" : "0");
    test_instance keep = c->in;
    memset(&c->in, 0, sizeof c->in);
    void *plain_ds = NULL;
    CHECK_STATUS(open_split(c, FG_SPLIT_TRAIN, &plain_ds, &info), FG_OK, c->err);
    if (plain_ds) {
        read_each(c, plain_ds, &a, elems, plain);
        CHECK(!differs(plain, other, total));
        c->in.vt->close(c->in.state, plain_ds);
    }
    instance_deinit(&c->in);
    c->in = keep;
    c->fh = plain_host;
    c->in.vt->close(c->in.state, ds);
    free(plain);
    free(ref);
    free(other);
}

static int case_augment_determinism(void)
{
    img_case c;
    if (setup(&c) != 0)
        return 1;
    write_aug_tree(&c);
    fg_fake_host_set(&c.fh, "random_crop_padding", "3");
    fg_fake_host_set(&c.fh, "hflip", "0.5");
    fg_fake_host_set(&c.fh, "brightness", "0.4");
    fg_fake_host_set(&c.fh, "contrast", "0.4");
    check_determinism(&c, 3 * AUG_H * AUG_W);
    /* RandomResizedCrop to 10 x 10, with the resize and crop of evaluation */
    fg_fake_host_set(&c.fh, "random_resized_crop", "true");
    fg_fake_host_set(&c.fh, "resize", "11");
    fg_fake_host_set(&c.fh, "center_crop", "10");
    fg_fake_host_set(&c.fh, "mode", "grayscale");
    check_determinism(&c, 10 * 10);
    teardown(&c);
    return 0;
}

/* ---- what each augmentation does ----------------------------------------------------- */

/* Reads sample i (epoch e) of a fresh instance over the aug tree with one key set. */
static void read_with(img_case *c, const char *key, const char *value, int64_t i, int64_t epoch,
                      float *out)
{
    fg_fake_host saved = c->fh;
    if (key)
        fg_fake_host_set(&c->fh, key, value);
    CHECK(reinit(c) == FG_OK);
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c->err);
    fg_data_read_args a = read_args(FG_SPLIT_TRAIN, 9, epoch);
    if (ds) {
        CHECK_STATUS(read_one(c, ds, &a, i, out, NULL), FG_OK, c->err);
        c->in.vt->close(c->in.state, ds);
    }
    c->fh = saved;
}

#define PX(x, ch, y, xx) (x)[((ch) * AUG_H + (y)) * AUG_W + (xx)]

static void check_flip(img_case *c, const float *plain, int64_t i)
{
    float x[3 * AUG_H * AUG_W];
    read_with(c, "hflip", "1", i, 0, x);
    int bad = 0;
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < AUG_H; y++)
            for (int xx = 0; xx < AUG_W; xx++)
                bad += PX(x, ch, y, xx) != PX(plain, ch, y, AUG_W - 1 - xx);
    CHECK_EQ(bad, 0);
}

/* The sample is the plain one shifted by some (dy, dx) in [-2, 2]^2, zeros coming in. */
static int find_shift(const float *x, const float *plain, int *sy, int *sx)
{
    for (int dy = -2; dy <= 2; dy++)
        for (int dx = -2; dx <= 2; dx++) {
            int bad = 0;
            for (int ch = 0; ch < 3 && !bad; ch++)
                for (int y = 0; y < AUG_H && !bad; y++)
                    for (int xx = 0; xx < AUG_W && !bad; xx++) {
                        int py = y + dy, px = xx + dx;
                        float want = py >= 0 && py < AUG_H && px >= 0 && px < AUG_W
                                         ? PX(plain, ch, py, px) : 0.0f;
                        bad = PX(x, ch, y, xx) != want;
                    }
            if (!bad) {
                *sy = dy;
                *sx = dx;
                return 1;
            }
        }
    return 0;
}

static void check_padding(img_case *c, const float *plain, int64_t i)
{
    float x[3 * AUG_H * AUG_W];
    int moved = 0;
    for (int epoch = 0; epoch < 8; epoch++) {
        read_with(c, "random_crop_padding", "2", i, epoch, x);
        int dy = 0, dx = 0;
        CHECK(find_shift(x, plain, &dy, &dx));
        moved += dy != 0 || dx != 0;
    }
    CHECK(moved > 0);
}

/* brightness alone: every pixel is min(plain * f, 1) for one f per sample. */
static void check_brightness(img_case *c, const float *plain, int64_t i)
{
    float x[3 * AUG_H * AUG_W];
    read_with(c, "brightness", "0.5", i, 1, x);
    float f = -1.0f;
    for (int k = 0; k < 3 * AUG_H * AUG_W && f < 0; k++)
        if (plain[k] > 0.1f && x[k] < 1.0f)
            f = x[k] / plain[k];
    CHECK(f >= 0.5f && f <= 1.5f && f != 1.0f);
    int bad = 0;
    for (int k = 0; k < 3 * AUG_H * AUG_W; k++) {
        float want = plain[k] * f > 1.0f ? 1.0f : plain[k] * f;
        bad += fabsf(x[k] - want) > 1e-5f;
    }
    CHECK_EQ(bad, 0);
}

static int case_augment_semantics(void)
{
    img_case c;
    if (setup(&c) != 0)
        return 1;
    write_aug_tree(&c);
    float plain[3 * AUG_H * AUG_W], x[3 * AUG_H * AUG_W];
    for (int64_t i = 0; i < 3; i++) {
        read_with(&c, NULL, NULL, i, 0, plain);
        check_flip(&c, plain, i);
        check_padding(&c, plain, i);
        check_brightness(&c, plain, i);
        /* contrast 0 < c: the pixels spread around their gray mean by one factor */
        read_with(&c, "contrast", "0.9", i, 0, x);
        CHECK(differs(x, plain, 3 * AUG_H * AUG_W));
    }
    /* RandomResizedCrop with scale 1 and ratio W/H takes the whole image: no change */
    fg_fake_host_set(&c.fh, "rrc_scale", "1,1");
    fg_fake_host_set(&c.fh, "rrc_ratio", "1.3333333333333333,1.3333333333333333");
    read_with(&c, NULL, NULL, 4, 0, plain);
    read_with(&c, "random_resized_crop", "true", 4, 0, x);
    CHECK(!differs(x, plain, 3 * AUG_H * AUG_W));
    teardown(&c);
    return 0;
}

/* ---- references from outside ---------------------------------------------------------- */

/* The whole file into a malloc'd buffer; NULL when missing. */
static uint8_t *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    *size = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    return buf;
}

/* One line of DIR/cases.txt:
 *   NAME TRAIN_DIR MODE RESIZE CENTER_CROP TOLERANCE COUNT C H W
 * with DIR/NAME.u8 the expected bytes (COUNT, C, H, W) and DIR/NAME.labels the labels. */
static void check_reference_case(const char *dir, const char *line)
{
    char name[64], train[256], mode[16], resize[32], crop[32];
    int tol = 0, count = 0, ch = 0, h = 0, w = 0;
    if (sscanf(line, "%63s %255s %15s %31s %31s %d %d %d %d %d", name, train, mode, resize, crop,
               &tol, &count, &ch, &h, &w) != 10) {
        fprintf(stderr, "cases.txt: bad line: %s\n", line);
        fg_test_failures++;
        return;
    }
    img_case c;
    memset(&c, 0, sizeof c);
    c.plugin = load_data_plugin(FG_TEST_IMAGE_FOLDER_PLUGIN, "image_folder");
    if (!c.plugin) {
        fg_test_failures++;
        return;
    }
    fg_fake_host_init(&c.fh, c.plugin, NULL);
    fg_fake_host_set(&c.fh, "dir", dir);
    fg_fake_host_set(&c.fh, "train_dir", train);
    fg_fake_host_set(&c.fh, "mode", mode);
    fg_fake_host_set(&c.fh, "resize", strcmp(resize, "-") ? resize : "");
    fg_fake_host_set(&c.fh, "center_crop", strcmp(crop, "-") ? crop : "");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    char path[1024];
    size_t size = 0, lsize = 0;
    snprintf(path, sizeof path, "%s/%s.u8", dir, name);
    uint8_t *want = slurp(path, &size);
    snprintf(path, sizeof path, "%s/%s.labels", dir, name);
    char *labels = (char *)slurp(path, &lsize);
    size_t elems = (size_t)ch * (size_t)h * (size_t)w;
    if (!ds || !want || !labels || size != (size_t)count * elems) {
        fprintf(stderr, "%s: no dataset or reference (%zu bytes)\n", name, size);
        fg_test_failures++;
    } else {
        labels[lsize] = '\0';
        CHECK_EQ(info.length, count);
        CHECK_EQ(info.shape[0], ch);
        CHECK_EQ(info.shape[1], h);
        CHECK_EQ(info.shape[2], w);
        float *x = malloc(elems * sizeof *x);
        fg_data_read_args a = read_args(FG_SPLIT_TEST, 0, 0);
        int worst = 0;
        char *lp = labels;
        for (int k = 0; k < count && info.length == count; k++) {
            int32_t label = -1;
            CHECK_STATUS(read_one(&c, ds, &a, k, x, &label), FG_OK, c.err);
            CHECK_EQ(label, strtol(lp, &lp, 10));
            for (size_t e = 0; e < elems; e++) {
                int d = abs((int)to_byte(x[e]) - (int)want[(size_t)k * elems + e]);
                worst = d > worst ? d : worst;
            }
        }
        free(x);
        fprintf(stderr, "%s: %d images, largest difference from Pillow %d (allowed %d)\n", name,
                count, worst, tol);
        CHECK(worst <= tol);
    }
    free(want);
    free(labels);
    if (ds)
        c.in.vt->close(c.in.state, ds);
    instance_deinit(&c.in);
}

static int case_reference(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/cases.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: missing (run pil_reference.py first)\n", path);
        return 1;
    }
    char line[1024];
    int cases = 0;
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' && line[0] != '\n') {
            check_reference_case(dir, line);
            cases++;
        }
    fclose(f);
    CHECK(cases >= 4);
    return 0;
}

/* The Fashion-MNIST PNG export (examples/fashion_mnist_to_png.py) read by image_folder
 * equals the IDX files byte for byte, in ImageFolder order: by label, then by index. */
static int read_gz(const char *path, size_t skip, uint8_t *out, size_t n)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return -1;
    int ok = gzseek(gz, (z_off_t)skip, SEEK_SET) >= 0 && gzread(gz, out, (unsigned)n) == (int)n;
    gzclose(gz);
    return ok ? 0 : -1;
}

static int case_fashion_png(const char *dir)
{
    const char *idx = "/usr/share/datasets/fashion-mnist";
    img_case c;
    memset(&c, 0, sizeof c);
    c.plugin = load_data_plugin(FG_TEST_IMAGE_FOLDER_PLUGIN, "image_folder");
    if (!c.plugin)
        return 1;
    fg_fake_host_init(&c.fh, c.plugin, NULL);
    fg_fake_host_set(&c.fh, "dir", dir);
    fg_fake_host_set(&c.fh, "test_dir", "test");
    fg_fake_host_set(&c.fh, "mode", "grayscale");
    void *ds = NULL;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_OK, c.err);
    if (!ds)
        return 1;
    int64_t n = info.length;
    uint8_t *pixels = malloc((size_t)n * 784), *labels = malloc((size_t)n);
    char path[1024];
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", idx);
    CHECK(read_gz(path, 16, pixels, (size_t)n * 784) == 0);
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", idx);
    CHECK(read_gz(path, 8, labels, (size_t)n) == 0);
    fg_data_read_args a = read_args(FG_SPLIT_TEST, 0, 0);
    float x[784];
    int64_t k = 0, bad = 0;
    for (int label = 0; label < 10; label++)
        for (int64_t i = 0; i < n; i++) {
            if (labels[i] != label)
                continue;
            int32_t got = -1;
            CHECK_STATUS(read_one(&c, ds, &a, k++, x, &got), FG_OK, c.err);
            bad += got != label;
            for (int p = 0; p < 784; p++)
                bad += x[p] != (float)pixels[i * 784 + p] / 255.0f;
        }
    CHECK_EQ(k, n);
    CHECK_EQ(bad, 0);
    CHECK_EQ(info.num_classes, 10);
    fprintf(stderr, "fashion_png: %lld test images equal the IDX files\n", (long long)n);
    free(pixels);
    free(labels);
    c.in.vt->close(c.in.state, ds);
    instance_deinit(&c.in);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s <case> [DIR]\n", argv[0]);
        return 2;
    }
    int rc = -1;
    if (strcmp(argv[1], "classes") == 0)
        rc = case_classes();
    else if (strcmp(argv[1], "bad_inputs") == 0)
        rc = case_bad_inputs();
    else if (strcmp(argv[1], "swapped_fifo") == 0)
        rc = case_swapped_fifo();
    else if (strcmp(argv[1], "bomb") == 0)
        rc = case_bomb();
    else if (strcmp(argv[1], "augment_determinism") == 0)
        rc = case_augment_determinism();
    else if (strcmp(argv[1], "augment_semantics") == 0)
        rc = case_augment_semantics();
    else if (strcmp(argv[1], "reference") == 0 && argc == 3)
        rc = case_reference(argv[2]);
    else if (strcmp(argv[1], "fashion_png") == 0 && argc == 3)
        rc = case_fashion_png(argv[2]);
    if (rc < 0) {
        fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    if (rc == TEST_SKIPPED)
        return rc;
    if (rc != 0 || fg_test_failures != 0) {
        fprintf(stderr, "%s: %d check(s) failed\n", argv[1], fg_test_failures);
        return 1;
    }
    return 0;
}
