/* Writes the sample checkpoint that read_safetensors.py (an independent, stdlib-only
 * reader) checks: every dtype holding 0, 1, 2, ... so the script can verify values and byte
 * order, an empty tensor, a name that needs JSON escaping, and two metadata entries. */
#include "ckpt_test.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
        return 2;
    }
    float f32[2][3];        /* (2, 3) */
    double f64[5];          /* (5) */
    int32_t i32[4];         /* (4) */
    int64_t i64[3];         /* (3) */
    uint8_t u8[2][2][2];    /* (2, 2, 2) */
    const uint16_t f16[4] = { 0x0000, 0x3C00, 0x4000, 0x4200 }; /* 0, 1, 2, 3 in binary16 */
    const uint16_t bf16[3] = { 0x0000, 0x3F80, 0x4000 };        /* 0, 1, 2 in bfloat16 */
    uint8_t quoted[2] = { 7, 9 };
    for (int i = 0; i < 6; i++)
        f32[i / 3][i % 3] = (float)i;
    for (int i = 0; i < 5; i++)
        f64[i] = i;
    for (int i = 0; i < 4; i++)
        i32[i] = i;
    for (int i = 0; i < 3; i++)
        i64[i] = i;
    for (int i = 0; i < 8; i++)
        u8[i / 4][(i / 2) % 2][i % 2] = (uint8_t)i;
    fg_ckpt_tensor t[9] = {
        { "arange.F32", FG_F32, 2, { 2, 3 }, f32 },
        { "arange.F64", FG_F64, 1, { 5 }, f64 },
        { "arange.I32", FG_I32, 1, { 4 }, i32 },
        { "arange.I64", FG_I64, 1, { 3 }, i64 },
        { "arange.U8", FG_U8, 3, { 2, 2, 2 }, u8 },
        { "arange.F16", FG_F16, 1, { 4 }, f16 },
        { "arange.BF16", FG_BF16, 1, { 3 }, bf16 },
        { "empty", FG_F32, 2, { 0, 4 }, NULL },
        { "a \"quoted\" back\\slash", FG_U8, 1, { 2 }, quoted },
    };
    const char *keys[] = { "epoch", "note" }, *values[] = { "7", "a \"quoted\" back\\slash" };
    fg_error err = { 0 };
    if (fg_ckpt_write_atomic(argv[1], t, 9, keys, values, 2, &err) != FG_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    printf("wrote %s\n", argv[1]);
    return 0;
}
