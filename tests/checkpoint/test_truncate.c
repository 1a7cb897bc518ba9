/* Every prefix of a small valid checkpoint, from 0 bytes to the whole file: all but the
 * whole file must be refused (the header length or a tensor's end lies beyond the end),
 * each with a message naming the file; the whole file opens and reads back. */
#include "ckpt_test.h"

int main(void)
{
    char dir[512];
    test_dir_enter(dir, sizeof dir, "ckpt-truncate");
    float w[3][5];   /* (3, 5) */
    int64_t step = 12345;
    uint8_t mask[3] = { 1, 0, 1 };
    for (int i = 0; i < 15; i++)
        w[i / 5][i % 5] = (float)i * 0.25f;
    fg_ckpt_tensor t[3] = {
        { "w", FG_F32, 2, { 3, 5 }, w },
        { "step", FG_I64, 0, { 0 }, &step },
        { "mask", FG_U8, 1, { 3 }, mask },
    };
    const char *keys[] = { "epoch" }, *values[] = { "2" };
    fg_error err = { 0 };
    CHECK_STATUS(fg_ckpt_write_atomic("full.safetensors", t, 3, keys, values, 1, &err), FG_OK);
    size_t full_len = 0;
    unsigned char *full = read_bytes("full.safetensors", &full_len);
    CHECK(full != NULL && full_len > 8);
    if (!full)
        return fg_test_report("checkpoint.truncate");

    const char *path = "trunc.safetensors";
    int refused = 0;
    for (size_t len = 0; len <= full_len; len++) {
        CHECK(write_bytes(path, full, len) == 0);
        fg_ckpt *c = NULL;
        fg_status st = fg_ckpt_open(path, &c, &err);
        if (len < full_len) {
            if (st != FG_INVALID_ARGUMENT || c != NULL ||
                strncmp(err.message, "trunc.safetensors: ", 19) != 0) {
                fprintf(stderr, "length %zu of %zu: got %s: %s\n", len, full_len,
                        fg_status_name(st), st == FG_OK ? "(opened)" : err.message);
                fg_test_failures++;
            }
            refused += st != FG_OK;
            fg_ckpt_close(c);
            continue;
        }
        CHECK_STATUS(st, FG_OK);
        if (!c)
            continue;
        float wr[3][5];
        int64_t sr = 0;
        uint8_t mr[3] = { 0 };
        CHECK_STATUS(fg_ckpt_read_tensor(c, "w", FG_F32, 2, t[0].shape, wr, &err), FG_OK);
        CHECK_STATUS(fg_ckpt_read_tensor(c, "step", FG_I64, 0, NULL, &sr, &err), FG_OK);
        CHECK_STATUS(fg_ckpt_read_tensor(c, "mask", FG_U8, 1, t[2].shape, mr, &err), FG_OK);
        CHECK(memcmp(wr, w, sizeof w) == 0 && sr == step && memcmp(mr, mask, 3) == 0);
        CHECK_STR(fg_ckpt_meta(c, "epoch"), "2");
        fg_ckpt_close(c);
    }
    CHECK(refused == (int)full_len);

    /* The messages at the interesting cut points. */
    CHECK(write_bytes(path, full, 3) == 0);
    fg_ckpt *c = NULL;
    CHECK_STATUS(fg_ckpt_open(path, &c, &err), FG_INVALID_ARGUMENT);
    fg_ckpt_close(c); /* NULL unless the check above failed */
    CHECK_STR(err.message, "trunc.safetensors: file is 3 bytes, too short for the 8-byte header length");
    CHECK(write_bytes(path, full, 20) == 0);
    CHECK_STATUS(fg_ckpt_open(path, &c, &err), FG_INVALID_ARGUMENT);
    fg_ckpt_close(c); /* NULL unless the check above failed */
    CHECK_CONTAINS(err.message, "trunc.safetensors: header length ");
    CHECK_CONTAINS(err.message, " exceeds the 12 bytes after it");
    CHECK(write_bytes(path, full, full_len - 1) == 0);
    CHECK_STATUS(fg_ckpt_open(path, &c, &err), FG_INVALID_ARGUMENT);
    fg_ckpt_close(c); /* NULL unless the check above failed */
    CHECK_CONTAINS(err.message, "trunc.safetensors: tensor 'mask': data_offsets [68, 71] end beyond the "
                           "data section's 70 bytes");
    free(full);

    if (fg_test_failures == 0)
        test_dir_remove(dir);
    return fg_test_report("checkpoint.truncate");
}
