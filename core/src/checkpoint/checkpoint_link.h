/* A checkpoint's second name (save_last's last.safetensors). */
#ifndef FG_CHECKPOINT_LINK_H
#define FG_CHECKPOINT_LINK_H

#include "fulgur/plugin.h"

/* dst (a checkpoint's second name) made a hard link of src, or a copy where the file system
 * has none, through a temporary name and a rename. */
fg_status fg_checkpoint_link(const char *src, const char *dst, fg_error *err);

#endif
