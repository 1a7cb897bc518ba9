/* The status of a failed file write, for the exit-code table (README "Exit status").
 *
 * A write that failed for lack of space or a device fault is FG_STATUS_IO, the ABI's
 * FG_IO_ERROR (1.4: plugins return it too), and fg_status_exit_code maps it to exit code 4. A write refused for a reason the user can
 * fix in the config (no such folder, permission denied) stays FG_INVALID_ARGUMENT. */
#ifndef FG_IO_STATUS_H
#define FG_IO_STATUS_H

#include <errno.h>

#include "fulgur/plugin.h"

#define FG_STATUS_IO FG_IO_ERROR

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
