/* Write then read back: every dtype, scalars, empty tensors, awkward names and metadata
 * strings; the bytes must come back bit for bit, names in data order, metadata in header
 * order, and the file must have the layout the format fixes. */
#include <math.h>
#include <sys/stat.h>

#include "ckpt_test.h"

#define NT 9

typedef struct sample {
    float w[3][4];          /* (3, 4) */
    double b[4];            /* (4) */
    uint16_t half[2][3];    /* (2, 3) F16 bit patterns */
    uint16_t bf[5];         /* (5) BF16 bit patterns */
    int64_t step;           /* () */
    int32_t labels[2][2][2];/* (2, 2, 2) */
    uint8_t mask[7];        /* (7): an odd size, so what follows is unaligned in the file */
    uint8_t odd_name[1];    /* (1) */
} sample;

static void fill(sample *s, int seed)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            s->w[i][j] = (float)(i * 4 + j) * 0.5f - 1.0f + (float)seed;
    s->w[0][0] = -0.0f;
    s->w[0][1] = INFINITY;
    s->w[0][2] = NAN;
    for (int i = 0; i < 4; i++)
        s->b[i] = 1.0 / (i + 3 + seed);
    for (int i = 0; i < 6; i++)
        s->half[i / 3][i % 3] = (uint16_t)(0x3C00 + i + seed);
    for (int i = 0; i < 5; i++)
        s->bf[i] = (uint16_t)(0xBF80 - i - seed);
    s->step = INT64_MIN + 7 + seed;
    for (int i = 0; i < 8; i++)
        s->labels[i / 4][(i / 2) % 2][i % 2] = -i * 1000003 + seed;
    for (int i = 0; i < 7; i++)
        s->mask[i] = (uint8_t)(255 - i - seed);
    s->odd_name[0] = 42;
}

static const char *const odd = "layer \"1\"\\\xc3\xa9\n.w"; /* quote, backslash, é, newline */

static void describe(const sample *s, fg_ckpt_tensor *t)
{
    fg_ckpt_tensor list[NT] = {
        { "fc1.weight", FG_F32, 2, { 3, 4 }, s->w },
        { "fc1.bias", FG_F64, 1, { 4 }, s->b },
        { "emb.half", FG_F16, 2, { 2, 3 }, s->half },
        { "emb.bf16", FG_BF16, 1, { 5 }, s->bf },
        { "optimizer.step", FG_I64, 0, { 0 }, &s->step },
        { "empty", FG_F32, 2, { 0, 3 }, NULL },
        { "labels", FG_I32, 3, { 2, 2, 2 }, s->labels },
        { "mask", FG_U8, 1, { 7 }, s->mask },
        { odd, FG_U8, 1, { 1 }, s->odd_name },
    };
    memcpy(t, list, sizeof list);
}

static const char *const meta_keys[] = { "epoch", "quote", "unicode", "empty" };
static const char *const meta_values[] = { "3", "a\"b\\c\nd\te\x01", "h\xc3\xa9llo \xe2\x9c\x93",
                                           "" };

static void check_read_back(const char *path, const sample *want, fg_ckpt_tensor *t)
{
    fg_ckpt *c = NULL;
    fg_error err = { 0 };
    CHECK_STATUS(fg_ckpt_open(path, &c, &err), FG_OK);
    if (!c) {
        fprintf(stderr, "open: %s\n", err.message);
        return;
    }
    CHECK_STR(fg_ckpt_path(c), path);
    CHECK(fg_ckpt_tensor_count(c) == NT);
    for (size_t i = 0; i < NT; i++)
        CHECK_STR(fg_ckpt_tensor_name(c, i), t[i].name); /* packed in the caller's order */
    CHECK(fg_ckpt_tensor_name(c, NT) == NULL);

    CHECK(fg_ckpt_meta_count(c) == 4);
    for (size_t i = 0; i < 4; i++) {
        CHECK_STR(fg_ckpt_meta_key(c, i), meta_keys[i]);
        CHECK_STR(fg_ckpt_meta(c, meta_keys[i]), meta_values[i]);
    }
    CHECK(fg_ckpt_meta(c, "missing") == NULL);

    sample got;
    memset(&got, 0, sizeof got); /* padding as in `want`; every field is read over */
    fg_ckpt_tensor back[NT];
    describe(&got, back);
    for (size_t i = 0; i < NT; i++) {
        fg_dtype dt = 0;
        int rank = -1;
        int64_t shape[FG_MAX_DIMS];
        CHECK_STATUS(fg_ckpt_tensor_info(c, t[i].name, &dt, &rank, shape, &err), FG_OK);
        CHECK(dt == t[i].dtype);
        CHECK(rank == t[i].rank);
        CHECK(memcmp(shape, t[i].shape, (size_t)rank * sizeof *shape) == 0);
        void *dst = (void *)back[i].data;
        fg_status st = fg_ckpt_read_tensor(c, t[i].name, t[i].dtype, t[i].rank, t[i].shape,
                                           dst, &err);
        CHECK_STATUS(st, FG_OK);
        if (st != FG_OK)
            fprintf(stderr, "  %s\n", err.message);
    }
    CHECK(memcmp(&got, want, sizeof got) == 0); /* bitwise: NaN and -0 included */
    fg_ckpt_close(c);
}

