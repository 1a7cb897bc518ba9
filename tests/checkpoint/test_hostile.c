/* Hostile files, each built by hand: the reader answers every one with FG_INVALID_ARGUMENT
 * and a message naming the file and the tensor or field at fault, never a crash. A few
 * odd-but-valid files must open. */
#include <fcntl.h>

#include "ckpt_test.h"

static const char *const path = "bad.safetensors";

typedef struct hostile_case {
    const char *header;
    size_t data_len;
    const char *message; /* exact, after "bad.safetensors: "; NULL: the file is valid */
} hostile_case;

#define T(dtype, shape, offsets) "{\"dtype\":" dtype ",\"shape\":" shape ",\"data_offsets\":" offsets "}"

static const hostile_case cases[] = {
    /* JSON itself */
    { "", 0, "header is not valid JSON: " },
    { "{\"a\": ", 0, "header is not valid JSON: " },
    { "{} {}", 0, "header is not valid JSON: end of file expected near '{' (header byte 4, " },
    { "{\"a\":" T("\"U8\"", "[1]", "[0,1]") ",\"a\":" T("\"U8\"", "[1]", "[1,2]") "}", 2,
      "header is not valid JSON: duplicate object key near '\"a\"' (header byte 56, line 1, "
      "column 56)" },
    { "{\"a\\u0000b\":" T("\"U8\"", "[1]", "[0,1]") "}", 1,
      "header is not valid JSON: NUL byte in object key not supported " },
    { "{\"a\":" T("\"U8\"", "[99999999999999999999]", "[0,1]") "}", 1,
      "header is not valid JSON: too big integer near '99999999999999999999' " },
    { "[1, 2]", 0, "header is an array, not a JSON object" },
    { "\"text\"", 0, "header is not valid JSON: '[' or '{' expected near '\"text\"' " },
    /* entries */
    { "{\"a\": 5}", 0, "tensor 'a': entry is an integer, not an object" },
    { "{\"a\": [1]}", 0, "tensor 'a': entry is an array, not an object" },
    { "{\"\":" T("\"U8\"", "[1]", "[0,1]") "}", 1, "a tensor has an empty name" },
    /* dtype */
    { "{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "tensor 'a': \"dtype\" is missing" },
    { "{\"a\":" T("3", "[1]", "[0,1]") "}", 1, "tensor 'a': \"dtype\" is an integer, not a string" },
    { "{\"a\":" T("\"F8_E4M3\"", "[1]", "[0,1]") "}", 1,
      "tensor 'a': unknown dtype 'F8_E4M3' (known: F32, F16, BF16, F64, I32, I64, U8)" },
    { "{\"a\":" T("\"f32\"", "[1]", "[0,4]") "}", 4,
      "tensor 'a': unknown dtype 'f32' (known: F32, F16, BF16, F64, I32, I64, U8)" },
    /* shape */
    { "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, "tensor 'a': \"shape\" is missing" },
    { "{\"a\":" T("\"U8\"", "4", "[0,4]") "}", 4, "tensor 'a': \"shape\" is an integer, not an array" },
    { "{\"a\":" T("\"U8\"", "[2,-1]", "[0,0]") "}", 0, "tensor 'a': shape[1] is -1, negative" },
    { "{\"a\":" T("\"U8\"", "[2.0]", "[0,2]") "}", 2,
      "tensor 'a': shape[0] is a real number, not an integer" },
    { "{\"a\":" T("\"U8\"", "[\"2\"]", "[0,2]") "}", 2, "tensor 'a': shape[0] is a string, not an integer" },
    { "{\"a\":" T("\"U8\"", "[null]", "[0,2]") "}", 2, "tensor 'a': shape[0] is null, not an integer" },
    { "{\"a\":" T("\"U8\"", "[1,1,1,1,1,1,1,1,1]", "[0,1]") "}", 1,
      "tensor 'a': shape has 9 dimensions, more than the 8 fulgur supports" },
    { "{\"a\":" T("\"F32\"", "[4294967296,4294967296]", "[0,0]") "}", 0,
      "tensor 'a': shape (4294967296, 4294967296) of F32 overflows a 64-bit byte count" },
    { "{\"a\":" T("\"F32\"", "[2305843009213693952]", "[0,0]") "}", 0,
      "tensor 'a': shape (2305843009213693952) of F32 overflows a 64-bit byte count" },
    { "{\"a\":" T("\"F64\"", "[9223372036854775807,2]", "[0,0]") "}", 0,
      "tensor 'a': shape (9223372036854775807, 2) of F64 overflows a 64-bit byte count" },
    /* data_offsets */
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "tensor 'a': \"data_offsets\" is missing" },
    { "{\"a\":" T("\"U8\"", "[1]", "{}") "}", 1, "tensor 'a': \"data_offsets\" is an object, not an array" },
    { "{\"a\":" T("\"U8\"", "[1]", "[0]") "}", 1, "tensor 'a': data_offsets has 1 elements, not 2" },
    { "{\"a\":" T("\"U8\"", "[1]", "[0,1,2]") "}", 2, "tensor 'a': data_offsets has 3 elements, not 2" },
    { "{\"a\":" T("\"U8\"", "[4]", "[0,\"4\"]") "}", 4,
      "tensor 'a': data_offsets[1] is a string, not an integer" },
    { "{\"a\":" T("\"U8\"", "[4]", "[0.5,4]") "}", 4,
      "tensor 'a': data_offsets[0] is a real number, not an integer" },
    { "{\"a\":" T("\"U8\"", "[8]", "[-4,4]") "}", 16, "tensor 'a': data_offsets [-4, 4] are negative" },
    { "{\"a\":" T("\"U8\"", "[4]", "[8,4]") "}", 16, "tensor 'a': data_offsets [8, 4] are reversed" },
    { "{\"a\":" T("\"U8\"", "[100]", "[0,100]") "}", 16,
      "tensor 'a': data_offsets [0, 100] end beyond the data section's 16 bytes" },
    { "{\"a\":" T("\"U8\"", "[4]", "[9223372036854775800,9223372036854775804]") "}", 16,
      "tensor 'a': data_offsets [9223372036854775800, 9223372036854775804] end beyond the data "
      "section's 16 bytes" },
    { "{\"fc1.weight\":" T("\"F32\"", "[256,784]", "[0,4000]") "}", 4000,
      "tensor 'fc1.weight': data_offsets [0, 4000] hold 4000 bytes but shape (256, 784) of F32 "
      "needs 802816" },
    { "{\"a\":" T("\"F16\"", "[]", "[0,4]") "}", 4,
      "tensor 'a': data_offsets [0, 4] hold 4 bytes but shape () of F16 needs 2" },
    { "{\"a\":" T("\"F32\"", "[2]", "[0,8]") ",\"b\":" T("\"F32\"", "[2]", "[4,12]") "}", 16,
      "tensor 'b': data_offsets [4, 12] overlap those of tensor 'a' [0, 8]" },
    { "{\"b\":" T("\"U8\"", "[2]", "[2,4]") ",\"a\":" T("\"U8\"", "[8]", "[0,8]") "}", 16,
      "tensor 'b': data_offsets [2, 4] overlap those of tensor 'a' [0, 8]" },
    { "{\"a\":" T("\"U8\"", "[8]", "[0,8]") ",\"b\":" T("\"U8\"", "[8]", "[0,8]") "}", 16,
      "tensor 'b': data_offsets [0, 8] overlap those of tensor 'a' [0, 8]" },
    /* __metadata__ */
    { "{\"__metadata__\":{\"epoch\":3}}", 0, "__metadata__ 'epoch': value is an integer, not a string" },
    { "{\"__metadata__\":{\"ok\":\"1\",\"lr\":0.1}}", 0,
      "__metadata__ 'lr': value is a real number, not a string" },
    { "{\"__metadata__\":{\"x\":null}}", 0, "__metadata__ 'x': value is null, not a string" },
    { "{\"__metadata__\":{\"x\":{\"y\":\"z\"}}}", 0, "__metadata__ 'x': value is an object, not a string" },
    { "{\"__metadata__\":\"x\"}", 0, "__metadata__ is a string, not an object" },
    { "{\"__metadata__\":[]}", 0, "__metadata__ is an array, not an object" },
    /* odd but valid */
    { "{}", 0, NULL },
    { "{}                      \n\t", 0, NULL },
    { "{\"__metadata__\":{}}", 0, NULL },
    { "{\"a\":" T("\"U8\"", "[0]", "[4,4]") ",\"b\":" T("\"U8\"", "[0]", "[4,4]") ",\"c\":" T("\"U8\"", "[8]", "[0,8]") "}", 8, NULL },
    { "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12],\"extra\":[1]}}", 16, NULL },
};

