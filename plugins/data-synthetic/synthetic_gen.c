/* Counter-based generation: every value is a hash of where it is, never a step of a
 * sequential generator, so sample i costs the same whichever samples came before. */
#include "synthetic_gen.h"

#include <math.h>
#include <stdlib.h>

#define GOLDEN 0x9E3779B97F4A7C15ull

/* splitmix64's output function: a bijective mix of 64 bits. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* 24 random bits as a float in [0, 1): exactly representable, never 1. */
static float unit_float(uint64_t bits)
{
    return (float)(bits >> 40) * (1.0f / 16777216.0f);
}

/* A stream key per (seed, stream, index); stream 0 is the weights, 1.. the splits. */
static uint64_t stream_key(uint64_t seed, uint64_t stream, uint64_t index)
{
    return mix64(mix64(seed ^ mix64(stream * GOLDEN + 1)) + index * GOLDEN);
}

fg_status synthetic_model_create(synthetic_model *m, uint64_t seed, int64_t elements,
                                 int32_t num_classes, fg_error *err)
{
    int64_t features = elements < SYNTHETIC_MAX_FEATURES ? elements : SYNTHETIC_MAX_FEATURES;
    if (features * num_classes > SYNTHETIC_MAX_WEIGHTS)
        features = SYNTHETIC_MAX_WEIGHTS / num_classes > 0 ? SYNTHETIC_MAX_WEIGHTS / num_classes : 1;
    m->seed = seed;
    m->elements = elements;
    m->num_classes = num_classes;
    m->features = (int32_t)features;
    m->weights = malloc((size_t)(features * num_classes) * sizeof *m->weights);
    if (!m->weights)
        return fg_error_set(err, FG_OUT_OF_MEMORY,
                            "synthetic: out of memory for a %d x %lld projection", num_classes,
                            (long long)features);
    for (int32_t c = 0; c < num_classes; c++) {
        float *row = m->weights + (size_t)c * (size_t)features;
        uint64_t key = stream_key(seed, 0, (uint64_t)c);
        double norm = 0.0;
        for (int64_t k = 0; k < features; k++) {
            row[k] = 2.0f * unit_float(mix64(key + (uint64_t)(k + 1) * GOLDEN)) - 1.0f;
            norm += (double)row[k] * row[k];
        }
        /* Unit rows: no class wins more often just because its row is longer. */
        float scale = norm > 0.0 ? (float)(1.0 / sqrt(norm)) : 1.0f;
        for (int64_t k = 0; k < features; k++)
            row[k] *= scale;
    }
    return FG_OK;
}

void synthetic_model_destroy(synthetic_model *m)
{
    free(m->weights);
    m->weights = NULL;
}

void synthetic_sample(const synthetic_model *m, int split, int64_t index, float *out)
{
    uint64_t key = stream_key(m->seed, (uint64_t)split, (uint64_t)index);
    for (int64_t j = 0; j < m->elements; j++)
        out[j] = unit_float(mix64(key + (uint64_t)(j + 1) * GOLDEN));
}

int32_t synthetic_label(const synthetic_model *m, const float *sample)
{
    int32_t best = 0;
    float best_score = -INFINITY;
    for (int32_t c = 0; c < m->num_classes; c++) {
        const float *row = m->weights + (size_t)c * (size_t)m->features;
        float score = 0.0f;
        if (m->features == m->elements) /* the usual case: no index arithmetic */
            for (int32_t k = 0; k < m->features; k++)
                score += row[k] * (sample[k] - 0.5f);
        else
            for (int32_t k = 0; k < m->features; k++)
                score += row[k] * (sample[(int64_t)k * m->elements / m->features] - 0.5f);
        if (score > best_score) {
            best_score = score;
            best = c;
        }
    }
    return best;
}
