/* f16 / bf16 reductions of comm.mpi (mpi_half.h). The conversions are those of
 * kernels/cpu/half.h (F. Giesen's, round to nearest even), repeated here because a plugin
 * includes only the SDK and its own files. */
#include <string.h>

#include "mpi_half.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float fg_mpi_f16_to_f32(uint16_t h)
{
    const uint32_t shifted_exp = 0x7c00u << 13;
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    uint32_t exp = shifted_exp & o;
    o += (uint32_t)(127 - 15) << 23;
    if (exp == shifted_exp) o += (uint32_t)(128 - 16) << 23; /* inf, NaN */
    else if (exp == 0) o = bits(from_bits(o + (1u << 23)) - from_bits(113u << 23));
    return from_bits(o | ((uint32_t)h & 0x8000u) << 16);
}

uint16_t fg_mpi_f32_to_f16(float f)
{
    const uint32_t f32_inf = 255u << 23, f16_max = (127u + 16) << 23;
    const uint32_t denorm_magic_bits = ((127u - 15) + (23 - 10) + 1) << 23;
    uint32_t u = bits(f);
    uint32_t sign = u & 0x80000000u;
    u ^= sign;
    uint32_t o;
    if (u >= f16_max) /* beyond the largest finite half: inf, or NaN kept quiet */
        o = u > f32_inf ? (0x7e00u | ((u >> 13) & 0x3ffu)) : 0x7c00u;
    else if (u < (113u << 23)) /* a half subnormal or zero: the FPU rounds the addition */
        o = bits(from_bits(u) + from_bits(denorm_magic_bits)) - denorm_magic_bits;
    else /* normal: rebias, round half up or (odd mantissa) to even */
        o = (u + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
    return (uint16_t)(o | (sign >> 16));
}

float fg_mpi_bf16_to_f32(uint16_t b)
{
    return from_bits((uint32_t)b << 16);
}

uint16_t fg_mpi_f32_to_bf16(float f)
{
    uint32_t u = bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

int fg_mpi_is_half(uint32_t dtype)
{
    return dtype == FG_F16 || dtype == FG_BF16;
}

/* inout[i] = round(in[i] (+ or max) inout[i]), in f32; the MPI_User_function signature. */
#define HALF_OP(name, to_f32, from_f32, combine)                                           \
    static void name(void *in, void *inout, int *len, MPI_Datatype *dt)                    \
    {                                                                                      \
        (void)dt;                                                                          \
        const uint16_t *a = in;                                                            \
        uint16_t *b = inout;                                                               \
        for (int i = 0; i < *len; i++) {                                                   \
            float x = to_f32(a[i]), y = to_f32(b[i]);                                      \
            b[i] = from_f32(combine);                                                      \
        }                                                                                  \
    }

HALF_OP(sum_f16, fg_mpi_f16_to_f32, fg_mpi_f32_to_f16, x + y)
HALF_OP(sum_bf16, fg_mpi_bf16_to_f32, fg_mpi_f32_to_bf16, x + y)
HALF_OP(max_f16, fg_mpi_f16_to_f32, fg_mpi_f32_to_f16, (x > y || x != x) ? x : y)
HALF_OP(max_bf16, fg_mpi_bf16_to_f32, fg_mpi_f32_to_bf16, (x > y || x != x) ? x : y)

/* [f16 sum, bf16 sum, f16 max, bf16 max]; MPI_OP_NULL until first used. */
static MPI_Op ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

fg_status fg_mpi_reduce_op_for(uint32_t op, uint32_t dtype, const char *what, MPI_Op *out,
                               fg_error *err)
{
    fg_status st = fg_mpi_reduce_op(op, what, out, err);
    if (st != FG_OK || !fg_mpi_is_half(dtype)) return st;
    static MPI_User_function *const fns[4] = {sum_f16, sum_bf16, max_f16, max_bf16};
    int k = (dtype == FG_BF16) + 2 * (op == FG_REDUCE_MAX);
    if (ops[k] == MPI_OP_NULL) {
        int rc = MPI_Op_create(fns[k], 1, &ops[k]);
        if (rc != MPI_SUCCESS) {
            ops[k] = MPI_OP_NULL;
            return fg_mpi_fail(rc, "MPI_Op_create (half reduction)", err);
        }
    }
    *out = ops[k];
    return FG_OK;
}

void fg_mpi_half_scale_average(void *buf, size_t count, uint32_t dtype, int size)
{
    uint16_t *h = buf;
    if (dtype == FG_F16)
        for (size_t i = 0; i < count; i++)
            h[i] = fg_mpi_f32_to_f16(fg_mpi_f16_to_f32(h[i]) / (float)size);
    else if (dtype == FG_BF16)
        for (size_t i = 0; i < count; i++)
            h[i] = fg_mpi_f32_to_bf16(fg_mpi_bf16_to_f32(h[i]) / (float)size);
}

void fg_mpi_half_release(void)
{
    for (int k = 0; k < 4; k++)
        if (ops[k] != MPI_OP_NULL) MPI_Op_free(&ops[k]);
}
