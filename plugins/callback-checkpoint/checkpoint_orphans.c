/* Temporary checkpoint files (NAME.tmp.PID, see the trainer's atomic writer) of writers that
 * died before their rename: removed at the next fit's start, so a killed run leaves no
 * clutter. A file whose writer still runs (its pid alive) is left alone. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "checkpoint.h"

/* The writer's pid when name is NAME.tmp.PID, else 0. */
static long temporary_pid(const char *name)
{
    const char *tmp = strstr(name, ".tmp.");
    if (tmp == NULL)
        return 0;
    const char *digits = tmp + 5;
    char *end = NULL;
    long pid = strtol(digits, &end, 10);
    return end != digits && *end == '\0' && pid > 0 ? pid : 0;
}

static int writer_dead(long pid)
{
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

void ckpt_remove_orphans(const fg_host *host, const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        long pid = temporary_pid(e->d_name);
        char path[4096];
        if (pid == 0 || !writer_dead(pid) ||
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
            continue;
        if (unlink(path) == 0) {
            if (host->log)
                host->log(host, FG_LOG_INFO, "removed %s, left by a writer (pid %ld) that "
                          "died before finishing it", path, pid);
        } else if (host->log) {
            host->log(host, FG_LOG_WARN, "cannot remove the orphaned temporary file %s: %s",
                      path, strerror(errno));
        }
    }
    closedir(d);
}

void ckpt_remove_family_orphans(const fg_host *host, const char *run_dir, const char *dirpath)
{
    if (dirpath[0] == '/') {
        ckpt_remove_orphans(host, dirpath);
        return;
    }
    /* run_dir is ROOT/NAME/version_N: every version of the family may hold one. */
    char family[4096], dir[4096];
    if (snprintf(family, sizeof family, "%s", run_dir) >= (int)sizeof family)
        return;
    char *slash = strrchr(family, '/');
    if (slash == NULL || strncmp(slash + 1, "version_", 8) != 0) {
        if (snprintf(dir, sizeof dir, "%s/%s", run_dir, dirpath) < (int)sizeof dir)
            ckpt_remove_orphans(host, dir);
        return;
    }
    *slash = '\0';
    DIR *d = opendir(family);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, "version_", 8) == 0 &&
            snprintf(dir, sizeof dir, "%s/%s/%s", family, e->d_name, dirpath) < (int)sizeof dir)
            ckpt_remove_orphans(host, dir);
    closedir(d);
}
