/* [backend] tuning: the stream grain measured at start-up and cached per CPU model and
 * thread count under $XDG_CACHE_HOME/fulgur (pointed at a fresh folder here). The cache is
 * written by the first start, read back by the next one (a value planted in it is the one
 * used), a corrupt file or one holding a grain outside [2048, 65536] is ignored with a
 * warning naming it and rewritten, a measurement under load (FULGUR_TEST_TUNING plants the
 * trials' grains and CPU shares) is used but not cached, an implausible one is not used,
 * tuning = off keeps the built-in value, and a grain that splits an op differently gives the
 * same bits. */
#define _GNU_SOURCE
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char cache_dir[256];

/* The one cache file under the folder; "" when none. */
static void cache_file(char *path, size_t len)
{
    char pattern[320];
    glob_t g;
    snprintf(pattern, sizeof pattern, "%s/fulgur/cpu-tuning-*-t2.txt", cache_dir);
    path[0] = '\0';
    if (glob(pattern, 0, NULL, &g) == 0) {
        CHECK(g.gl_pathc == 1, "%zu cache files for 2 threads", (size_t)g.gl_pathc);
        snprintf(path, len, "%s", g.gl_pathv[0]);
    }
    globfree(&g);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* The stream_grain line of a cache file; -1 when there is none. */
static long read_grain(const char *path)
{
    char text[512];
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[got] = '\0';
    if (f)
        fclose(f);
    const char *at = strstr(text, "stream_grain ");
    long grain = -1;
    if (!at || sscanf(at, "stream_grain %ld", &grain) != 1)
        return -1;
    return grain;
}

/* The grain the backend logged and what it said about it. */
static long logged_grain(const test_backend *tb, char *source, size_t len)
{
    const char *at = strstr(tb->host.log, "cpu backend: stream grain ");
    CHECK(at != NULL, "no stream grain line: %s", tb->host.log);
    if (!at)
        return -1;
    long grain = -1;
    char what[64] = "";
    CHECK(sscanf(at, "cpu backend: stream grain %ld (%63[^):]", &grain, what) == 2,
          "cannot read %.120s", at);
    snprintf(source, len, "%s", what);
    return grain;
}

/* embedding_backward's columns are split by the stream grain: its bits at this backend. */
static void embed_grads(test_backend *tb, float *dtable)
{
    enum { N = 300, DIM = 64, ROWS = 50 };
    static int32_t ids[N];
    static float dout[N * DIM];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 7) % ROWS;
    test_seed(5);
    test_fill_uniform(dout, (size_t)N * DIM, -1, 1);
    CHECK_OK(tb->vt->embedding_backward(tb->state, tb->queue, FG_F32, FG_F32, ids, N, DIM, ROWS,
                                        dout, dtable, 0, &test_err));
}

