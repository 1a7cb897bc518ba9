/* Run folders: DIR/NAME/version_N with the resolved config inside. */
#ifndef FG_RUN_DIR_H
#define FG_RUN_DIR_H

#include <stddef.h>

#include "config.h"

/* DIR/NAME/version_N (the next free N), with config.ini inside. */
fg_status fg_run_dir_create(const fg_config *cfg, const char *root, const char *name,
                            char *out, size_t size, fg_error *err);
/* Writes the resolved config (every section and key as the run saw them). */
fg_status fg_config_write_ini(const fg_config *cfg, const char *path, fg_error *err);
/* mkdir -p */
fg_status fg_mkdirs(const char *path, fg_error *err);

#endif
