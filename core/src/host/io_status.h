/* The status of a failed file write, for the exit-code table (README "Exit status").
 *
 * The plugin ABI's fg_status has no "I/O error", so the core marks a write that failed for
 * lack of space or a device fault with FG_STATUS_IO, a value outside the ABI enum: only the
 * core returns it (its checkpoint writer), no plugin ever receives it, and
 * fg_status_exit_code maps it to exit code 4. A write refused for a reason the user can
 * fix in the config (no such folder, permission denied) stays FG_INVALID_ARGUMENT. */
#ifndef FG_IO_STATUS_H
#define FG_IO_STATUS_H

#include <errno.h>

#include "fulgur/plugin.h"

#define FG_STATUS_IO ((fg_status)16)

/* A fit stopped by SIGINT or SIGTERM at a step boundary (train/requeue.c): exit 130 or 143,
 * as a shell reports a process those signals ended. Core-private too. */
#define FG_STATUS_SIGINT ((fg_status)17)
#define FG_STATUS_SIGTERM ((fg_status)18)

static inline fg_status fg_io_status(int e)
{
    return e == ENOSPC || e == EDQUOT || e == EFBIG || e == EIO || e == EROFS
               ? FG_STATUS_IO
               : FG_INVALID_ARGUMENT;
}

#endif