void test_group_tuning(void)
{
    snprintf(cache_dir, sizeof cache_dir, "/tmp/fulgur-tuning-XXXXXX");
    CHECK(mkdtemp(cache_dir) != NULL, "mkdtemp");
    setenv("XDG_CACHE_HOME", cache_dir, 1);
    char path[512], source[64], text[512];

    /* a real measurement: whatever the machine's load, a grain within the bounds */
    unsetenv("FULGUR_TEST_TUNING");
    test_backend real;
    test_backend_open_with(&real, 1, 2, 0, "tuning = auto");
    long real_grain = logged_grain(&real, source, sizeof source);
    CHECK(real_grain >= 2048 && real_grain <= 65536, "measured grain %ld: %s", real_grain,
          real.host.log);
    CHECK(strcmp(source, "measured") == 0 || strcmp(source, "built-in") == 0 ||
              strcmp(source, "measured under load, not cached") == 0,
          "real measurement: %s", real.host.log);
    test_backend_close(&real);
    cache_file(path, sizeof path);
    if (path[0])
        unlink(path);

    /* quiet trials (8192, 16384, 8192 at full CPU share): the median, cached */
    setenv("FULGUR_TEST_TUNING", "8192@1,16384@0.97,8192@1", 1);
    test_backend first;
    test_backend_open_with(&first, 1, 2, 0, "tuning = auto");
    long measured = logged_grain(&first, source, sizeof source);
    CHECK(strcmp(source, "measured") == 0, "first start: %s, not measured", source);
    CHECK(measured == 8192, "measured grain %ld, not the trials' median 8192", measured);
    test_backend_close(&first);
    cache_file(path, sizeof path);
    CHECK(path[0], "no cache file under %s/fulgur", cache_dir);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[got] = '\0';
    if (f)
        fclose(f);
    char want[64];
    snprintf(want, sizeof want, "\nthreads 2\nstream_grain %ld\n", measured);
    CHECK(strncmp(text, "fulgur-cpu-tuning 1\nmodel ", 26) == 0 && strstr(text, want),
          "cache file %s:\n%s", path, text);

    /* read back: a value planted in the file is the one used */
    char planted[512];
    const char *grain_line = strstr(text, "stream_grain ");
    CHECK(grain_line != NULL, "no stream_grain line");
    snprintf(planted, sizeof planted, "%.*sstream_grain 2048\n",
             grain_line ? (int)(grain_line - text) : 0, text);
    write_file(path, planted);
    test_backend cached;
    test_backend_open_with(&cached, 1, 2, 0, "tuning = auto");
    CHECK(logged_grain(&cached, source, sizeof source) == 2048 && strcmp(source, "cached") == 0,
          "planted 2048: %s", cached.host.log);
    float fine[50 * 64], coarse[50 * 64];
    embed_grads(&cached, fine);
    test_backend_close(&cached);

    /* corrupt: ignored with a warning naming the file and the line, measured and rewritten */
    write_file(path, "fulgur-cpu-tuning 1\nmodel something else\n");
    test_backend corrupt;
    test_backend_open_with(&corrupt, 1, 2, 0, "tuning = auto");
    char warning[700];
    snprintf(warning, sizeof warning, "warning: cpu backend: ignoring the tuning cache %s (line "
             "2 is not this CPU's model line): measuring again", path);
    CHECK(strstr(corrupt.host.log, warning), "no warning for the corrupt cache: %s",
          corrupt.host.log);
    long again = logged_grain(&corrupt, source, sizeof source);
    CHECK(strcmp(source, "measured") == 0, "after the corrupt file: %s", source);
    test_backend_close(&corrupt);
    f = fopen(path, "r");
    got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[got] = '\0';
    if (f)
        fclose(f);
    snprintf(want, sizeof want, "\nstream_grain %ld\n", again);
    CHECK(strncmp(text, "fulgur-cpu-tuning 1\nmodel ", 26) == 0 && strstr(text, want),
          "the corrupt file was not rewritten: %s", text);

    /* a cached grain outside the bounds (an older fulgur cached one measured under load):
     * ignored with a warning, measured again, rewritten */
    char oob[512];
    snprintf(oob, sizeof oob, "%.*sstream_grain 262144\n",
             grain_line ? (int)(grain_line - text) : 0, text);
    write_file(path, oob);
    test_backend bounded;
    test_backend_open_with(&bounded, 1, 2, 0, "tuning = auto");
    snprintf(warning, sizeof warning, "warning: cpu backend: ignoring the tuning cache %s (line "
             "4 is not a stream_grain in [2048, 65536]): measuring again", path);
    CHECK(strstr(bounded.host.log, warning), "no warning for a cached 262144: %s",
          bounded.host.log);
    CHECK(logged_grain(&bounded, source, sizeof source) == 8192 &&
              strcmp(source, "measured") == 0,
          "after a cached 262144: %s", bounded.host.log);
    test_backend_close(&bounded);
    CHECK(read_grain(path) == 8192, "a cached 262144 was not rewritten");

    /* under load (a trial at 0.6 of its core): the median used, nothing cached; the next
     * quiet start measures again and caches */
    unlink(path);
    setenv("FULGUR_TEST_TUNING", "32768@1,65536@0.6,32768@0.95", 1);
    test_backend loaded;
    test_backend_open_with(&loaded, 1, 2, 0, "tuning = auto");
    CHECK(logged_grain(&loaded, source, sizeof source) == 32768 &&
              strcmp(source, "measured under load, not cached") == 0 &&
              strstr(loaded.host.log, "cpu share 0.60, trials 32768 65536 32768"),
          "under load: %s", loaded.host.log);
    test_backend_close(&loaded);
    cache_file(path, sizeof path);
    CHECK(!path[0], "a grain measured under load was cached in %s", path);
    /* trials more than 4x apart, each at full share: loaded too */
    setenv("FULGUR_TEST_TUNING", "4096@1,32768@1,8192@1", 1);
    test_backend spread;
    test_backend_open_with(&spread, 1, 2, 0, "tuning = auto");
    CHECK(logged_grain(&spread, source, sizeof source) == 8192 &&
              strcmp(source, "measured under load, not cached") == 0,
          "trials 4096 32768 8192: %s", spread.host.log);
    test_backend_close(&spread);
    cache_file(path, sizeof path);
    CHECK(!path[0], "trials 4x apart were cached in %s", path);
    /* implausible (the pool never won up to 256k floats): the built-in value, not cached */
    setenv("FULGUR_TEST_TUNING", "131072@1", 1);
    test_backend implausible;
    test_backend_open_with(&implausible, 1, 2, 0, "tuning = auto");
    CHECK(logged_grain(&implausible, source, sizeof source) == 16384 &&
              strcmp(source, "built-in") == 0 &&
              strstr(implausible.host.log, "measured 131072 is outside [2048, 65536]"),
          "implausible 131072: %s", implausible.host.log);
    test_backend_close(&implausible);
    cache_file(path, sizeof path);
    CHECK(!path[0], "an implausible grain was cached in %s", path);
    setenv("FULGUR_TEST_TUNING", "4096@1", 1);
    test_backend quiet;
    test_backend_open_with(&quiet, 1, 2, 0, "tuning = auto");
    CHECK(logged_grain(&quiet, source, sizeof source) == 4096 && strcmp(source, "measured") == 0,
          "quiet after loaded: %s", quiet.host.log);
    test_backend_close(&quiet);
    cache_file(path, sizeof path);
    CHECK(path[0] && read_grain(path) == 4096, "the quiet start did not cache 4096");
    unsetenv("FULGUR_TEST_TUNING");

    /* off: the built-in grain, the same bits as the planted one */
    test_backend off;
    test_backend_open_with(&off, 1, 2, 0, "tuning = off");
    CHECK(logged_grain(&off, source, sizeof source) == 16384 &&
              strcmp(source, "built-in") == 0,
          "tuning = off: %s", off.host.log);
    embed_grads(&off, coarse);
    CHECK(memcmp(fine, coarse, sizeof fine) == 0,
          "embedding_backward differs between stream grains 2048 and 16384");
    test_backend_close(&off);

    test_backend bad;
    CHECK(test_backend_try_open_with(&bad, 1, 2, 0, "tuning = fast") == FG_INVALID_ARGUMENT,
          "tuning = fast accepted");
    CHECK(strstr(test_err.message, "option tuning = 'fast' is not one of auto|off"), "%s",
          test_err.message);
    unlink(path);
    char folder[300];
    snprintf(folder, sizeof folder, "%s/fulgur", cache_dir);
    rmdir(folder);
    rmdir(cache_dir);
}
