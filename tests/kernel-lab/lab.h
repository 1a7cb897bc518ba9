/* The kernel lab's harness: numbered versions of one hot CPU kernel beside a reference,
 * a correctness check every version must pass (a ctest) and a timing run (a benchmark,
 * never a test). In the manner of llm.c's dev/cpu: the winner moves into kernels/cpu and
 * keeps its number in a comment there. */
#ifndef FG_LAB_H
#define FG_LAB_H

#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_kernels.h"

/* A candidate compiled for AVX-512, AVX2 and the baseline, picked at load, as the product's
 * kernels are. */
#define LAB_CLONES FG_CPU_VECTOR_CLONES

static inline double lab_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process (every thread): on a shared machine, a measure of the
 * work a version does that the other jobs' load does not inflate (spinning counts too). */
static inline double lab_cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Deterministic values in [-0.5, 0.5): the same inputs for every version. */
static inline void lab_fill(float *x, size_t n, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) * (1.0f / 16777216.0f) - 0.5f;
    }
}

static inline float *lab_alloc(size_t n)
{
    float *p = NULL;
    if (posix_memalign((void **)&p, 64, (n ? n : 1) * sizeof *p) != 0) {
        fprintf(stderr, "lab: out of memory for %zu floats\n", n);
        exit(1);
    }
    return p;
}

/* First index where a and b differ bitwise, or n. */
static inline size_t lab_first_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0)
            return i;
    return n;
}

/* Largest |a - ref| over the largest |ref|: the error of a version whose summation order
 * differs from the reference's, relative to the tensor's scale. */
static inline double lab_max_rel(const float *a, const float *ref, size_t n)
{
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i], r = ref[i] < 0 ? -(double)ref[i] : ref[i];
        d = d < 0 ? -d : d;
        err = d > err || d != d ? d : err;
        scale = r > scale ? r : scale;
    }
    return err / (scale > 0.0 ? scale : 1.0);
}

/* Median of n seconds (sorts in place). */
static inline double lab_median(double *t, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* A lab program's main. `NAME_lab check` runs check(pool), the ctest; `NAME_lab time
 * [ARGS]` runs time(pool, argc, argv) with the words after "time" (it says what is wrong
 * and returns 2 for bad ones); anything else prints the usage. The pool has 2 threads. */
typedef int (*lab_check_fn)(fg_cpu_pool *pool);
typedef int (*lab_time_fn)(fg_cpu_pool *pool, int argc, char **argv);

static inline int lab_main(int argc, char **argv, const char *name, const char *time_args,
                           lab_check_fn check, lab_time_fn time)
{
    fg_cpu_pool *pool = NULL;
    if (fg_cpu_pool_create(2, &pool) != 0) {
        fprintf(stderr, "%s lab: cannot start the pool\n", name);
        return 1;
    }
    int rc;
    if (argc >= 2 && strcmp(argv[1], "check") == 0) {
        rc = check(pool);
    } else if (argc >= 2 && strcmp(argv[1], "time") == 0) {
        rc = time(pool, argc - 2, argv + 2);
    } else {
        fprintf(stderr, "usage: %s_lab check | time %s\n", name, time_args);
        rc = 2;
    }
    fg_cpu_pool_destroy(pool);
    return rc;
}

#endif
