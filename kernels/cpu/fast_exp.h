/* exp(x) in float without libm, branch-free so that loops over it vectorise at the
 * baseline ISA: Cody-Waite reduction x = n ln2 + r (|r| <= ln2/2), Cephes' degree-6
 * polynomial for e^r, 2^n built in the exponent bits. Within 2 ulp of expf over
 * [-87.3, 88.7]; inputs outside are clamped (e^-87.3 ~ 1e-38 stands for 0); NaN gives NaN. */
#ifndef FG_CPU_FAST_EXP_H
#define FG_CPU_FAST_EXP_H

#include <stdint.h>
#include <string.h>

static inline float fg_cpu_exp(float x)
{
    x = x > 88.7f ? 88.7f : x; /* two plain selects: GCC if-converts them, not a nested one */
    x = x < -87.3f ? -87.3f : x;
    /* round to nearest by the 1.5 * 2^23 shift: floorf/rintf are calls below SSE4.1; the
     * shifted value's low bits are n itself, read back as bits (converting a NaN to int
     * would be undefined) */
    float shifted = x * 1.44269504088896341f + 12582912.0f;
    float n = shifted - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t shifted_bits;
    memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
    uint32_t bits = (shifted_bits - 0x4B400000u + 127u) << 23; /* (n + 127) << 23 */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

#endif
