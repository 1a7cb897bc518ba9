/* Element loads and stores of the emulated libraries (f32, f16, bf16 storage; f32 values),
 * rounding to nearest even as the CUDA conversions do. Test-only. */
#ifndef FGEMU_TYPES_H
#define FGEMU_TYPES_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <library_types.h>
#include <math.h>
#include <string.h>

namespace fgemu {

inline bool is_fp8(cudaDataType_t t)
{
    return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2;
}

inline size_t elem_size(cudaDataType_t t)
{
    return t == CUDA_R_32F ? 4 : is_fp8(t) ? 1 : 2;
}

/* An fp8 byte's value, from the formats' definitions (OCP FP8): E4M3 has bias 7, no
 * infinities and one NaN mantissa (S.1111.111); E5M2 has bias 15 and IEEE infinities and
 * NaNs. Subnormals at exponent field 0. */
inline float fp8_value(unsigned char byte, cudaDataType_t t)
{
    bool e4m3 = t == CUDA_R_8F_E4M3;
    int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, emax = e4m3 ? 15 : 31;
    int sign = byte >> 7, e = (byte >> mbits) & emax, m = byte & ((1 << mbits) - 1);
    float v;
    if (e4m3 && e == 15 && m == 7)
        v = __builtin_nanf("");
    else if (!e4m3 && e == 31)
        v = m ? __builtin_nanf("") : __builtin_inff();
    else if (e == 0)
        v = ldexpf((float)m, 1 - bias - mbits);
    else
        v = ldexpf((float)((1 << mbits) + m), e - bias - mbits);
    return sign ? -v : v;
}

inline float load(const void *p, cudaDataType_t t, size_t i)
{
    if (is_fp8(t))
        return fp8_value(((const unsigned char *)p)[i], t);
    if (t == CUDA_R_16F)
        return __half2float(((const __half *)p)[i]);
    if (t == CUDA_R_16BF)
        return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

inline void store(void *p, cudaDataType_t t, size_t i, float v)
{
    if (t == CUDA_R_16F)
        ((__half *)p)[i] = __float2half_rn(v);
    else if (t == CUDA_R_16BF)
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
        ((float *)p)[i] = v;
}

/* TF32: the f32 value rounded to 10 mantissa bits (nearest, ties away, as the tensor
 * cores' cvt.rna.tf32.f32). */
inline float tf32(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&v, &u, 4);
    return v;
}

} // namespace fgemu

extern "C" int fgemu_is_device(const void *p, size_t n);

#endif
