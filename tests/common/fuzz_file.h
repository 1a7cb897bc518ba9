/* The fuzz drivers' one helper: the input as a file, for readers that take a path. The
 * file lives in a folder made once per process and is rewritten for every input. */
#ifndef FG_FUZZ_FILE_H
#define FG_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The process's scratch folder: $TMPDIR/fulgur-fuzz.XXXXXX, made at the first call. */
static inline const char *fuzz_dir(void)
{
    static char dir[512];
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/fulgur-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
            abort();
    }
    return dir;
}

/* Writes data to dir/name (dir under fuzz_dir(), made when missing); returns the path. */
static inline const char *fuzz_write(const char *sub, const char *name, const uint8_t *data,
                                     size_t size, char *path, size_t cap)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s%s%s", fuzz_dir(), sub[0] ? "/" : "", sub);
    for (char *p = dir + strlen(fuzz_dir()) + 1; sub[0] && *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0700);
            *p = '/';
        }
    mkdir(dir, 0700);
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
    return path;
}

#endif
