/* Versioned run folders (DIR/NAME/version_N/) holding the resolved config. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "run_dir.h"
#include "output_file.h"

fg_status fg_mkdirs(const char *path, fg_error *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "path too long: %s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: cannot create: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: cannot create: %s", buf, strerror(errno));
    return FG_OK;
}

static long highest_version(const char *family)
{
    long best = -1;
    DIR *d = opendir(family);
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char *end;
        if (strncmp(e->d_name, "version_", 8) != 0) continue;
        long v = strtol(e->d_name + 8, &end, 10);
        if (*end == 0 && v > best) best = v;
    }
    closedir(d);
    return best;
}

static int write_ini(FILE *f, void *user)
{
    const fg_config *cfg = user;
    fprintf(f, "; the configuration this run used: %s with its command-line overrides\n",
            fg_config_path(cfg));
    for (size_t i = 0; i < fg_config_section_count(cfg); i++) {
        const char *sec = fg_config_section_name(cfg, i);
        fprintf(f, "\n[%s]\n", sec);
        for (size_t j = 0; j < fg_config_entry_count(cfg, sec); j++) {
            const char *key = fg_config_entry_key(cfg, sec, j);
            fprintf(f, "%s = %s\n", key, fg_config_get(cfg, sec, key));
        }
    }
    return ferror(f) ? -1 : 0;
}

fg_status fg_config_write_ini(const fg_config *cfg, const char *path, fg_error *err)
{
    return fg_output_write_atomic(path, write_ini, (void *)cfg, err);
}

fg_status fg_run_dir_create(const fg_config *cfg, const char *root, const char *name, char *out,
                            size_t size, fg_error *err)
{
    char family[4096];
    snprintf(family, sizeof family, "%s/%s", root, name);
    fg_status st = fg_mkdirs(family, err);
    if (st != FG_OK) return st;
    /* mkdir is the lock: two runs starting together take different versions. */
    for (long v = highest_version(family) + 1;; v++) {
        if (snprintf(out, size, "%s/version_%ld", family, v) >= (int)size)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "run folder path too long under %s", family);
        if (mkdir(out, 0777) == 0) break;
        if (errno != EEXIST)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: cannot create: %s", out, strerror(errno));
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/config.ini", out);
    return fg_config_write_ini(cfg, path, err);
}
