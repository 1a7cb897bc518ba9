/* Synthetic samples and labels as pure functions of (seed, split, index): no state
 * changes after synthetic_model_create, so reads are thread-safe and reproducible in
 * any order, on any number of workers.
 *
 * Sample values: a counter-based hash (splitmix64's finalizer) of (seed, split, index,
 * element), uniform in [0, 1) with 24 random bits. Label: argmax over the classes of a
 * fixed random linear projection of (sample - 0.5), the projection drawn from the seed
 * alone, so every split shares one labelling rule that a linear model can learn. */
#ifndef FG_SYNTHETIC_GEN_H
#define FG_SYNTHETIC_GEN_H

#include <stdint.h>

#include "fulgur/plugin.h"

/* The projection reads at most this many evenly spaced elements of a sample, and
 * holds at most SYNTHETIC_MAX_WEIGHTS weights: labels stay cheap for big samples. */
#define SYNTHETIC_MAX_FEATURES 4096
#define SYNTHETIC_MAX_WEIGHTS ((int64_t)1 << 22)

typedef struct synthetic_model {
    uint64_t seed;
    int64_t elements;    /* per sample */
    int32_t num_classes;
    int32_t features;    /* elements the projection reads: k * elements / features */
    float *weights;      /* (num_classes, features), each row of unit length */
} synthetic_model;

fg_status synthetic_model_create(synthetic_model *m, uint64_t seed, int64_t elements,
                                 int32_t num_classes, fg_error *err);
void synthetic_model_destroy(synthetic_model *m);

/* out: (elements,) values in [0, 1). */
void synthetic_sample(const synthetic_model *m, int split, int64_t index, float *out);
/* The label of a sample synthetic_sample wrote. */
int32_t synthetic_label(const synthetic_model *m, const float *sample);

#endif
