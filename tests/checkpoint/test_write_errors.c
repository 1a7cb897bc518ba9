/* The writer refuses bad input before it creates anything: each case checks the status,
 * the exact message and that neither PATH nor a temporary was left behind. Also covers
 * fg_ckpt_is_temporary and the reader's answer for a missing file. */
#include <sys/stat.h>

#include "ckpt_test.h"

static const char *const path = "ckpt.safetensors";

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int folder_is_empty(void)
{
    DIR *d = opendir(".");
    struct dirent *e;
    int empty = 1;
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            empty = 0;
    if (d)
        closedir(d);
    return empty;
}

static void expect_refused(int line, const fg_ckpt_tensor *t, size_t n, const char *const *keys,
                           const char *const *values, size_t meta_n, const char *message)
{
    fg_error err = { 0 };
    fg_status st = fg_ckpt_write_atomic(path, t, n, keys, values, meta_n, &err);
    if (st != FG_INVALID_ARGUMENT || err.status != st || strcmp(err.message, message) != 0 ||
        !folder_is_empty()) {
        fprintf(stderr, "line %d: expected a refusal\n  got:      %s: %s\n  expected: %s\n",
                line, fg_status_name(st), err.message, message);
        fg_test_failures++;
    }
}
#define EXPECT_REFUSED(t, n, k, v, m, msg) expect_refused(__LINE__, t, n, k, v, m, msg)

