/* A checkpoint's second name (save_last's last.safetensors): a hard link where the file
 * system has them, else a copy; either way made under a temporary name and renamed over
 * the old one, so a reader finds the previous file or the new one, never a torn one. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint_link.h"
#include "io_status.h"
#include "output_file.h"

#define COPY_CHUNK (1 << 20)

/* link() refusals that mean "this file system has no hard links here". */
static int no_hard_links(int e)
{
    return e == EXDEV || e == EPERM || e == EMLINK || e == ENOTSUP || e == EOPNOTSUPP ||
           e == ENOSYS;
}

static fg_status copy_file(const char *src, const char *tmp, fg_error *err)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return fg_error_set(err, FG_INTERNAL, "%s: cannot open: %s", src, strerror(errno));
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    char *buf = malloc(COPY_CHUNK);
    fg_status st = out < 0 ? fg_error_set(err, FG_INTERNAL, "%s: cannot create: %s", tmp, strerror(errno))
                 : !buf    ? fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory copying %s", src)
                           : FG_OK;
    for (ssize_t n; st == FG_OK && (n = read(in, buf, COPY_CHUNK)) != 0;) {
        if (n < 0) {
            if (errno == EINTR) continue;
            st = fg_error_set(err, FG_INTERNAL, "%s: read failed: %s", src, strerror(errno));
            break;
        }
        for (ssize_t done = 0; st == FG_OK && done < n;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) st = fg_error_set(err, fg_io_status(errno), "%s: write failed: %s", tmp, strerror(errno));
            else done += w;
        }
    }
    if (st == FG_OK && fsync(out) != 0)
        st = fg_error_set(err, fg_io_status(errno), "%s: fsync failed: %s", tmp, strerror(errno));
    if (out >= 0 && close(out) != 0 && st == FG_OK)
        st = fg_error_set(err, fg_io_status(errno), "%s: close failed: %s", tmp, strerror(errno));
    close(in);
    free(buf);
    return st;
}

fg_status fg_checkpoint_link(const char *src, const char *dst, fg_error *err)
{
    char tmp[8300];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.link", dst) >= (int)sizeof tmp)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "checkpoint path too long: %s", dst);
    fg_status st = fg_output_check_target(dst, err);
    if (st == FG_OK)
        st = fg_output_check_target(tmp, err);
    if (st != FG_OK)
        return st;
    unlink(tmp);
    if (link(src, tmp) != 0) {
        int e = errno;
        if (!no_hard_links(e))
            return fg_error_set(err, FG_INTERNAL, "cannot link %s to %s: %s", dst, src, strerror(e));
        st = copy_file(src, tmp, err);
    }
    if (st == FG_OK)
        st = fg_output_check_target(dst, err); /* again: a node may have appeared meanwhile */
    if (st == FG_OK && rename(tmp, dst) != 0)
        st = fg_error_set(err, FG_INTERNAL, "cannot rename %s to %s: %s", tmp, dst, strerror(errno));
    /* rename() of two links to one file does nothing: dst already was src's second name. */
    unlink(tmp);
    return st;
}
