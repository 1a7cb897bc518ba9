/* [backend] tuning: the stream grain measured at start-up and cached per CPU model and
 * thread count under $XDG_CACHE_HOME/fulgur (pointed at a fresh folder here). The cache is
 * written by the first start, read back by the next one (a value planted in it is the one
 * used), a corrupt file is ignored with a warning naming it and rewritten, tuning = off keeps
 * the built-in value, and a grain that splits an op differently gives the same bits. */
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

    test_backend first;
    test_backend_open_with(&first, 1, 2, 0, "tuning = auto");
    long measured = logged_grain(&first, source, sizeof source);
    CHECK(strcmp(source, "measured") == 0, "first start: %s, not measured", source);
    CHECK(measured >= 2048 && measured <= 262144, "measured grain %ld", measured);
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
