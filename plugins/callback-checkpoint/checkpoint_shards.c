/* The per-rank shard folders of a sharded checkpoint index that left the top k. The trainer
 * removes unreferenced shard folders right after each save; the index that left is deleted
 * later (at the next event, once its replacement exists), so its folder is removed here,
 * with it. The folder of index DIR/NAME.safetensors is DIR/NAME.s<step>-<hex>.shards
 * (core/src/checkpoint/ckpt_sharded.c); it holds rank-*.safetensors files only. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"

#define SHARDS_SUFFIX ".shards"

/* NAME.s<digits>-<hex>.shards for this NAME, exactly. */
static int is_shard_folder_of(const char *entry, const char *name, size_t name_len)
{
    if (strncmp(entry, name, name_len) != 0 || entry[name_len] != '.' || entry[name_len + 1] != 's')
        return 0;
    const char *p = entry + name_len + 2, *digits = p;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == digits || *p++ != '-')
        return 0;
    const char *hex = p;
    while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))
        p++;
    return p != hex && strcmp(p, SHARDS_SUFFIX) == 0;
}

static void remove_folder(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char file[4096];
        if (strncmp(e->d_name, "rank-", 5) == 0 &&
            snprintf(file, sizeof file, "%s/%s", path, e->d_name) < (int)sizeof file)
            unlink(file);
    }
    closedir(d);
    rmdir(path); /* fails, and keeps the folder, if anything else is in it */
}

void ckpt_remove_shard_folders(const char *index_path)
{
    const char *slash = strrchr(index_path, '/');
    char dir[4096];
    const char *base = slash ? slash + 1 : index_path;
    if (snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - index_path) : 1,
                 slash ? index_path : ".") >= (int)sizeof dir)
        return;
    size_t len = strlen(base);
    if (len > strlen(CKPT_EXTENSION) && strcmp(base + len - strlen(CKPT_EXTENSION), CKPT_EXTENSION) == 0)
        len -= strlen(CKPT_EXTENSION);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[4096];
        if (is_shard_folder_of(e->d_name, base, len) &&
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            remove_folder(path);
    }
    closedir(d);
}
