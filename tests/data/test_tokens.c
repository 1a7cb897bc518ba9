/* fulgur-data-tokens.so through the fake host: nanoGPT's raw uint16 files and llm.c's
 * headered files give the same windows, and every malformed file is refused with a message
 * naming it and what is wrong.
 * Usage: fulgur_test_data_tokens <case> */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_test.h"

#ifndef FG_TEST_TOKENS_PLUGIN
#error "FG_TEST_TOKENS_PLUGIN must name the plugin to test"
#endif

#define VOCAB 1000
#define COUNT 5000

typedef struct tokens_case {
    const fg_plugin *plugin;
    char dir[64];
    fg_fake_host fh;
    test_instance in;
    fg_error err;
} tokens_case;

static const char *const file_names[] = {"raw.bin", "llmc.bin", "bad.bin", "fifo",
                                         "s_000000.bin", "s_000001.bin", "s_000002.bin"};

static int setup(tokens_case *c)
{
    memset(c, 0, sizeof *c);
    c->plugin = load_data_plugin(FG_TEST_TOKENS_PLUGIN, "tokens");
    snprintf(c->dir, sizeof c->dir, "/tmp/fulgur-tokens-XXXXXX");
    if (!c->plugin || !mkdtemp(c->dir))
        return -1;
    fg_fake_host_init(&c->fh, c->plugin, NULL);
    fg_fake_host_set(&c->fh, "dir", c->dir);
    fg_fake_host_set(&c->fh, "vocab_size", "1000");
    return 0;
}

static void teardown(tokens_case *c)
{
    instance_deinit(&c->in);
    char path[256];
    for (size_t i = 0; i < sizeof file_names / sizeof *file_names; i++) {
        snprintf(path, sizeof path, "%s/%s", c->dir, file_names[i]);
        unlink(path);
    }
    rmdir(c->dir);
}

static void write_file(const tokens_case *c, const char *name, const void *head,
                       size_t head_bytes, const uint16_t *tokens, size_t count)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fwrite(head, 1, head_bytes, f) == head_bytes);
    CHECK(fwrite(tokens, 2, count, f) == count);
    fclose(f);
}

static void llmc_header(int32_t header[256], int32_t magic, int32_t version, int32_t count)
{
    memset(header, 0, 256 * sizeof *header);
    header[0] = magic;
    header[1] = version;
    header[2] = count;
}

static uint16_t *counting_tokens(void)
{
    uint16_t *t = malloc(COUNT * sizeof *t);
    for (int i = 0; i < COUNT; i++)
        t[i] = (uint16_t)((i * 7) % VOCAB);
    return t;
}

static fg_status open_train(tokens_case *c, const char *text, void **ds, fg_dataset_info *info)
{
    *ds = NULL;
    fg_fake_host_set_text(&c->fh, text);
    instance_deinit(&c->in);
    fg_status st = instance_init(&c->in, c->plugin, &c->fh, &c->err);
    if (st != FG_OK)
        return st;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    return c->in.vt->open(c->in.state, FG_SPLIT_TRAIN, ds, info, &c->err);
}

/* 64 windows of 32 tokens with seed 9, epoch 3: every one a slice of the counting tokens. */
static void read_windows(tokens_case *c, void *ds, int32_t x[64][32], int32_t y[64][32])
{
    int64_t idx[64];
    for (int i = 0; i < 64; i++)
        idx[i] = i * 2;
    fg_data_read_args args = {sizeof args, FG_SPLIT_TRAIN, 9, 3};
    CHECK_STATUS(c->in.vt->read(c->in.state, ds, &args, idx, 64, x, y, &c->err), FG_OK, c->err);
    for (int i = 0; i < 64; i++) {
        int64_t start = -1;
        for (int64_t s = 0; s < VOCAB && start < 0; s++)
            if ((s * 7) % VOCAB == x[i][0])
                start = s; /* the first token fixes the start modulo VOCAB */
        int ok = start >= 0;
        for (int t = 0; ok && t < 32; t++)
            ok = x[i][t] == (int32_t)(((start + t) * 7) % VOCAB) &&
                 y[i][t] == (int32_t)(((start + t + 1) * 7) % VOCAB);
        CHECK(ok, "window %d is not consecutive tokens with the next token as label", i);
    }
}

static int case_nanogpt(void)
{
    tokens_case c;
    if (setup(&c) != 0)
        return -1;
    uint16_t *t = counting_tokens();
    write_file(&c, "raw.bin", "", 0, t, COUNT);
    void *ds;
    fg_dataset_info info;
    CHECK_STATUS(open_train(&c, "train_file = raw.bin\ncontext = 32", &ds, &info), FG_OK, c.err);
    CHECK_EQ(info.length, COUNT / 32);
    CHECK_EQ(info.shape[0], 32);
    CHECK_EQ(info.num_classes, VOCAB);
    CHECK_EQ(info.sample_dtype, FG_I32);
    CHECK_EQ(info.label_elems, 32);
    static int32_t x[64][32], y[64][32];
    read_windows(&c, ds, x, y);
    c.in.vt->close(c.in.state, ds);
    CHECK_EQ(c.in.vt->open(c.in.state, FG_SPLIT_VAL, &ds, &info, &c.err), FG_NOT_FOUND);
    CHECK(strstr(c.err.message, "val_file") != NULL, "%s", c.err.message);
    free(t);
    teardown(&c);
    return 0;
}

