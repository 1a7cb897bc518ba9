/* File names in data plugin options: resolved against the plugin's `dir` option. */
#ifndef FULGUR_PLUGIN_COMMON_DATA_PATH_H
#define FULGUR_PLUGIN_COMMON_DATA_PATH_H

#include "fulgur/data.h"
#include "fulgur/plugin.h"

/* *out = name when it is absolute, empty, or dir is empty; else dir/name. malloc'ed. */
fg_status fg_plugin_resolve_path(const char *who, const char *dir, const char *name,
                                 char **out, fg_error *err);

/* The per-split file options: paths[split] for FG_SPLIT_TRAIN..FG_SPLIT_TEST is option
 * keys[split] resolved against option `dir` (*dir: its value). Stops at the first option
 * that cannot be read ("who: cannot read option KEY: ..."); the paths set so far are the
 * caller's to free. */
fg_status fg_plugin_split_paths(const fg_host *host, const char *who,
                                const char *const keys[FG_SPLIT_TEST + 1], char *paths[],
                                const char **dir, fg_error *err);

/* Reads a regular file whole (a FIFO or device is refused: it could block or never end).
 * *data is malloc'ed (NUL-terminated, not counted in *size). Messages start "who: path:". */
fg_status fg_plugin_read_file(const char *who, const char *path, unsigned char **data,
                              int64_t *size, fg_error *err);

#endif