/* The layout: 8-byte length, a space-padded header of a multiple of 8, then the data. */
static void check_layout(const char *path, size_t data_bytes)
{
    size_t n = 0;
    unsigned char *p = read_bytes(path, &n);
    CHECK(p != NULL);
    if (!p)
        return;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | p[i];
    CHECK(hlen % 8 == 0);
    CHECK(n == 8 + hlen + data_bytes);
    CHECK(p[8] == '{');
    size_t last = 8 + (size_t)hlen - 1;
    while (last > 8 && p[last] == ' ')
        last--;
    CHECK(p[last] == '}');
    free(p);
}

/* Only PATH is left in the folder: no temporary survives a successful write. */
static int count_files(void)
{
    int n = 0;
    DIR *d = opendir(".");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    char dir[512];
    test_dir_enter(dir, sizeof dir, "ckpt-roundtrip");
    const char *path = "ckpt.safetensors";

    sample s;
    memset(&s, 0, sizeof s); /* the struct's padding is compared too */
    fill(&s, 0);
    fg_ckpt_tensor t[NT];
    describe(&s, t);
    fg_error err = { 0 };
    fg_status st = fg_ckpt_write_atomic(path, t, NT, meta_keys, meta_values, 4, &err);
    CHECK_STATUS(st, FG_OK);
    if (st != FG_OK)
        fprintf(stderr, "write: %s\n", err.message);
    size_t data_bytes = sizeof s.w + sizeof s.b + sizeof s.half + sizeof s.bf + sizeof s.step +
                        sizeof s.labels + sizeof s.mask + sizeof s.odd_name;
    check_layout(path, data_bytes);
    check_read_back(path, &s, t);
    CHECK(count_files() == 1);

    /* Replacing an existing checkpoint: the reader sees the new one, no leftover. */
    sample s2;
    memset(&s2, 0, sizeof s2);
    fill(&s2, 1);
    fg_ckpt_tensor t2[NT];
    describe(&s2, t2);
    CHECK_STATUS(fg_ckpt_write_atomic(path, t2, NT, meta_keys, meta_values, 4, &err), FG_OK);
    check_read_back(path, &s2, t2);
    CHECK(count_files() == 1);

    /* An absolute path, no metadata, no tensors: a valid, empty checkpoint. */
    char abs[600];
    snprintf(abs, sizeof abs, "%s/empty.safetensors", dir);
    CHECK_STATUS(fg_ckpt_write_atomic(abs, NULL, 0, NULL, NULL, 0, &err), FG_OK);
    fg_ckpt *c = NULL;
    CHECK_STATUS(fg_ckpt_open(abs, &c, &err), FG_OK);
    if (c) {
        CHECK(fg_ckpt_tensor_count(c) == 0);
        CHECK(fg_ckpt_meta_count(c) == 0);
        fg_ckpt_close(c);
    }
    size_t n = 0;
    unsigned char *p = read_bytes(abs, &n);
    CHECK(p && n == 16 && memcmp(p + 8, "{}      ", 8) == 0);
    free(p);
    fg_ckpt_close(NULL); /* closing nothing is allowed, as free(NULL) is */

    if (fg_test_failures == 0)
        test_dir_remove(dir);
    return fg_test_report("checkpoint.roundtrip");
}