static int case_llmc_equals_nanogpt(void)
{
    tokens_case c;
    if (setup(&c) != 0)
        return -1;
    uint16_t *t = counting_tokens();
    int32_t header[256];
    llmc_header(header, 20240520, 1, COUNT);
    write_file(&c, "raw.bin", "", 0, t, COUNT);
    write_file(&c, "llmc.bin", header, sizeof header, t, COUNT);
    static int32_t xr[64][32], yr[64][32], xl[64][32], yl[64][32];
    void *ds;
    fg_dataset_info info;
    CHECK_STATUS(open_train(&c, "train_file = raw.bin\ncontext = 32", &ds, &info), FG_OK, c.err);
    read_windows(&c, ds, xr, yr);
    c.in.vt->close(c.in.state, ds);
    CHECK_STATUS(open_train(&c, "train_file = llmc.bin\nformat = auto", &ds, &info), FG_OK,
                 c.err);
    CHECK_EQ(info.length, COUNT / 32);
    read_windows(&c, ds, xl, yl);
    c.in.vt->close(c.in.state, ds);
    CHECK(memcmp(xr, xl, sizeof xr) == 0 && memcmp(yr, yl, sizeof yr) == 0,
          "the llm.c file and the raw file give other windows");
    free(t);
    teardown(&c);
    return 0;
}

/* The counting tokens as three llm.c shards of 1, 2000 and 2999 tokens: a glob of them reads
 * as the one raw file does (windows across the shards' joins included), and a glob matching
 * nothing is refused naming the key and the pattern. */
static int case_shards_equal_one_file(void)
{
    tokens_case c;
    if (setup(&c) != 0)
        return -1;
    uint16_t *t = counting_tokens();
    write_file(&c, "raw.bin", "", 0, t, COUNT);
    const int sizes[3] = {1, 2000, COUNT - 2001};
    for (int i = 0, at = 0; i < 3; at += sizes[i++]) {
        int32_t header[256];
        char name[32];
        llmc_header(header, 20240520, 1, sizes[i]);
        snprintf(name, sizeof name, "s_%06d.bin", i);
        write_file(&c, name, header, sizeof header, t + at, (size_t)sizes[i]);
    }
    static int32_t xr[64][32], yr[64][32], xs[64][32], ys[64][32];
    void *ds;
    fg_dataset_info info;
    CHECK_STATUS(open_train(&c, "train_file = raw.bin\ncontext = 32", &ds, &info), FG_OK, c.err);
    read_windows(&c, ds, xr, yr);
    c.in.vt->close(c.in.state, ds);
    CHECK_STATUS(open_train(&c, "train_file = s_*.bin\ncontext = 32", &ds, &info), FG_OK, c.err);
    CHECK_EQ(info.length, COUNT / 32);
    read_windows(&c, ds, xs, ys);
    CHECK(memcmp(xr, xs, sizeof xr) == 0 && memcmp(yr, ys, sizeof yr) == 0,
          "the shards give other windows than the one file");
    /* the evenly spread windows of a val read run over both joins (at 1 and 2001) */
    int64_t idx[156];
    for (int i = 0; i < 156; i++)
        idx[i] = i;
    static int32_t x[156][32], y[156][32];
    fg_data_read_args args = {sizeof args, FG_SPLIT_VAL, 0, 0};
    CHECK_STATUS(c.in.vt->read(c.in.state, ds, &args, idx, 156, x, y, &c.err), FG_OK, c.err);
    for (int i = 0; i < 156; i++)
        for (int k = 0; k + 1 < 32; k++)
            CHECK(y[i][k] == x[i][k + 1], "window %d position %d", i, k);
    c.in.vt->close(c.in.state, ds);
    CHECK_EQ(open_train(&c, "train_file = none_*.bin\ncontext = 32", &ds, &info), FG_NOT_FOUND);
    CHECK(strstr(c.err.message, "train_file = \"") && strstr(c.err.message, "/none_*.bin\" matches no file"), "%s",
          c.err.message);
    free(t);
    teardown(&c);
    return 0;
}

