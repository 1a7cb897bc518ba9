/* Element loads and stores of the emulated libraries (f32, f16, bf16 storage; f32 values),
 * rounding to nearest even as the CUDA conversions do. Test-only. */
#ifndef FGEMU_TYPES_H
#define FGEMU_TYPES_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <library_types.h>
#include <string.h>

namespace fgemu {

inline size_t elem_size(cudaDataType_t t)
{
    return t == CUDA_R_32F ? 4 : 2;
}

inline float load(const void *p, cudaDataType_t t, size_t i)
{
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
