/* Counter-based initialisation: splitmix64 over (key + i * golden ratio). */
#include "init.h"

#include <math.h>

#define FG_GOLDEN 0x9e3779b97f4a7c15ull

uint64_t fg_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t fg_rng_key(uint64_t seed, uint64_t stream)
{
    /* Two rounds so that nearby (seed, stream) pairs give unrelated keys. */
    return fg_mix64(fg_mix64(seed + FG_GOLDEN) ^ (stream * 0xd1b54a32d192ed03ull + 1));
}

uint64_t fg_rng_u64(uint64_t key, uint64_t i)
{
    return fg_mix64(key + (i + 1) * FG_GOLDEN);
}

double fg_rng_uniform(uint64_t key, uint64_t i)
{
    return (double)(fg_rng_u64(key, i) >> 11) * 0x1.0p-53;
}

void fg_init_uniform(float *x, size_t n, double bound, uint64_t seed, uint64_t stream)
{
    uint64_t key = fg_rng_key(seed, stream);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((2.0 * fg_rng_uniform(key, i) - 1.0) * bound);
}

void fg_init_normal(float *x, size_t n, double std, uint64_t seed, uint64_t stream)
{
    /* Box-Muller over draws 2i and 2i+1: element i depends on (seed, stream, i) alone. */
    uint64_t key = fg_rng_key(seed, stream);
    for (size_t i = 0; i < n; i++) {
        double u1 = 1.0 - fg_rng_uniform(key, 2 * i), u2 = fg_rng_uniform(key, 2 * i + 1);
        x[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

void fg_init_constant(float *x, size_t n, float value)
{
    for (size_t i = 0; i < n; i++)
        x[i] = value;
}
