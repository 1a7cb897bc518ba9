/* One trial of the stream-grain measurement ([backend] tuning = auto, cpu_tuning.c): an axpy
 * of n floats timed inline and across the pool for n = 262144 down to 4096 (the best of
 * TUNE_RUNS runs each, alternating so that a change of the machine's load meets both alike);
 * the grain is half the smallest n from which the pool wins at every larger size. With it,
 * the calling thread's CPU time over wall time during the inline runs: a thread that did not
 * get its core for the whole run (another process took turns on it) reads below 1.
 *
 * FULGUR_TEST_TUNING (tests only) replaces the trials' results: a comma-separated list of
 * GRAIN@SHARE, trial i takes entry i (the last one repeats), nothing is timed. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_backend.h"

#define TUNE_MIN_N 4096
#define TUNE_MAX_N 262144
#define TUNE_RUNS 20

typedef struct axpy_job {
    float *y;
    const float *x;
} axpy_job;

static void axpy_range(void *p, size_t lo, size_t hi)
{
    axpy_job *j = p;
    for (size_t i = lo; i < hi; i++)
        j->y[i] += 0.5f * j->x[i];
}

static double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct trial_clock {
    double wall, cpu; /* the inline runs': wall time and the calling thread's CPU time */
} trial_clock;

static void time_axpy(fg_cpu_pool *pool, axpy_job *j, size_t n, trial_clock *tc,
                      double *inline_s, double *pool_s)
{
    *inline_s = *pool_s = 1e30;
    for (int r = 0; r < TUNE_RUNS; r++) {
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t0 = clock_s(CLOCK_MONOTONIC);
        fg_cpu_parallel_for(pool, n, n, 16, axpy_range, j); /* n < 2 n: inline */
        double t1 = clock_s(CLOCK_MONOTONIC), c1 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        fg_cpu_parallel_for(pool, n, TUNE_MIN_N / 4, 16, axpy_range, j);
        double t2 = clock_s(CLOCK_MONOTONIC);
        tc->wall += t1 - t0;
        tc->cpu += c1 - c0;
        *inline_s = t1 - t0 < *inline_s ? t1 - t0 : *inline_s;
        *pool_s = t2 - t1 < *pool_s ? t2 - t1 : *pool_s;
    }
}

/* The planted result of trial `index`; 0 when the hook is unset or malformed. */
static int planted_trial(int index, fg_cpu_tuning_trial *out)
{
    const char *spec = secure_getenv("FULGUR_TEST_TUNING");
    if (!spec || !spec[0])
        return 0;
    for (int i = 0; i < index && strchr(spec, ','); i++)
        spec = strchr(spec, ',') + 1;
    unsigned long long grain;
    double share;
    if (sscanf(spec, "%llu@%lf", &grain, &share) != 2)
        return 0;
    out->grain = (size_t)grain;
    out->cpu_share = share;
    return 1;
}

int fg_cpu_tuning_run_trial(fg_cpu_pool *pool, int index, fg_cpu_tuning_trial *out)
{
    if (planted_trial(index, out))
        return 1;
    if (fg_cpu_pool_threads(pool) < 2)
        return 0;
    float *buf = calloc(2 * TUNE_MAX_N, sizeof *buf);
    if (!buf)
        return 0;
    axpy_job j = {buf, buf + TUNE_MAX_N};
    trial_clock tc = {0.0, 0.0};
    size_t grain = TUNE_MAX_N; /* the pool never won: everything measured stays inline */
    for (size_t n = TUNE_MAX_N; n >= TUNE_MIN_N; n /= 2) {
        double inline_s, pool_s;
        time_axpy(pool, &j, n, &tc, &inline_s, &pool_s);
        if (pool_s >= inline_s)
            break; /* from here down, inline: the grain is the last n that split, halved */
        grain = n / 2;
    }
    free(buf);
    out->grain = grain;
    out->cpu_share = tc.wall > 0.0 ? tc.cpu / tc.wall : 1.0;
    return 1;
}