/* Writes the case, opens it, checks the outcome; a valid file must also read fully. */
static void run_case(size_t i, const hostile_case *hc)
{
    unsigned char data[4096] = { 0 };
    if (write_raw_ckpt(path, hc->header, data, hc->data_len) != 0) {
        fprintf(stderr, "case %zu: cannot write %s\n", i, path);
        fg_test_failures++;
        return;
    }
    fg_ckpt *c = (fg_ckpt *)data; /* open must clear it on failure */
    fg_error err = { 0 };
    fg_status st = fg_ckpt_open(path, &c, &err);
    char want[1024];
    if (hc->message) {
        snprintf(want, sizeof want, "%s: %s", path, hc->message);
        int ok = st == FG_INVALID_ARGUMENT && err.status == st && c == NULL &&
                 strncmp(err.message, want, strlen(want)) == 0;
        if (!ok) {
            fprintf(stderr, "case %zu: %s\n  got:      %s: %s\n  expected: invalid argument: %s\n",
                    i, hc->header, fg_status_name(st), err.message, want);
            fg_test_failures++;
        }
        return;
    }
    if (st != FG_OK) {
        fprintf(stderr, "case %zu: %s\n  expected to open, got: %s\n", i, hc->header, err.message);
        fg_test_failures++;
        return;
    }
    for (size_t k = 0; k < fg_ckpt_tensor_count(c); k++) {
        fg_dtype dt;
        int rank;
        int64_t shape[FG_MAX_DIMS];
        const char *name = fg_ckpt_tensor_name(c, k);
        CHECK_STATUS(fg_ckpt_tensor_info(c, name, &dt, &rank, shape, &err), FG_OK);
        CHECK_STATUS(fg_ckpt_read_tensor(c, name, dt, rank, shape, data, &err), FG_OK);
    }
    fg_ckpt_close(c);
}

