/* Output files that never replace or write through anything but a regular file.
 *
 * Every file fulgur writes (checkpoints, status.json, config.ini, metrics.csv, report.html,
 * predictions.csv, `ckpt merge -o`, `runs --report`) goes through these, in the core and in
 * the plugins alike: a path that names a FIFO, a device, a folder or a socket (links
 * followed) is refused with FG_INVALID_ARGUMENT and its kind, and is never unlinked,
 * renamed over or opened for writing. libc and the SDK's fg_error only, so the core
 * compiles this same file (core/CMakeLists.txt). */
#ifndef FULGUR_PLUGIN_COMMON_OUTPUT_FILE_H
#define FULGUR_PLUGIN_COMMON_OUTPUT_FILE_H

#include <stdio.h>

#include "fulgur/plugin.h"

/* The status of a write that failed with errno e: FG_IO_ERROR for lack of space or a device
 * fault (ENOSPC, EDQUOT, EFBIG, EIO, EROFS: exit 4), else FG_INVALID_ARGUMENT (a path the
 * user can fix: exit 2). */
fg_status fg_output_errno_status(int e);

/* FG_OK when path does not exist (a dangling link included) or is a regular file; else
 * FG_INVALID_ARGUMENT, "PATH: is a FIFO, not a regular file: refusing to replace it". */
fg_status fg_output_check_target(const char *path, fg_error *err);

/* Opens *out for writing path, created when absent: mode "w" empties it, "a" appends. A
 * FIFO is opened without waiting for a reader, then refused with any other non-regular file
 * before a byte is written ("PATH: cannot open for writing: REASON" on other failures). */
fg_status fg_output_open(const char *path, const char *mode, FILE **out, fg_error *err);

/* Writes the body into out; 0, or -1 with errno set. */
typedef int (*fg_output_body)(FILE *out, void *user);

/* PATH.tmp.PID, the body, a flush, the target checked again, a rename over PATH: a reader
 * sees the old file or the new one. On failure the temporary file is removed and PATH is
 * left as it was; the message names the file and the reason. */
fg_status fg_output_write_atomic(const char *path, fg_output_body body, void *user,
                                 fg_error *err);

#endif
