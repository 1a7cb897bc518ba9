/* fulgur-data-text.so through the fake host: windows are corpus slices with the next byte
 * as label, seeded by (seed, epoch, index) alone, the chunked train/val split is disjoint
 * and fixed by split_seed, validation windows are the same every epoch, and every broken
 * input is refused naming the file.
 * Usage: fulgur_test_data_text <case> */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_test.h"

#ifndef FG_TEST_TEXT_PLUGIN
#error "FG_TEST_TEXT_PLUGIN must name the plugin to test"
#endif

#define CHUNK 4096

typedef struct text_case {
    const fg_plugin *plugin;
    char dir[64];
    fg_fake_host fh;
    test_instance in;
    fg_error err;
} text_case;

static int setup(text_case *c)
{
    memset(c, 0, sizeof *c);
    c->plugin = load_data_plugin(FG_TEST_TEXT_PLUGIN, "text");
    snprintf(c->dir, sizeof c->dir, "/tmp/fulgur-text-XXXXXX");
    if (!c->plugin || !mkdtemp(c->dir))
        return -1;
    fg_fake_host_init(&c->fh, c->plugin, NULL);
    fg_fake_host_set(&c->fh, "dir", c->dir);
    return 0;
}

static void path_of(const text_case *c, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", c->dir, name);
}

static void write_bytes(const text_case *c, const char *name, const void *data, size_t n)
{
    char path[256];
    path_of(c, name, path, sizeof path);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n);
    if (f)
        fclose(f);
}

static void teardown(text_case *c)
{
    instance_deinit(&c->in);
    const char *names[] = {"corpus.txt", "test.txt", "empty.txt", "fifo", "short.txt"};
    char path[256];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        path_of(c, names[i], path, sizeof path);
        unlink(path);
    }
    rmdir(c->dir);
}

static fg_status open_split(text_case *c, int split, void **ds, fg_dataset_info *info)
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

/* A corpus whose every 4096-byte chunk c is filled with one letter, 'A' + c. */
static void write_lettered_corpus(text_case *c, int chunks)
{
    char *text = malloc((size_t)chunks * CHUNK);
    for (int k = 0; k < chunks; k++)
        memset(text + (size_t)k * CHUNK, 'A' + k, CHUNK);
    write_bytes(c, "corpus.txt", text, (size_t)chunks * CHUNK);
    free(text);
}

static const char *pangram = "The quick brown fox jumps over the lazy dog. ";

static int case_windows(void)
{
    text_case c;
    if (setup(&c) != 0)
        return -1;
    char corpus[2000];
    for (size_t i = 0; i < sizeof corpus; i++)
        corpus[i] = pangram[i % strlen(pangram)];
    write_bytes(&c, "corpus.txt", corpus, sizeof corpus);
    fg_fake_host_set_text(&c.fh, "files = corpus.txt\ncontext = 16\nval_fraction = 0\n"
                                 "train_windows = 50");
    void *ds;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    CHECK_EQ(info.length, 50);
    CHECK_EQ(info.rank, 1);
    CHECK_EQ(info.shape[0], 16);
    CHECK_EQ(info.sample_dtype, FG_I32);
    CHECK_EQ(info.label_dtype, FG_I32);
    CHECK_EQ(info.label_elems, 16);
    CHECK_EQ(info.num_classes, 256);
    int64_t idx[50];
    for (int i = 0; i < 50; i++)
        idx[i] = i;
    int32_t x[50][16], y[50][16], x2[50][16], y2[50][16];
    fg_data_read_args args = {sizeof args, FG_SPLIT_TRAIN, 7, 0};
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &args, idx, 50, x, y, &c.err), FG_OK, c.err);
    int slices = 1, distinct_starts = 0;
    for (int i = 0; i < 50; i++) {
        const char *at = NULL;
        for (size_t s = 0; s + 17 <= sizeof corpus && !at; s++) {
            int same = 1;
            for (int t = 0; t < 16 && same; t++)
                same = corpus[s + (size_t)t] == x[i][t] && corpus[s + (size_t)t + 1] == y[i][t];
            if (same)
                at = corpus + s;
        }
        slices &= at != NULL;
        distinct_starts += i > 0 && memcmp(x[i], x[0], sizeof x[0]) != 0;
    }
    CHECK(slices, "every sample is a slice of the corpus with the next byte as label");
    CHECK(distinct_starts > 40, "random offsets: %d of 49 differ from sample 0", distinct_starts);
    /* The same (seed, epoch, index) in a different batch order: the same windows. */
    int64_t rev[50];
    for (int i = 0; i < 50; i++)
        rev[i] = 49 - i;
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &args, rev, 50, x2, y2, &c.err), FG_OK, c.err);
    int same = 1;
    for (int i = 0; i < 50; i++)
        same &= memcmp(x2[i], x[49 - i], sizeof x[0]) == 0 && memcmp(y2[i], y[49 - i],
                                                                     sizeof y[0]) == 0;
    CHECK(same, "a window depends on its index, not on the batch");
    fg_data_read_args next_epoch = {sizeof args, FG_SPLIT_TRAIN, 7, 1};
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &next_epoch, idx, 50, x2, y2, &c.err), FG_OK,
                 c.err);
    CHECK(memcmp(x, x2, sizeof x) != 0, "another epoch draws other windows");
    /* Read for validation (a val split carved from train): evenly spread, seed-free. */
    fg_data_read_args val = {sizeof args, FG_SPLIT_VAL, 7, 0};
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &val, idx, 2, x2, y2, &c.err), FG_OK, c.err);
    int at_start = 1;
    for (int t = 0; t < 16; t++)
        at_start &= x2[0][t] == corpus[t] && y2[0][t] == corpus[t + 1];
    CHECK(at_start, "validation window 0 starts at byte 0");
    c.in.vt->close(c.in.state, ds);
    teardown(&c);
    return 0;
}