int main(void)
{
    char dir[512];
    test_dir_enter(dir, sizeof dir, "ckpt-write-errors");
    float data[6] = { 1, 2, 3, 4, 5, 6 };
    const char *k1[] = { "epoch" }, *v1[] = { "1" };

    fg_ckpt_tensor dup[2] = { { "a", FG_F32, 1, { 2 }, data }, { "a", FG_F32, 1, { 2 }, data } };
    EXPECT_REFUSED(dup, 2, NULL, NULL, 0, "ckpt.safetensors: tensor name 'a' appears twice");

    fg_ckpt_tensor unnamed[2] = { { "a", FG_F32, 1, { 2 }, data }, { "", FG_F32, 1, { 2 }, data } };
    EXPECT_REFUSED(unnamed, 2, NULL, NULL, 0, "ckpt.safetensors: tensor 1 has no name");
    unnamed[1].name = NULL;
    EXPECT_REFUSED(unnamed, 2, NULL, NULL, 0, "ckpt.safetensors: tensor 1 has no name");

    fg_ckpt_tensor reserved = { "__metadata__", FG_F32, 1, { 2 }, data };
    EXPECT_REFUSED(&reserved, 1, NULL, NULL, 0,
                   "ckpt.safetensors: tensor 0: the name '__metadata__' is reserved");

    fg_ckpt_tensor bad_utf8 = { "w\xff", FG_F32, 1, { 2 }, data };
    EXPECT_REFUSED(&bad_utf8, 1, NULL, NULL, 0, "ckpt.safetensors: tensor 0: name is not valid UTF-8");
    bad_utf8.name = "w\xed\xa0\x80"; /* a UTF-16 surrogate encoded as UTF-8 */
    EXPECT_REFUSED(&bad_utf8, 1, NULL, NULL, 0, "ckpt.safetensors: tensor 0: name is not valid UTF-8");
    bad_utf8.name = "w\xc0\xaf"; /* an overlong '/' */
    EXPECT_REFUSED(&bad_utf8, 1, NULL, NULL, 0, "ckpt.safetensors: tensor 0: name is not valid UTF-8");

    fg_ckpt_tensor bad_dtype = { "w", (fg_dtype)99, 1, { 2 }, data };
    EXPECT_REFUSED(&bad_dtype, 1, NULL, NULL, 0, "ckpt.safetensors: tensor 'w': dtype 99 is unknown");

    fg_ckpt_tensor bad_rank = { "w", FG_F32, 9, { 1 }, data };
    EXPECT_REFUSED(&bad_rank, 1, NULL, NULL, 0,
                   "ckpt.safetensors: tensor 'w': rank 9 is outside [0, 8]");
    bad_rank.rank = -1;
    EXPECT_REFUSED(&bad_rank, 1, NULL, NULL, 0,
                   "ckpt.safetensors: tensor 'w': rank -1 is outside [0, 8]");

    fg_ckpt_tensor negative = { "w", FG_F32, 2, { 2, -1 }, data };
    EXPECT_REFUSED(&negative, 1, NULL, NULL, 0,
                   "ckpt.safetensors: tensor 'w': shape (2, -1) is negative or overflows a "
                   "64-bit byte count");
    fg_ckpt_tensor huge = { "w", FG_F64, 2, { INT64_C(1) << 32, INT64_C(1) << 31 }, data };
    EXPECT_REFUSED(&huge, 1, NULL, NULL, 0,
                   "ckpt.safetensors: tensor 'w': shape (4294967296, 2147483648) is negative or "
                   "overflows a 64-bit byte count");

    fg_ckpt_tensor no_data = { "w", FG_F32, 1, { 2 }, NULL };
    EXPECT_REFUSED(&no_data, 1, NULL, NULL, 0, "ckpt.safetensors: tensor 'w': data is NULL for 8 bytes");

    fg_ckpt_tensor ok = { "w", FG_F32, 2, { 2, 3 }, data };
    const char *dup_keys[] = { "epoch", "step", "epoch" }, *dup_values[] = { "1", "2", "3" };
    EXPECT_REFUSED(&ok, 1, dup_keys, dup_values, 3,
                   "ckpt.safetensors: metadata key 'epoch' appears twice");
    const char *null_value[] = { NULL };
    EXPECT_REFUSED(&ok, 1, k1, null_value, 1, "ckpt.safetensors: metadata entry 0 has a NULL value");
    const char *null_key[] = { NULL };
    EXPECT_REFUSED(&ok, 1, null_key, v1, 1, "ckpt.safetensors: metadata entry 0 has a NULL key");
    const char *bad_value[] = { "\x80" };
    EXPECT_REFUSED(&ok, 1, k1, bad_value, 1,
                   "ckpt.safetensors: metadata 'epoch': value is not valid UTF-8");
    EXPECT_REFUSED(NULL, 1, NULL, NULL, 0, "ckpt.safetensors: NULL tensor or metadata array");
    EXPECT_REFUSED(&ok, 1, NULL, NULL, 1, "ckpt.safetensors: NULL tensor or metadata array");

    /* A folder that does not exist: the temporary cannot be created, and it says so. */
    fg_error err = { 0 };
    CHECK_STATUS(fg_ckpt_write_atomic("no/such/ckpt.safetensors", &ok, 1, k1, v1, 1, &err),
                 FG_INVALID_ARGUMENT);
    CHECK_CONTAINS(err.message, "no/such/ckpt.safetensors.tmp.");
    CHECK_CONTAINS(err.message, ": cannot create: No such file or directory");
    CHECK_STATUS(fg_ckpt_write_atomic("", &ok, 1, k1, v1, 1, &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "checkpoint path is empty");

    /* PATH is a folder: refused before any temporary is made, the folder left as it was. */
    CHECK(mkdir("taken", 0755) == 0);
    CHECK_STATUS(fg_ckpt_write_atomic("taken", &ok, 1, k1, v1, 1, &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "taken: is a folder, not a regular file: refusing to replace it");
    CHECK(rmdir("taken") == 0);
    CHECK(folder_is_empty());

    /* Reading a file that is not there, or a folder. */
    fg_ckpt *c = (fg_ckpt *)&err;
    CHECK_STATUS(fg_ckpt_open("missing.safetensors", &c, &err), FG_NOT_FOUND);
    CHECK_STR(err.message, "missing.safetensors: cannot open: No such file or directory");
    CHECK(c == NULL);
    CHECK_STATUS(fg_ckpt_open(".", &c, &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, ".: not a regular file");

    CHECK(exists(".") && !exists(path));
    CHECK(fg_ckpt_is_temporary("ckpt.safetensors.tmp.1234"));
    CHECK(fg_ckpt_is_temporary("/runs/a/ckpt.safetensors.tmp.1"));
    CHECK(!fg_ckpt_is_temporary("ckpt.safetensors"));
    CHECK(!fg_ckpt_is_temporary("/runs/x.tmp.y/ckpt.safetensors"));
    CHECK(!fg_ckpt_is_temporary("ckpt.tmp"));

    if (fg_test_failures == 0)
        test_dir_remove(dir);
    return fg_test_report("checkpoint.write_errors");
}
