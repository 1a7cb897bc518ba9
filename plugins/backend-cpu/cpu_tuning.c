/* The thresholds that depend on the CPU, measured on the user's machine at start-up and
 * cached per CPU model and thread count, as FFTW keeps its wisdom: `[backend] tuning`.
 *
 * Measured: the stream grain (kernels/cpu: streaming ops stay on the calling thread below
 * 2 x grain elements), tuned by hand on one Zen 3 VM (16384); where waking a pool worker
 * pays depends on the CPU's wake-up latency and memory bandwidth. Every op it splits is
 * elementwise, so it changes speed, never a result.
 *
 * The policy (a value measured on a busy machine must not persist):
 * - three trials (cpu_tuning_measure.c), the median kept;
 * - a trial whose thread got less than 0.9 of its wall time as CPU time (another process took
 *   turns on its core), or trials more than 4x apart, mark the measurement "under load": its
 *   median is used for this run only, nothing is cached, the next start measures again;
 * - a median outside [2048, 65536] is implausible (the pool losing an axpy of 131072 floats,
 *   512 KiB per operand, means its worker was not running): the built-in 16384 is used,
 *   nothing is cached;
 * - a cached value outside those bounds (an older fulgur cached what it measured under load)
 *   is ignored with a warning and measured again.
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
#include <unistd.h>

#include "cpu_backend.h"

#define TUNE_FORMAT "fulgur-cpu-tuning 1"
#define TUNE_TRIALS 3
#define TUNE_GRAIN_LO 2048   /* bounds of a plausible grain: cached or measured outside, */
#define TUNE_GRAIN_HI 65536  /* it is not used (see the policy above)                   */
#define TUNE_QUIET_SHARE 0.9 /* the least CPU share of a quiet trial */
#define TUNE_SPREAD 4        /* the most max / min of quiet trials' grains */

static int in_bounds(size_t grain)
{
    return grain >= TUNE_GRAIN_LO && grain <= TUNE_GRAIN_HI;
}

static int by_grain(const void *a, const void *b)
{
    size_t x = ((const fg_cpu_tuning_trial *)a)->grain;
    size_t y = ((const fg_cpu_tuning_trial *)b)->grain;
    return (x > y) - (x < y);
}

/* The grain from TUNE_TRIALS trials, and whether it may be cached; *source says what it is
 * (for the log and `fulgur devices`). 0 when no trial could run. */
static size_t measured_grain(fg_cpu_backend *be, int *cacheable, char *source, size_t len)
{
    fg_cpu_tuning_trial t[TUNE_TRIALS];
    double least_share = 1.0;
    for (int i = 0; i < TUNE_TRIALS; i++) {
        if (!fg_cpu_tuning_run_trial(be->pool, i, &t[i]))
            return 0;
        least_share = t[i].cpu_share < least_share ? t[i].cpu_share : least_share;
    }
    size_t g0 = t[0].grain, g1 = t[1].grain, g2 = t[2].grain; /* in trial order */
    qsort(t, TUNE_TRIALS, sizeof t[0], by_grain);
    size_t median = t[TUNE_TRIALS / 2].grain;
    int loaded = least_share < TUNE_QUIET_SHARE ||
                 t[TUNE_TRIALS - 1].grain > TUNE_SPREAD * t[0].grain;
    *cacheable = !loaded && in_bounds(median);
    if (!in_bounds(median)) {
        snprintf(source, len, "built-in: measured %zu is outside [%d, %d], not cached: cpu "
                 "share %.2f, trials %zu %zu %zu", median, TUNE_GRAIN_LO, TUNE_GRAIN_HI,
                 least_share, g0, g1, g2);
        return FG_CPU_STREAM_GRAIN;
    }
    if (loaded)
        snprintf(source, len, "measured under load, not cached: cpu share %.2f, trials %zu "
                 "%zu %zu", least_share, g0, g1, g2);
    else
        snprintf(source, len, "measured");
    return median;
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
        *fault = "not a stream_grain in [2048, 65536]";
        return sscanf(line, "stream_grain %llu", g) == 1 && in_bounds((size_t)*g);
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

/* auto: the cached grain, or a measured one (cached when the policy allows). *path is the
 * cache file ("": none). */
static size_t tuned_grain(fg_cpu_backend *be, char *path, size_t plen, char *source,
                          size_t slen)
{
    char dir[4096], why[160];
    size_t grain = 0;
    path[0] = '\0';
    if (!cache_path(be, dir, sizeof dir, path, plen))
        path[0] = '\0';
    int rc = path[0] ? cache_read(be, path, &grain, why, sizeof why) : 0;
    if (rc == 1) {
        snprintf(source, slen, "cached");
        return grain;
    }
    if (rc < 0 && be->host && be->host->log)
        be->host->log(be->host, FG_LOG_WARN, "cpu backend: ignoring the tuning cache %s (%s): "
                      "measuring again", path, why);
    int cacheable = 0;
    grain = measured_grain(be, &cacheable, source, slen);
    if (!grain) {
        snprintf(source, slen, "built-in: cannot be measured");
        return FG_CPU_STREAM_GRAIN;
    }
    if (cacheable && path[0])
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
    snprintf(be->tuning_source, sizeof be->tuning_source, "%s",
             off ? "built-in: tuning = off" : "built-in: one thread");
    be->stream_grain = FG_CPU_STREAM_GRAIN;
    if (!off && be->threads > 1)
        be->stream_grain = tuned_grain(be, path, sizeof path, be->tuning_source,
                                       sizeof be->tuning_source);
    fg_cpu_pool_set_stream_grain(be->pool, be->stream_grain);
    if (be->host && be->host->log)
        be->host->log(be->host, FG_LOG_DEBUG, "cpu backend: stream grain %zu (%s%s%s)",
                      be->stream_grain, be->tuning_source, path[0] ? ": " : "", path);
    return FG_OK;
}
