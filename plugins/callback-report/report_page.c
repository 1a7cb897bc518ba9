/* Writing the page (report_page.h). */
#define _POSIX_C_SOURCE 200809L
#include "report_page.h"

#include <string.h>

#include "output_file.h"

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

typedef struct page_args {
    const char *head, *title;
    report_data_writer data;
    void *user;
} page_args;

static int write_page_body(FILE *out, void *user)
{
    const page_args *a = user;
    write_page(out, a->head, a->title, a->data, a->user);
    return ferror(out) ? -1 : 0;
}

fg_status report_page_write(const char *path, const char *head, const char *title,
                            report_data_writer data, void *user, fg_error *err)
{
    page_args a = {head, title, data, user};
    return fg_output_write_atomic(path, write_page_body, &a, err);
}
