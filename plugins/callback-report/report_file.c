/* The run's page kept in place (report_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "report_file.h"

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output_file.h"

#define ROWS_OPEN "<script type=\"application/json\" class=\"fulgur-report-rows\">["
#define ROWS_CLOSE "]</script>\n"

typedef struct body_args {
    report_file *f;
    const report_file_parts *p;
} body_args;

static void write_rows_block(FILE *out, const report_file_parts *p)
{
    if (!p->has_rows)
        return;
    fputs(ROWS_OPEN, out);
    p->rows(out, p->user);
    fputs(ROWS_CLOSE, out);
}

/* The whole page into a new file, the offsets noted. */
static int write_whole(FILE *out, void *user)
{
    const body_args *a = user;
    report_file *f = a->f;
    const report_file_parts *p = a->p;
    report_page_prefix(out, p->head, p->title);
    f->refresh_at = (off_t)report_page_head_offset();
    f->refresh_len = strlen(p->head);
    write_rows_block(out, p);
    f->rows_end = ftello(out);
    report_page_tail(out, p->doc, p->user);
    f->end = ftello(out);
    return ferror(out) || f->rows_end < 0 || f->end < 0 ? -1 : 0;
}

static fg_status create(report_file *f, const char *path, const report_file_parts *p,
                        fg_error *err)
{
    body_args a = {f, p};
    fg_status st = fg_output_write_atomic(path, write_whole, &a, err);
    if (st != FG_OK)
        return st;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return fg_error_set(err, fg_output_errno_status(errno), "%s: cannot stat after "
                            "writing: %s", path, strerror(errno));
    f->dev = sb.st_dev;
    f->ino = sb.st_ino;
    f->exists = 1;
    return FG_OK;
}

static fg_status failed(const char *path, const char *what, int e, fg_error *err)
{
    return fg_error_set(err, fg_output_errno_status(e), "%s: %s: %s", path, what, strerror(e));
}

/* The new rows and the tail, built in memory. 0, or -1 with errno. */
static int build_append(const report_file_parts *p, char **text, size_t *len, size_t *block)
{
    FILE *m = open_memstream(text, len);
    if (m == NULL)
        return -1;
    write_rows_block(m, p);
    long at = ftell(m);
    report_page_tail(m, p->doc, p->user);
    int bad = ferror(m) || at < 0;
    if (fclose(m) != 0 || bad) {
        free(*text);
        *text = NULL;
        errno = errno ? errno : ENOMEM;
        return -1;
    }
    *block = (size_t)at;
    return 0;
}

static int write_all_at(int fd, const char *buf, size_t n, off_t at)
{
    while (n > 0) {
        ssize_t got = pwrite(fd, buf, n, at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        buf += got;
        n -= (size_t)got;
        at += got;
    }
    return 0;
}

/* Over the old tail, in one pwrite (a reader or a kill between two writes of a buffered
 * stream would find the page cut short): the new rows and the tail; then, once the run
 * ended, the refresh <meta> blanked by "<!--" spaces "-->" of its length; then the page
 * cut at its new end. */
static int append(report_file *f, int fd, const report_file_parts *p, off_t *tail_at,
                  off_t *end)
{
    char *text = NULL;
    size_t len = 0, block = 0;
    if (build_append(p, &text, &len, &block) != 0)
        return -1;
    int rc = write_all_at(fd, text, len, f->rows_end);
    free(text);
    if (rc != 0)
        return -1;
    *tail_at = f->rows_end + (off_t)block;
    *end = f->rows_end + (off_t)len;
    if (p->ended && f->refresh_len >= 7) {
        char blank[128];
        size_t n = f->refresh_len < sizeof blank ? f->refresh_len : sizeof blank;
        memset(blank, ' ', n);
        memcpy(blank, "<!--", 4);
        memcpy(blank + n - 3, "-->", 3);
        if (n != f->refresh_len || write_all_at(fd, blank, n, f->refresh_at) != 0)
            return -1;
    }
    return *end < f->end ? ftruncate(fd, *end) : 0;
}

fg_status report_file_write(report_file *f, const char *path, const report_file_parts *p,
                            fg_error *err)
{
    if (!f->exists)
        return create(f, path, p, err);
    /* O_NONBLOCK: a FIFO put there is refused below, not waited on */
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (fd < 0 && errno != ENOENT && errno != ENXIO)
        return failed(path, "cannot open for writing", errno, err);
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_dev != f->dev ||
        sb.st_ino != f->ino || sb.st_size != f->end) {
        if (fd >= 0)
            close(fd);
        f->exists = 0;
        f->restarted = 1;
        return create(f, path, p, err); /* refuses what is not a regular file */
    }
    off_t tail_at = -1, end = -1;
    int rc = append(f, fd, p, &tail_at, &end);
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc != 0) {
        f->exists = 0; /* half written: the next write starts the page again */
        return failed(path, "write failed", e ? e : EIO, err);
    }
    f->rows_end = tail_at;
    f->end = end;
    if (p->ended)
        f->refresh_len = 0;
    return FG_OK;
}
