/* Data file names and whole-file reads for the data plugins. */
#define _POSIX_C_SOURCE 200809L
#include "data_path.h"
#include "plugin_options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

fg_status fg_plugin_resolve_path(const char *who, const char *dir, const char *name,
                                 char **out, fg_error *err)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    if (!(*out = malloc(n)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", who);
    if (name[0] == '\0' || name[0] == '/' || dir[0] == '\0')
        snprintf(*out, n, "%s", name);
    else
        snprintf(*out, n, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
    return FG_OK;
}

fg_status fg_plugin_split_paths(const fg_host *host, const char *who,
                                const char *const keys[FG_SPLIT_TEST + 1], char *paths[],
                                const char **dir, fg_error *err)
{
    const char *name = NULL;
    fg_status st = fg_plugin_get_string(host, who, "dir", dir, err);
    for (int split = FG_SPLIT_TRAIN; st == FG_OK && split <= FG_SPLIT_TEST; split++) {
        st = fg_plugin_get_string(host, who, keys[split], &name, err);
        if (st == FG_OK)
            st = fg_plugin_resolve_path(who, *dir, name, &paths[split], err);
    }
    return st;
}

fg_status fg_plugin_read_file(const char *who, const char *path, unsigned char **data,
                              int64_t *size, fg_error *err)
{
    *data = NULL;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it. */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    if (!f)
        return fg_error_set(err, errno == ENOENT ? FG_NOT_FOUND : FG_INVALID_ARGUMENT,
                            "%s: %s: cannot open: %s", who, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: %s: not a regular file", who, path);
    }
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        fclose(f);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: %s: out of memory for %lld bytes",
                            who, path, (long long)st.st_size);
    }
    size_t got = fread(buf, 1, (size_t)st.st_size, f);
    int failed = ferror(f);
    fclose(f);
    if (failed || got != (size_t)st.st_size) {
        free(buf);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: %s: read %zu of %lld bytes", who,
                            path, got, (long long)st.st_size);
    }
    buf[got] = '\0';
    *data = buf;
    *size = (int64_t)got;
    return FG_OK;
}
