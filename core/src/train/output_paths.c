/* Writable output paths, checked without creating anything (output_paths.h). */
#define _POSIX_C_SOURCE 200809L
#include "output_paths.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "output_file.h"

/* The deepest existing prefix of path (a folder to be) must be a folder we may write. */
static fg_status check_folder(const fg_config *cfg, const char *section, const char *key,
                              const char *value, const char *path, fg_error *err)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    struct stat st;
    while (dir[0] && stat(dir, &st) != 0) {
        char *slash = strrchr(dir, '/');
        if (!slash) {
            snprintf(dir, sizeof dir, ".");
            break;
        }
        *slash = '\0';
        if (!dir[0])
            snprintf(dir, sizeof dir, "/");
    }
    const char *origin = fg_config_origin(cfg, section, key);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] %s = %s: %s is not a folder, so "
                            "nothing can be written there", origin ? origin : section, section,
                            key, value, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [%s] %s = %s: cannot write in %s: %s",
                            origin ? origin : section, section, key, value, dir, strerror(errno));
    return FG_OK;
}

/* A file to be written must not be a FIFO, a device or a folder (output_file.h): said
 * before training, not after it. */
static fg_status check_file(const fg_config *cfg, const char *section, const char *key,
                            const char *path, fg_error *err)
{
    fg_error why = {0};
    fg_status st = fg_output_check_target(path, &why);
    const char *origin = fg_config_origin(cfg, section, key);
    return st == FG_OK ? FG_OK
                       : fg_error_set(err, st, "%s: [%s] %s = %s: %s", origin ? origin : section,
                                      section, key, path, why.message);
}

/* The folder a file will go to. */
static void parent_of(const char *file, char *out, size_t size)
{
    snprintf(out, size, "%s", file);
    char *slash = strrchr(out, '/');
    if (slash && slash != out)
        *slash = '\0';
    else
        snprintf(out, size, "%s", slash ? "/" : ".");
}

fg_status fg_output_paths_check(const fg_config *cfg, const char *final_checkpoint,
                                fg_error *err)
{
    const char *root = fg_config_get(cfg, "trainer", "default_root_dir");
    root = root ? root : "runs";
    fg_status st = check_folder(cfg, "trainer", "default_root_dir", root, root, err);
    char dir[4096];
    if (st == FG_OK && final_checkpoint[0] == '/') {
        parent_of(final_checkpoint, dir, sizeof dir);
        st = check_folder(cfg, "trainer", "final_checkpoint", final_checkpoint, dir, err);
        if (st == FG_OK) st = check_file(cfg, "trainer", "final_checkpoint", final_checkpoint, err);
    }
    const char *ckpt = fg_config_get(cfg, "callback.checkpoint", "dirpath");
    if (st == FG_OK && ckpt && ckpt[0] == '/')
        st = check_folder(cfg, "callback.checkpoint", "dirpath", ckpt, ckpt, err);
    return st;
}