/* A raw file of the given bytes, then open must fail with the message's prefix. */
static void expect_raw(int line, const void *bytes, size_t n, const char *message)
{
    fg_ckpt *c = NULL;
    fg_error err = { 0 };
    if (write_bytes(path, bytes, n) != 0) {
        fprintf(stderr, "line %d: cannot write %s\n", line, path);
        fg_test_failures++;
        return;
    }
    fg_status st = fg_ckpt_open(path, &c, &err);
    if (st != FG_INVALID_ARGUMENT || c != NULL || strncmp(err.message, message, strlen(message))) {
        fprintf(stderr, "line %d:\n  got:      %s: %s\n  expected: %s\n", line,
                fg_status_name(st), err.message, message);
        fg_test_failures++;
        fg_ckpt_close(c);
    }
}

static void le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

int main(void)
{
    char dir[512];
    test_dir_enter(dir, sizeof dir, "ckpt-hostile");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(i, &cases[i]);

    /* The length prefix. */
    unsigned char raw[64] = { 0 };
    expect_raw(__LINE__, raw, 0, "bad.safetensors: file is 0 bytes, too short for the 8-byte header length");
    expect_raw(__LINE__, raw, 7, "bad.safetensors: file is 7 bytes, too short for the 8-byte header length");
    expect_raw(__LINE__, raw, 8, "bad.safetensors: header is not valid JSON: ");
    le64(raw, UINT64_C(1) << 63);
    expect_raw(__LINE__, raw, 24,
               "bad.safetensors: header length 9223372036854775808 exceeds the 16 bytes after it");
    le64(raw, UINT64_MAX);
    expect_raw(__LINE__, raw, 8,
               "bad.safetensors: header length 18446744073709551615 exceeds the 0 bytes after it");
    le64(raw, 100);
    memcpy(raw + 8, "{}", 2);
    expect_raw(__LINE__, raw, 30, "bad.safetensors: header length 100 exceeds the 22 bytes after it");

    /* A length within the file but above the 100 MiB limit: a sparse file, never read. */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    le64(raw, (UINT64_C(100) << 20) + 1);
    CHECK(fd >= 0 && write(fd, raw, 8) == 8 && ftruncate(fd, (off_t)(8 + (UINT64_C(200) << 20))) == 0);
    if (fd >= 0)
        close(fd);
    fg_ckpt *c = NULL;
    fg_error err = { 0 };
    CHECK_STATUS(fg_ckpt_open(path, &c, &err), FG_INVALID_ARGUMENT);
    CHECK_STR(err.message, "bad.safetensors: header length 104857601 exceeds the 104857600-byte limit");

    /* A NUL byte inside the header, and nesting deep enough to exhaust a naive parser. */
    expect_raw(__LINE__, "\x03\0\0\0\0\0\0\0{}\0", 11, "bad.safetensors: header is not valid JSON: ");
    static char deep[8 + 20000];
    le64((unsigned char *)deep, 20000);
    memset(deep + 8, '[', 20000);
    expect_raw(__LINE__, deep, sizeof deep, "bad.safetensors: header is not valid JSON: ");

    if (fg_test_failures == 0)
        test_dir_remove(dir);
    return fg_test_report("checkpoint.hostile");
}