static int count_letters(const int32_t *tokens, int64_t n, int seen[26])
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] >= 'A' && tokens[i] < 'A' + 26)
            seen[tokens[i] - 'A'] = 1;
        else
            bad++;
    }
    return bad;
}

/* Letters of every window of a split (val: all windows; train: many seeded windows). */
static void letters_of(text_case *c, int split, int seen[26])
{
    void *ds;
    fg_dataset_info info;
    CHECK_STATUS(open_split(c, split, &ds, &info), FG_OK, c->err);
    int64_t n = info.length < 2000 ? info.length : 2000;
    int32_t *x = malloc((size_t)n * 64 * sizeof *x);
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    for (int64_t i = 0; i < n; i++)
        idx[i] = i;
    fg_data_read_args args = {sizeof args, split, 3, 0};
    CHECK_STATUS(c->in.vt->read(c->in.state, ds, &args, idx, (int)n, x, NULL, &c->err), FG_OK,
                 c->err);
    CHECK_EQ(count_letters(x, n * 64, seen), 0);
    free(x);
    free(idx);
    c->in.vt->close(c->in.state, ds);
}

static int case_split(void)
{
    text_case c;
    if (setup(&c) != 0)
        return -1;
    write_lettered_corpus(&c, 20);
    fg_fake_host_set_text(&c.fh, "files = corpus.txt\ncontext = 64\nval_fraction = 0.1\n"
                                 "split_seed = 11");
    int train[26] = {0}, val[26] = {0}, val_again[26] = {0};
    letters_of(&c, FG_SPLIT_TRAIN, train);
    letters_of(&c, FG_SPLIT_VAL, val);
    int n_train = 0, n_val = 0, both = 0;
    for (int k = 0; k < 26; k++) {
        n_train += train[k];
        n_val += val[k];
        both += train[k] && val[k];
    }
    CHECK_EQ(n_val, 2);   /* round(20 * 0.1) chunks */
    CHECK_EQ(n_train, 18);
    CHECK_EQ(both, 0);
    letters_of(&c, FG_SPLIT_VAL, val_again);
    CHECK(memcmp(val, val_again, sizeof val) == 0, "the split is fixed by split_seed");
    /* Another split seed picks other chunks (for these seeds). */
    fg_fake_host_set(&c.fh, "split_seed", "12");
    int other[26] = {0};
    letters_of(&c, FG_SPLIT_VAL, other);
    CHECK(memcmp(val, other, sizeof val) != 0, "split_seed 12 chose the same chunks as 11");
    void *ds;
    fg_dataset_info info;
    CHECK_EQ(open_split(&c, FG_SPLIT_TEST, &ds, &info), FG_NOT_FOUND);
    CHECK(strstr(c.err.message, "test_files") != NULL, "%s", c.err.message);
    teardown(&c);
    return 0;
}

