/* The thresholds that depend on the CPU, measured on the user's machine at start-up and
 * cached per CPU model and thread count, as FFTW keeps its wisdom: `[backend] tuning`.
 *
 * Measured: the stream grain (kernels/cpu: streaming ops stay on the calling thread below
 * 2 x grain elements). It was tuned on one Zen 3 VM (16384); the crossover where waking a
 * pool worker pays depends on the CPU's wake-up latency and memory bandwidth. An axpy of
 * n floats is timed inline and across the pool for n = 4096 .. 262144 (the best of many
 * runs each, a few milliseconds in all); the grain is half the smallest n from which the
 * pool wins at every larger size. Every op it splits is elementwise, so it changes speed,
 * never a result.
 *
 * The cache: $XDG_CACHE_HOME/fulgur (else ~/.cache/fulgur), one file per CPU model and
 * thread count, written atomically. A file that does not parse is ignored with a warning
 * naming it and the line at fault, measured again and rewritten. tuning = off keeps the
 * built-in values (no measurement, no file). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cpu_backend.h"

#define TUNE_MIN_N 4096
#define TUNE_MAX_N 262144
#define TUNE_RUNS 40
#define TUNE_FORMAT "fulgur-cpu-tuning 1"

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

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The best of TUNE_RUNS axpys of n floats inline and across the pool, alternating so that
 * a change of the machine's load meets both alike. */
static void time_axpy(fg_cpu_pool *pool, axpy_job *j, size_t n, double *inline_s,
                      double *pool_s)
{
    *inline_s = *pool_s = 1e30;
    for (int r = 0; r < TUNE_RUNS; r++) {
        double t0 = now_s();
        fg_cpu_parallel_for(pool, n, n, 16, axpy_range, j); /* n < 2 n: inline */
        double t1 = now_s();
        fg_cpu_parallel_for(pool, n, TUNE_MIN_N / 4, 16, axpy_range, j);
        double t2 = now_s();
        *inline_s = t1 - t0 < *inline_s ? t1 - t0 : *inline_s;
        *pool_s = t2 - t1 < *pool_s ? t2 - t1 : *pool_s;
    }
}

/* The measured grain; 0 when it cannot be measured (one thread, no memory). */
static size_t measure_stream_grain(fg_cpu_pool *pool)
{
    if (fg_cpu_pool_threads(pool) < 2)
        return 0;
    float *buf = calloc(2 * TUNE_MAX_N, sizeof *buf);
    if (!buf)
        return 0;
    axpy_job j = {buf, buf + TUNE_MAX_N};
    size_t grain = TUNE_MAX_N; /* the pool never won: everything measured stays inline */
    for (size_t n = TUNE_MAX_N; n >= TUNE_MIN_N; n /= 2) {
        double inline_s, pool_s;
        time_axpy(pool, &j, n, &inline_s, &pool_s);
        if (pool_s >= inline_s)
            break; /* from here down, inline: the grain is the last n that split, halved */
        grain = n / 2;
    }
    free(buf);
    return grain;
}

/* The cache file of this CPU model and thread count. 0 when there is no cache folder. */
static int cache_path(const fg_cpu_backend *be, char *dir, size_t dlen, char *path, size_t plen)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        snprintf(dir, dlen, "%s/fulgur", xdg);
    else if (home && home[0])
        snprintf(dir, dlen, "%s/.cache/fulgur", home);
    else
        return 0;
    char model[64];
    size_t i = 0;
    for (; be->cpu_model[i] && i < sizeof model - 1; i++) {
        char c = be->cpu_model[i];
        model[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                       ? c : '_';
    }
    model[i] = '\0';
    int n = snprintf(path, plen, "%s/cpu-tuning-%s-t%d.txt", dir, i ? model : "unknown",
                     be->threads);
    return n > 0 && (size_t)n < plen;
}

/* Whether line `row` (1-based) of a cache file is right for this backend; *fault: what it
 * is not. */
