/* What every core folder shares: a growing byte buffer, what a path names and the
 * monotonic clock (COUNT and FG_CREATED are macros in core_util.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core_util.h"
#include "grow_array.h"

double fg_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int fg_grow_bytes(void *bufp, size_t *cap, size_t need, size_t first)
{
    return fg_plugin_grow_array(bufp, cap, need, first, 1);
}

int fg_append_bytes(void *bufp, size_t *len, size_t *cap, const void *src, size_t n,
                    size_t first)
{
    if (fg_grow_bytes(bufp, cap, *len + n, first) != 0)
        return -1;
    if (n) {
        char *buf;
        memcpy(&buf, bufp, sizeof buf);
        memcpy(buf + *len, src, n);
    }
    *len += n;
    return 0;
}

int fg_is_regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int fg_is_directory(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
