/* 5000 mutants of a valid checkpoint (random bytes overwritten, most in the header and its
 * length, some files cut short), each opened and, when it opens, read tensor by tensor.
 * Nothing may crash or read out of bounds (the _asan build checks that); every refusal
 * names the file; every file that opens must read back in full. Fixed seed: reproducible. */
#include "ckpt_test.h"

#define ITERATIONS 5000

/* xorshift64*: small, seedable, no global state. */
static uint64_t next_random(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static size_t below(uint64_t *s, size_t n)
{
    return (size_t)(next_random(s) % n);
}

/* Bytes that turn JSON into other JSON (or almost) more often than random ones do. */
static const unsigned char interesting[] = { '{', '}', '[', ']', '"', ':', ',', '-', '0', '1',
                                             '9', '.', 'e', ' ', '\\', 'n', 0, 0x7f, 0x80, 0xff };

static void mutate(unsigned char *p, size_t *n, size_t header_end, uint64_t *s)
{
    size_t edits = 1 + below(s, 4);
    for (size_t e = 0; e < edits; e++) {
        size_t at;
        switch (below(s, 10)) {
        case 0: at = below(s, 8); break;                   /* the length prefix */
        case 1: case 2: case 3: case 4: case 5: case 6:
            at = 8 + below(s, header_end - 8); break;       /* the header */
        default: at = below(s, *n); break;                  /* anywhere */
        }
        p[at] = below(s, 2) ? interesting[below(s, sizeof interesting)]
                            : (unsigned char)next_random(s);
    }
    if (below(s, 20) == 0)
        *n = below(s, *n + 1);
}

/* A file that opened: every tensor must read with its own dtype and shape. */
static void read_all(fg_ckpt *c, size_t file_len, int iteration)
{
    fg_error err = { 0 };
    for (size_t i = 0; i < fg_ckpt_tensor_count(c); i++) {
        const char *name = fg_ckpt_tensor_name(c, i);
        fg_dtype dt;
        int rank;
        int64_t shape[FG_MAX_DIMS], bytes = 0;
        CHECK_STATUS(fg_ckpt_tensor_info(c, name, &dt, &rank, shape, &err), FG_OK);
        CHECK(fg_ckpt_byte_size(dt, rank, shape, &bytes) == 0 && (size_t)bytes <= file_len);
        void *dst = malloc(bytes > 0 ? (size_t)bytes : 1);
        fg_status st = fg_ckpt_read_tensor(c, name, dt, rank, shape, dst, &err);
        if (st != FG_OK) {
            fprintf(stderr, "iteration %d: tensor '%s' opened but does not read: %s\n",
                    iteration, name, err.message);
            fg_test_failures++;
        }
        free(dst);
    }
}

int main(void)
{
    char dir[512];
    test_dir_enter(dir, sizeof dir, "ckpt-fuzz");
    float w[4][6];    /* (4, 6) */
    double b[6];      /* (6) */
    uint16_t h[3];    /* (3) F16 */
    int32_t idx[2][2];/* (2, 2) */
    for (int i = 0; i < 24; i++)
        w[i / 6][i % 6] = (float)i;
    for (int i = 0; i < 6; i++)
        b[i] = -i;
    for (int i = 0; i < 3; i++)
        h[i] = (uint16_t)(0x3C00 + i);
    for (int i = 0; i < 4; i++)
        idx[i / 2][i % 2] = i;
    fg_ckpt_tensor t[5] = {
        { "fc.weight", FG_F32, 2, { 4, 6 }, w },
        { "fc.bias", FG_F64, 1, { 6 }, b },
        { "half", FG_F16, 1, { 3 }, h },
        { "idx", FG_I32, 2, { 2, 2 }, idx },
        { "none", FG_U8, 1, { 0 }, NULL },
    };
    const char *keys[] = { "epoch", "step", "rng" }, *values[] = { "4", "1000", "0123456789abcdef" };
    fg_error err = { 0 };
    CHECK_STATUS(fg_ckpt_write_atomic("base.safetensors", t, 5, keys, values, 3, &err), FG_OK);
    size_t base_len = 0;
    unsigned char *base = read_bytes("base.safetensors", &base_len);
    CHECK(base != NULL && base_len > 8);
    if (!base)
        return fg_test_report("checkpoint.fuzz");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = (header_len << 8) | base[i];
    size_t header_end = 8 + (size_t)header_len;
    unsigned char *p = malloc(base_len);

    uint64_t seed = UINT64_C(0x9E3779B97F4A7C15);
    int opened = 0, refused = 0;
    for (int it = 0; it < ITERATIONS; it++) {
        size_t n = base_len;
        memcpy(p, base, base_len);
        mutate(p, &n, header_end, &seed);
        CHECK(write_bytes("fuzz.safetensors", p, n) == 0);
        fg_ckpt *c = NULL;
        fg_status st = fg_ckpt_open("fuzz.safetensors", &c, &err);
        if (st == FG_OK) {
            opened++;
            read_all(c, n, it);
            fg_ckpt_close(c);
        } else {
            refused++;
            if (st != FG_INVALID_ARGUMENT || strncmp(err.message, "fuzz.safetensors: ", 18) != 0) {
                fprintf(stderr, "iteration %d: %s: %s\n", it, fg_status_name(st), err.message);
                fg_test_failures++;
            }
        }
    }
    printf("checkpoint.fuzz: %d mutants opened, %d refused\n", opened, refused);
    CHECK(opened > 0 && refused > 0); /* both paths were exercised */
    free(p);
    free(base);

    if (fg_test_failures == 0)
        test_dir_remove(dir);
    return fg_test_report("checkpoint.fuzz");
}
