/* The caller's expectation against the file: a wrong dtype, shape or rank, or a missing
 * name, is refused with a message naming the tensor, what was expected and what was found,
 * and the destination is left untouched. */
#include "ckpt_test.h"

static const char *const path = "ckpt.safetensors";

/* Reads `name` into a sentinel-filled buffer, expects `status` and the exact message, and
 * checks the buffer was not written. */
static void expect_read(int line, fg_ckpt *c, const char *name, fg_dtype dtype, int rank,
                        const int64_t *shape, fg_status status, const char *message)
{
    unsigned char dst[64];
    memset(dst, 0xEE, sizeof dst);
    fg_error err = { 0 };
    fg_status st = fg_ckpt_read_tensor(c, name, dtype, rank, shape, dst, &err);
    int untouched = 1;
    for (size_t i = 0; i < sizeof dst; i++)
        untouched &= dst[i] == 0xEE;
    if (st != status || err.status != status || strcmp(err.message, message) != 0 || !untouched) {
        fprintf(stderr, "line %d: %s\n  got:      %s: %s%s\n  expected: %s: %s\n", line, name,
                fg_status_name(st), err.message, untouched ? "" : " (dst written)",
                fg_status_name(status), message);
        fg_test_failures++;
    }
}
#define EXPECT_READ(...) expect_read(__LINE__, __VA_ARGS__)

int main(void)
{
    char dir[512];
    test_dir_enter(dir, sizeof dir, "ckpt-expect");
    float w[2][3] = { { 1, 2, 3 }, { 4, 5, 6 } };
    int64_t b[3] = { -1, 0, 1 };
    double s = 2.5;
    fg_ckpt_tensor t[3] = {
        { "w", FG_F32, 2, { 2, 3 }, w },
        { "b", FG_I64, 1, { 3 }, b },
        { "s", FG_F64, 0, { 0 }, &s },
    };
    fg_error err = { 0 };
    CHECK_STATUS(fg_ckpt_write_atomic(path, t, 3, NULL, NULL, 0, &err), FG_OK);
    fg_ckpt *c = NULL;
    CHECK_STATUS(fg_ckpt_open(path, &c, &err), FG_OK);
    if (!c)
        return fg_test_report("checkpoint.expect");

    const int64_t s23[] = { 2, 3 }, s32[] = { 3, 2 }, s6[] = { 6 }, s1[] = { 1 }, s3[] = { 3 };
    const int64_t s231[] = { 2, 3, 1 };
    EXPECT_READ(c, "w", FG_F16, 2, s23, FG_INCOMPATIBLE,
                "ckpt.safetensors: tensor 'w': expected dtype F16 but the file holds F32");
    EXPECT_READ(c, "w", (fg_dtype)0, 2, s23, FG_INCOMPATIBLE,
                "ckpt.safetensors: tensor 'w': expected dtype (invalid) but the file holds F32");
    EXPECT_READ(c, "w", FG_F32, 2, s32, FG_INCOMPATIBLE,
                "ckpt.safetensors: tensor 'w': expected shape (3, 2) but the file holds (2, 3)");
    EXPECT_READ(c, "w", FG_F32, 1, s6, FG_INCOMPATIBLE,
                "ckpt.safetensors: tensor 'w': expected shape (6) but the file holds (2, 3)");
    EXPECT_READ(c, "w", FG_F32, 3, s231, FG_INCOMPATIBLE,
                "ckpt.safetensors: tensor 'w': expected shape (2, 3, 1) but the file holds (2, 3)");
    EXPECT_READ(c, "b", FG_I32, 1, s3, FG_INCOMPATIBLE,
                "ckpt.safetensors: tensor 'b': expected dtype I32 but the file holds I64");
    EXPECT_READ(c, "s", FG_F64, 1, s1, FG_INCOMPATIBLE,
                "ckpt.safetensors: tensor 's': expected shape (1) but the file holds ()");
    EXPECT_READ(c, "b", FG_I64, 0, NULL, FG_INCOMPATIBLE,
                "ckpt.safetensors: tensor 'b': expected shape () but the file holds (3)");
    EXPECT_READ(c, "x", FG_F32, 2, s23, FG_NOT_FOUND,
                "ckpt.safetensors: no tensor 'x' (the file holds 3 tensors)");
    EXPECT_READ(c, "W", FG_F32, 2, s23, FG_NOT_FOUND,
                "ckpt.safetensors: no tensor 'W' (the file holds 3 tensors)");
    EXPECT_READ(c, "w", FG_F32, 9, s23, FG_INVALID_ARGUMENT,
                "ckpt.safetensors: tensor 'w': the caller's expected rank 9 is invalid");
    EXPECT_READ(c, "w", FG_F32, 2, NULL, FG_INVALID_ARGUMENT,
                "ckpt.safetensors: tensor 'w': the caller's expected rank 2 is invalid "
                "(shape is NULL)");

    /* The right expectation reads; a scalar takes a NULL shape. */
    float wr[2][3];
    double sr = 0;
    CHECK_STATUS(fg_ckpt_read_tensor(c, "w", FG_F32, 2, s23, wr, &err), FG_OK);
    CHECK(memcmp(wr, w, sizeof w) == 0);
    CHECK_STATUS(fg_ckpt_read_tensor(c, "s", FG_F64, 0, NULL, &sr, &err), FG_OK);
    CHECK(sr == 2.5);

    /* Info without reading; every output is optional. */
    fg_dtype dt = 0;
    int rank = -1;
    int64_t shape[FG_MAX_DIMS] = { 0 };
    CHECK_STATUS(fg_ckpt_tensor_info(c, "b", &dt, &rank, shape, &err), FG_OK);
    CHECK(dt == FG_I64 && rank == 1 && shape[0] == 3);
    CHECK_STATUS(fg_ckpt_tensor_info(c, "b", NULL, NULL, NULL, &err), FG_OK);
    CHECK_STATUS(fg_ckpt_tensor_info(c, "nope", &dt, &rank, shape, &err), FG_NOT_FOUND);
    CHECK_STR(err.message, "ckpt.safetensors: no tensor 'nope' (the file holds 3 tensors)");
    CHECK_STATUS(fg_ckpt_tensor_info(c, "nope", NULL, NULL, NULL, NULL), FG_NOT_FOUND);

    /* The file shrinks under an open reader: a read error, not a short read. */
    CHECK(truncate(path, 8 + 8) == 0);
    CHECK_STATUS(fg_ckpt_read_tensor(c, "s", FG_F64, 0, NULL, &sr, &err), FG_INVALID_ARGUMENT);
    CHECK_CONTAINS(err.message, "ckpt.safetensors: reading tensor 's' at byte ");
    CHECK_CONTAINS(err.message, ": unexpected end of file");
    fg_ckpt_close(c);

    if (fg_test_failures == 0)
        test_dir_remove(dir);
    return fg_test_report("checkpoint.expect");
}
