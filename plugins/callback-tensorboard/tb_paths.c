/* Event file naming and folder creation for the tensorboard callback. */
#define _POSIX_C_SOURCE 200809L
#include "tb_paths.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int make_one(const char *dir)
{
    if (mkdir(dir, 0777) == 0)
        return 0;
    struct stat st;
    if (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    return errno == EEXIST ? ENOTDIR : errno;
}

int tb_make_dirs(const char *dir, char *failed, size_t cap)
{
    size_t n = strlen(dir);
    if (n == 0 || n >= cap)
        return ENAMETOOLONG;
    memcpy(failed, dir, n + 1);
    /* Each '/' after the first character ends a parent: create it, then go on. */
    for (size_t i = 1; i <= n; i++) {
        if (failed[i] != '/' && failed[i] != '\0')
            continue;
        char saved = failed[i];
        failed[i] = '\0';
        int e = make_one(failed);
        if (e != 0)
            return e;
        failed[i] = saved;
    }
    return 0;
}

FILE *tb_create_event_file(const char *dir, time_t unix_time, char *path, size_t cap)
{
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0 || host[0] == '\0')
        strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    for (int attempt = 1; attempt <= 100; attempt++) {
        int n = attempt == 1
                    ? snprintf(path, cap, "%s/events.out.tfevents.%lld.%s", dir,
                               (long long)unix_time, host)
                    : snprintf(path, cap, "%s/events.out.tfevents.%lld.%s.%d", dir,
                               (long long)unix_time, host, attempt);
        if (n < 0 || (size_t)n >= cap) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        FILE *f = fopen(path, "wbx"); /* C11 exclusive create */
        if (f != NULL || errno != EEXIST)
            return f;
    }
    errno = EEXIST;
    return NULL;
}
