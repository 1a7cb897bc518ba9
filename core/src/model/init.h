/* Seeded, counter-based random numbers for initialisation and dropout seeds. Value i of a
 * stream is a pure function of (seed, stream, i): no state, bitwise reproducible, and a
 * tensor's values do not depend on which tensors came before it. */
#ifndef FG_INIT_H
#define FG_INIT_H

#include <stddef.h>
#include <stdint.h>

/* The splitmix64 finaliser: a bijective 64-bit mix. */
uint64_t fg_mix64(uint64_t x);
/* The key of stream `stream` under `seed`. */
uint64_t fg_rng_key(uint64_t seed, uint64_t stream);
/* The i-th 64-bit value of a stream (splitmix64 at position i). */
uint64_t fg_rng_u64(uint64_t key, uint64_t i);
/* The i-th value of a stream as a double in [0, 1), 53 random bits. */
double fg_rng_uniform(uint64_t key, uint64_t i);

/* x[i] = U(-bound, bound), from stream (seed, stream). */
void fg_init_uniform(float *x, size_t n, double bound, uint64_t seed, uint64_t stream);
/* N(0, std^2), element i from (seed, stream, i) alone (Box-Muller). */
void fg_init_normal(float *x, size_t n, double std, uint64_t seed, uint64_t stream);
void fg_init_constant(float *x, size_t n, float value);

#endif
