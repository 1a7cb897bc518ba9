/* Writing the page (report_page.h). */
#define _POSIX_C_SOURCE 200809L
#include "report_page.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void write_escaped(FILE *out, const char *text)
{
    for (const char *p = text; *p != '\0'; p++) {
        switch (*p) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*p, out);
        }
    }
}

/* The template, markers replaced. */
static void write_page(FILE *out, const char *head, const char *title, report_data_writer data,
                       void *user)
{
    const char *page = (const char *)report_page_bytes, *end = page + report_page_size;
    for (const char *p = page; p < end;) {
        const char *m = strstr(p, "@@");
        if (m == NULL || m >= end) {
            fwrite(p, 1, (size_t)(end - p), out);
            break;
        }
        fwrite(p, 1, (size_t)(m - p), out);
        if (strncmp(m, "@@HEAD@@", 8) == 0) {
            fputs(head, out);
            p = m + 8;
        } else if (strncmp(m, "@@TITLE@@", 9) == 0) {
            write_escaped(out, title);
            p = m + 9;
        } else if (strncmp(m, "@@DATA@@", 8) == 0) {
            data(out, user);
            p = m + 8;
        } else {
            fputs("@@", out);
            p = m + 2;
        }
    }
}

int report_page_write(const char *path, const char *head, const char *title,
                      report_data_writer data, void *user, char *failed, size_t failed_cap)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    snprintf(failed, failed_cap, "%s", tmp);
    FILE *out = fopen(tmp, "w");
    if (out == NULL)
        return -1;
    write_page(out, head, title, data, user);
    int bad = fflush(out) != 0 || ferror(out);
    int e = errno;
    if (fclose(out) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        errno = e ? e : EIO;
        return -1;
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        snprintf(failed, failed_cap, "%s (renamed from %s)", path, tmp);
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}