static int case_val_fixed(void)
{
    text_case c;
    if (setup(&c) != 0)
        return -1;
    write_lettered_corpus(&c, 10);
    fg_fake_host_set_text(&c.fh, "files = corpus.txt\ncontext = 32\nval_fraction = 0.2\n"
                                 "val_windows = 8");
    void *ds;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_VAL, &ds, &info), FG_OK, c.err);
    CHECK_EQ(info.length, 8);
    int64_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int32_t a[8][32], b[8][32];
    fg_data_read_args e0 = {sizeof e0, FG_SPLIT_VAL, 1, 0}, e5 = {sizeof e5, FG_SPLIT_VAL, 9, 5};
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &e0, idx, 8, a, NULL, &c.err), FG_OK, c.err);
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &e5, idx, 8, b, NULL, &c.err), FG_OK, c.err);
    CHECK(memcmp(a, b, sizeof a) == 0, "validation windows do not depend on seed or epoch");
    CHECK(a[0][0] != a[7][31], "the windows spread over both val chunks");
    c.in.vt->close(c.in.state, ds);
    teardown(&c);
    return 0;
}

static fg_status init_with(text_case *c, const char *text)
{
    fg_fake_host_set_text(&c->fh, text);
    instance_deinit(&c->in);
    return instance_init(&c->in, c->plugin, &c->fh, &c->err);
}

static void expect_refused(text_case *c, const char *text, const char *needle1,
                           const char *needle2)
{
    fg_status st = init_with(c, text);
    CHECK(st != FG_OK, "accepted: %s", text);
    CHECK(strstr(c->err.message, needle1) && strstr(c->err.message, needle2),
          "message \"%s\" lacks \"%s\" or \"%s\"", c->err.message, needle1, needle2);
}

static int case_bad_inputs(void)
{
    text_case c;
    if (setup(&c) != 0)
        return -1;
    char path[256];
    write_bytes(&c, "empty.txt", "", 0);
    write_bytes(&c, "short.txt", "hello", 5);
    path_of(&c, "fifo", path, sizeof path);
    CHECK(mkfifo(path, 0600) == 0);
    expect_refused(&c, "files = missing.txt", "missing.txt", "cannot open");
    expect_refused(&c, "files = empty.txt", "empty.txt", "empty");
    expect_refused(&c, "files = fifo", "fifo", "not a regular file");
    expect_refused(&c, "files = short.txt\ncontext = 8\nval_fraction = 0", "train split",
                   "fewer than one window");
    write_lettered_corpus(&c, 3);
    expect_refused(&c, "files = corpus.txt\nval_fraction = 0.1\ntest_files = short.txt",
                   "test split", "test_files");
    teardown(&c);
    return 0;
}

typedef struct reader {
    text_case *c;
    void *ds;
    int32_t (*ref)[24];
    int mismatches;
} reader;

static void *read_all(void *arg)
{
    reader *r = arg;
    int32_t x[24], y[24];
    fg_error err;
    fg_data_read_args args = {sizeof args, FG_SPLIT_TRAIN, 5, 2};
    for (int64_t i = 0; i < 500; i++) {
        int64_t k = (i * 37) % 500;
        if (r->c->in.vt->read(r->c->in.state, r->ds, &args, &k, 1, x, y, &err) != FG_OK ||
            memcmp(x, r->ref[k], sizeof x) != 0)
            r->mismatches++;
    }
    return NULL;
}

/* The loader's workers read one dataset at once: each gets what one reader gets. */
static int case_concurrent(void)
{
    text_case c;
    if (setup(&c) != 0)
        return -1;
    write_lettered_corpus(&c, 4);
    fg_fake_host_set_text(&c.fh, "files = corpus.txt\ncontext = 24\nval_fraction = 0\n"
                                 "train_windows = 500");
    void *ds;
    fg_dataset_info info;
    CHECK_STATUS(open_split(&c, FG_SPLIT_TRAIN, &ds, &info), FG_OK, c.err);
    static int32_t ref[500][24];
    int64_t idx[500];
    for (int i = 0; i < 500; i++)
        idx[i] = i;
    fg_data_read_args args = {sizeof args, FG_SPLIT_TRAIN, 5, 2};
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &args, idx, 500, ref, NULL, &c.err), FG_OK,
                 c.err);
    pthread_t t[4];
    reader r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (reader){.c = &c, .ds = ds, .ref = ref};
        CHECK(pthread_create(&t[i], NULL, read_all, &r[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(r[i].mismatches, 0);
    }
    c.in.vt->close(c.in.state, ds);
    teardown(&c);
    return 0;
}

int main(int argc, char **argv)
{
    static const data_case cases[] = {
        {"windows", case_windows},     {"split", case_split},
        {"val_fixed", case_val_fixed}, {"bad_inputs", case_bad_inputs},
        {"concurrent", case_concurrent},
    };
    return data_test_main(argc, argv, cases, sizeof cases / sizeof *cases);
}
