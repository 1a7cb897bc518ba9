/* Writing the page (report_page.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "report_page.h"

#include <string.h>

#include "output_file.h"

#define DATA_BLOCK "<script type=\"application/json\" id=\"fulgur-report-data\">@@DATA@@"

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

/* The template's bytes [from, to), markers replaced. */
static void write_range(FILE *out, const char *from, const char *to, const char *head,
                        const char *title, report_data_writer data, void *user)
{
    for (const char *p = from; p < to;) {
        const char *m = memmem(p, (size_t)(to - p), "@@", 2);
        if (m == NULL) {
            fwrite(p, 1, (size_t)(to - p), out);
            break;
        }
        fwrite(p, 1, (size_t)(m - p), out);
        size_t left = (size_t)(to - m);
        if (left >= 8 && strncmp(m, "@@HEAD@@", 8) == 0) {
            fputs(head, out);
            p = m + 8;
        } else if (left >= 9 && strncmp(m, "@@TITLE@@", 9) == 0) {
            write_escaped(out, title);
            p = m + 9;
        } else if (left >= 8 && strncmp(m, "@@DATA@@", 8) == 0) {
            data(out, user);
            p = m + 8;
        } else {
            fputs("@@", out);
            p = m + 2;
        }
    }
}

static const char *page_begin(void) { return (const char *)report_page_bytes; }
static const char *page_end(void) { return page_begin() + report_page_size; }

/* Where the data block's <script> starts in the template (its end when absent). */
static const char *data_block(void)
{
    const char *b = memmem(page_begin(), report_page_size, DATA_BLOCK, strlen(DATA_BLOCK));
    return b ? b : page_end();
}

size_t report_page_head_offset(void)
{
    const char *m = memmem(page_begin(), report_page_size, "@@HEAD@@", 8);
    return m ? (size_t)(m - page_begin()) : 0;
}

void report_page_prefix(FILE *out, const char *head, const char *title)
{
    write_range(out, page_begin(), data_block(), head, title, NULL, NULL);
}

void report_page_tail(FILE *out, report_data_writer data, void *user)
{
    write_range(out, data_block(), page_end(), "", "", data, user);
}

typedef struct page_args {
    const char *head, *title;
    report_data_writer data;
    void *user;
} page_args;

static int write_page_body(FILE *out, void *user)
{
    const page_args *a = user;
    write_range(out, page_begin(), page_end(), a->head, a->title, a->data, a->user);
    return ferror(out) ? -1 : 0;
}

fg_status report_page_write(const char *path, const char *head, const char *title,
                            report_data_writer data, void *user, fg_error *err)
{
    page_args a = {head, title, data, user};
    return fg_output_write_atomic(path, write_page_body, &a, err);
}
