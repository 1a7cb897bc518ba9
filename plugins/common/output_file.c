/* Output files that never replace anything but a regular file (output_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

fg_status fg_output_errno_status(int e)
{
    return e == ENOSPC || e == EDQUOT || e == EFBIG || e == EIO || e == EROFS
               ? FG_IO_ERROR
               : FG_INVALID_ARGUMENT;
}

static const char *kind_of(mode_t mode)
{
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

static fg_status refuse(const char *path, mode_t mode, fg_error *err)
{
    const char *kind = kind_of(mode);
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: is %s%s: refusing to replace it", path,
                        kind, kind[0] == 'n' ? "" : ", not a regular file");
}

fg_status fg_output_check_target(const char *path, fg_error *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return FG_OK; /* absent, or a dangling link: the rename replaces the link alone */
    return S_ISREG(sb.st_mode) ? FG_OK : refuse(path, sb.st_mode, err);
}

static fg_status open_failed(const char *path, int e, fg_error *err)
{
    return fg_error_set(err, fg_output_errno_status(e), "%s: cannot open for writing: %s", path,
                        strerror(e));
}

/* O_NONBLOCK: a FIFO without a reader fails at once instead of waiting; fstat then sees
 * what was opened, so a node swapped in after the check is refused too. */
static int open_regular(const char *path, int append, fg_status *st, fg_error *err)
{
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | (append ? O_APPEND : 0);
    int fd = open(path, flags, 0644);
    struct stat sb;
    if (fd < 0) {
        int e = errno;
        *st = stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) ? refuse(path, sb.st_mode, err)
                                                           : open_failed(path, e, err);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fstat(fd, &sb) != 0)
        *st = open_failed(path, errno, err);
    else if (!S_ISREG(sb.st_mode))
        *st = refuse(path, sb.st_mode, err);
    else if ((!append && ftruncate(fd, 0) != 0) || fl < 0 ||
             fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        *st = open_failed(path, errno, err);
    else
        return fd;
    close(fd);
    return -1;
}

fg_status fg_output_open(const char *path, const char *mode, FILE **out, fg_error *err)
{
    int append = mode[0] == 'a';
    *out = NULL;
    fg_status st = fg_output_check_target(path, err);
    if (st != FG_OK)
        return st;
    int fd = open_regular(path, append, &st, err);
    if (fd < 0)
        return st;
    if (!(*out = fdopen(fd, append ? "a" : "w"))) {
        st = open_failed(path, errno, err);
        close(fd);
    }
    return st;
}

static fg_status write_tmp(const char *tmp, fg_output_body body, void *user, fg_error *err)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return fg_error_set(err, fg_output_errno_status(e), "%s: cannot create: %s", tmp,
                            strerror(e));
    }
    errno = 0;
    int bad = body(out, user) != 0;
    bad = fflush(out) != 0 || ferror(out) || bad;
    int e = errno;
    if (fclose(out) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad)
        return fg_error_set(err, fg_output_errno_status(e ? e : EIO), "%s: cannot write: %s",
                            tmp, strerror(e ? e : EIO));
    return FG_OK;
}

fg_status fg_output_write_atomic(const char *path, fg_output_body body, void *user,
                                 fg_error *err)
{
    fg_status st = fg_output_check_target(path, err);
    if (st != FG_OK)
        return st;
    size_t cap = strlen(path) + 32;
    char *tmp = malloc(cap);
    if (!tmp)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
    st = write_tmp(tmp, body, user, err);
    /* checked again: the write took time, and a node may have been put there meanwhile */
    if (st == FG_OK)
        st = fg_output_check_target(path, err);
    if (st == FG_OK && rename(tmp, path) != 0) {
        int e = errno;
        st = fg_error_set(err, fg_output_errno_status(e), "%s: cannot rename %s over it: %s",
                          path, tmp, strerror(e));
    }
    if (st != FG_OK)
        unlink(tmp);
    free(tmp);
    return st;
}
