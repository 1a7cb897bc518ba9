/* Plugin loading, the options of the fake host and random inputs for the CPU backend tests. */
#define _GNU_SOURCE
#include "harness.h"
#include "plugin_load.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t test_rng = 0x9E3779B97F4A7C15ull;

fg_status test_backend_try_open(test_backend *tb, int64_t devices, int64_t threads,
                                int64_t memory_limit_mb)
{
    return test_backend_try_open_with(tb, devices, threads, memory_limit_mb, NULL);
}

fg_status test_backend_try_open_with(test_backend *tb, int64_t devices, int64_t threads,
                                     int64_t memory_limit_mb, const char *more)
{
    static const fg_plugin *plugin; /* a test program's own state, loaded once */
    if (!plugin)
        plugin = fg_test_need_plugin(FG_CPU_PLUGIN_PATH, FG_KIND_BACKEND, "cpu");
    memset(tb, 0, sizeof *tb);
    tb->plugin = plugin;
    tb->vt = plugin->vtable;
    char options[160];
    snprintf(options, sizeof options, "devices = %lld\nthreads = %lld\nmemory_limit_mb = %lld",
             (long long)devices, (long long)threads, (long long)memory_limit_mb);
    fg_fake_host_init(&tb->host, plugin, NULL);
    fg_fake_host_set_text(&tb->host, options);
    if (more)
        fg_fake_host_set_text(&tb->host, more);
    fg_fake_host_echo(&tb->host, stderr, FG_LOG_WARN);
    memset(&test_err, 0, sizeof test_err);
    return plugin->init(&tb->host.host, &tb->state, &test_err);
}

void test_backend_open(test_backend *tb, int64_t devices, int64_t threads,
                       int64_t memory_limit_mb)
{
    test_backend_open_with(tb, devices, threads, memory_limit_mb, NULL);
}

void test_backend_open_with(test_backend *tb, int64_t devices, int64_t threads,
                            int64_t memory_limit_mb, const char *more)
{
    if (test_backend_try_open_with(tb, devices, threads, memory_limit_mb, more) != FG_OK) {
        fprintf(stderr, "init failed: %s\n", test_err.message);
        exit(1);
    }
    if (tb->vt->queue_create(tb->state, 0, &tb->queue, &test_err) != FG_OK) {
        fprintf(stderr, "queue_create failed: %s\n", test_err.message);
        exit(1);
    }
}

void test_backend_close(test_backend *tb)
{
    if (tb->queue)
        tb->vt->queue_destroy(tb->state, tb->queue);
    if (tb->state)
        tb->plugin->deinit(tb->state);
    memset(tb, 0, sizeof *tb);
}

void test_seed(uint64_t seed)
{
    test_rng = seed ? seed : 1;
}

double test_uniform(double lo, double hi)
{
    test_rng ^= test_rng << 13;
    test_rng ^= test_rng >> 7;
    test_rng ^= test_rng << 17;
    return lo + (hi - lo) * (double)(test_rng >> 11) * (1.0 / 9007199254740992.0);
}

void test_fill_uniform(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)test_uniform(lo, hi);
}

void *test_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "test: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

int test_compare(const char *what, const float *got, const double *want, size_t n,
                 double tol)
{
    int misses = 0;
    for (size_t i = 0; i < n; i++) {
        double scale = fabs(want[i]) > 1.0 ? fabs(want[i]) : 1.0;
        double diff = fabs((double)got[i] - want[i]);
        if (!(diff <= tol * scale)) {
            if (misses < 5)
                fprintf(stderr, "%s[%zu]: got %.9g, want %.9g (diff %.3g, tol %.3g)\n", what,
                        i, (double)got[i], want[i], diff, tol * scale);
            misses++;
        }
    }
    if (misses) {
        fprintf(stderr, "%s: %d of %zu elements differ\n", what, misses, n);
        test_failures++;
    }
    return misses;
}

int test_compare_terms(const char *what, const float *got, const double *want,
                       const double *scale, size_t n, double tol)
{
    int misses = 0;
    for (size_t i = 0; i < n; i++) {
        double sc = scale[i] > 1e-3 ? scale[i] : 1e-3;
        double diff = fabs((double)got[i] - want[i]);
        if (!(diff <= tol * sc)) {
            if (misses < 5)
                fprintf(stderr, "%s[%zu]: got %.9g, want %.9g (diff %.3g, terms %.3g)\n",
                        what, i, (double)got[i], want[i], diff, sc);
            misses++;
        }
    }
    if (misses) {
        fprintf(stderr, "%s: %d of %zu elements differ\n", what, misses, n);
        test_failures++;
    }
    return misses;
}

int test_compare_scalar(const char *what, double got, double want, double tol)
{
    float g = (float)got;
    return test_compare(what, &g, &want, 1, tol);
}