static void expect_refused(tokens_case *c, const char *text, const char *what)
{
    void *ds;
    fg_dataset_info info;
    fg_status st = open_train(c, text, &ds, &info);
    CHECK(st != FG_OK, "accepted: %s", text);
    CHECK(strstr(c->err.message, "bad.bin") || strstr(c->err.message, "fifo"),
          "\"%s\" names no file", c->err.message);
    CHECK(strstr(c->err.message, what) != NULL, "\"%s\" lacks \"%s\"", c->err.message, what);
    if (st == FG_OK)
        c->in.vt->close(c->in.state, ds);
}

static int case_bad_files(void)
{
    tokens_case c;
    if (setup(&c) != 0)
        return -1;
    uint16_t *t = counting_tokens();
    int32_t header[256];
    const char *llmc = "train_file = bad.bin\ncontext = 32\nformat = llmc";
    const char *raw = "train_file = bad.bin\ncontext = 32\nformat = nanogpt";
    llmc_header(header, 20240521, 1, COUNT);
    write_file(&c, "bad.bin", header, sizeof header, t, COUNT);
    expect_refused(&c, llmc, "bad magic 20240521");
    llmc_header(header, 20240520, 2, COUNT);
    write_file(&c, "bad.bin", header, sizeof header, t, COUNT);
    expect_refused(&c, llmc, "version 2");
    llmc_header(header, 20240520, 1, COUNT + 1);
    write_file(&c, "bad.bin", header, sizeof header, t, COUNT);
    expect_refused(&c, llmc, "declares 5001 tokens");
    write_file(&c, "bad.bin", "x", 1, t, COUNT);
    expect_refused(&c, raw, "odd count");
    write_file(&c, "bad.bin", "", 0, t, 0);
    expect_refused(&c, raw, "empty");
    t[4321] = VOCAB;
    write_file(&c, "bad.bin", "", 0, t, COUNT);
    expect_refused(&c, raw, "token 4321 is 1000, not below vocab_size = 1000");
    t[4321] = 0;
    write_file(&c, "bad.bin", "", 0, t, 20);
    expect_refused(&c, raw, "20 tokens, fewer than one window of context + 1 = 33");
    char path[256];
    snprintf(path, sizeof path, "%s/fifo", c.dir);
    CHECK(mkfifo(path, 0600) == 0);
    expect_refused(&c, "train_file = fifo\ncontext = 32", "not a regular file");
    void *ds;
    fg_dataset_info info;
    CHECK(open_train(&c, "train_file = bad.bin\nformat = gpt", &ds, &info) != FG_OK);
    CHECK(strstr(c.err.message, "format") != NULL, "%s", c.err.message);
    free(t);
    teardown(&c);
    return 0;
}

/* A file truncated while open (a run writing a new train.bin over the old one): the next
 * read fails naming the file, where a mapped file ended the process with SIGBUS (issue 30,
 * defect 3). Raw and llm.c files alike. */
static int case_truncated(void)
{
    tokens_case c;
    if (setup(&c) != 0)
        return -1;
    uint16_t *t = counting_tokens();
    int32_t header[256];
    llmc_header(header, 20240520, 1, COUNT);
    write_file(&c, "raw.bin", "", 0, t, COUNT);
    write_file(&c, "llmc.bin", header, sizeof header, t, COUNT);
    const char *const files[] = {"raw.bin", "llmc.bin"};
    for (int f = 0; f < 2; f++) {
        char text[64], path[256];
        snprintf(text, sizeof text, "train_file = %s\ncontext = 32", files[f]);
        snprintf(path, sizeof path, "%s/%s", c.dir, files[f]);
        void *ds;
        fg_dataset_info info;
        CHECK_STATUS(open_train(&c, text, &ds, &info), FG_OK, c.err);
        static int32_t x[64][32], y[64][32];
        read_windows(&c, ds, x, y);
        CHECK_EQ(truncate(path, 1000), 0);
        int64_t idx[64];
        for (int i = 0; i < 64; i++)
            idx[i] = i * 2;
        fg_data_read_args args = {sizeof args, FG_SPLIT_TRAIN, 9, 3};
        memset(&c.err, 0, sizeof c.err);
        CHECK_STATUS(c.in.vt->read(c.in.state, ds, &args, idx, 64, x, y, &c.err),
                     FG_INVALID_ARGUMENT);
        CHECK(strstr(c.err.message, path) != NULL, "\"%s\" does not name %s", c.err.message, path);
        CHECK(strstr(c.err.message, "truncated") != NULL, "\"%s\"", c.err.message);
        c.in.vt->close(c.in.state, ds);
    }
    free(t);
    teardown(&c);
    return 0;
}

int main(int argc, char **argv)
{
    static const data_case cases[] = {
        {"nanogpt", case_nanogpt},
        {"llmc_equals_nanogpt", case_llmc_equals_nanogpt},
        {"bad_files", case_bad_files},
        {"truncated", case_truncated},
        {"shards_equal_one_file", case_shards_equal_one_file},
    };
    return data_test_main(argc, argv, cases, sizeof cases / sizeof *cases);
}