static int line_ok(const fg_cpu_backend *be, int row, const char *line, unsigned long long *g,
                   const char **fault)
{
    char want[160];
    int threads = -1;
    switch (row) {
    case 1:
        *fault = "not \"" TUNE_FORMAT "\"";
        return strcmp(line, TUNE_FORMAT) == 0;
    case 2:
        *fault = "not this CPU's model line";
        snprintf(want, sizeof want, "model %s", be->cpu_model);
        return strcmp(line, want) == 0;
    case 3:
        *fault = "not this thread count";
        return sscanf(line, "threads %d", &threads) == 1 && threads == be->threads;
    case 4:
        *fault = "not a stream_grain in [2048, 262144]";
        return sscanf(line, "stream_grain %llu", g) == 1 && *g >= TUNE_MIN_N / 2 &&
               *g <= TUNE_MAX_N;
    default:
        *fault = "a line past the fourth";
        return 0;
    }
}

/* Reads the grain from the cache: 1 read, 0 no file, -1 a file that does not parse (*why
 * says which line). */
static int cache_read(const fg_cpu_backend *be, const char *path, size_t *grain, char *why,
                      size_t wlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        snprintf(why, wlen, "%s", strerror(e));
        return e == ENOENT ? 0 : -1;
    }
    char line[256];
    int ok = 1, row = 0;
    unsigned long long g = 0;
    const char *fault = "missing";
    while (ok && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        ok = line_ok(be, ++row, line, &g, &fault);
    }
    fclose(f);
    if (ok && row < 4) {
        ok = 0;
        row++;
        fault = "missing";
    }
    if (!ok) {
        snprintf(why, wlen, "line %d is %s", row, fault);
        return -1;
    }
    *grain = (size_t)g;
    return 1;
}

/* Writes the cache atomically (a temporary file renamed over it); quiet on failure: the
 * cache only saves a few milliseconds at the next start. */
static void cache_write(const fg_cpu_backend *be, const char *dir, const char *path,
                        size_t grain)
{
    char parent[4200], tmp[4200];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash) { /* ~/.cache, then ~/.cache/fulgur */
        *slash = '\0';
        mkdir(parent, 0755);
    }
    mkdir(dir, 0755);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    int ok = fprintf(f, "%s\nmodel %s\nthreads %d\nstream_grain %zu\n", TUNE_FORMAT,
                     be->cpu_model, be->threads, grain) > 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

/* auto: the cached grain, or a measured one (then cached). *path is the cache file ("":
 * none); *source what the grain is. */
static size_t tuned_grain(fg_cpu_backend *be, char *path, size_t plen, const char **source)
{
    char dir[4096], why[160];
    size_t grain = 0;
    path[0] = '\0';
    if (!cache_path(be, dir, sizeof dir, path, plen))
        path[0] = '\0';
    int rc = path[0] ? cache_read(be, path, &grain, why, sizeof why) : 0;
    if (rc == 1) {
        *source = "cached";
        return grain;
    }
    if (rc < 0 && be->host && be->host->log)
        be->host->log(be->host, FG_LOG_WARN, "cpu backend: ignoring the tuning cache %s (%s): "
                      "measuring again", path, why);
    grain = measure_stream_grain(be->pool);
    if (!grain) {
        *source = "built-in: cannot be measured";
        return FG_CPU_STREAM_GRAIN;
    }
    *source = "measured";
    if (path[0])
        cache_write(be, dir, path, grain);
    return grain;
}

fg_status fg_cpu_tuning_setup(fg_cpu_backend *be, const char *mode, fg_error *err)
{
    int off = mode && strcmp(mode, "off") == 0;
    if (!off && (!mode || strcmp(mode, "auto") != 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: option tuning = '%s' is "
                            "not one of auto|off", mode ? mode : "");
    char path[4300] = "";
    const char *source = off ? "built-in: tuning = off" : "built-in: one thread";
    be->stream_grain = FG_CPU_STREAM_GRAIN;
    if (!off && be->threads > 1)
        be->stream_grain = tuned_grain(be, path, sizeof path, &source);
    snprintf(be->tuning_source, sizeof be->tuning_source, "%s", source);
    fg_cpu_pool_set_stream_grain(be->pool, be->stream_grain);
    if (be->host && be->host->log)
        be->host->log(be->host, FG_LOG_DEBUG, "cpu backend: stream grain %zu (%s%s%s)",
                      be->stream_grain, source, path[0] ? ": " : "", path);
    return FG_OK;
}
