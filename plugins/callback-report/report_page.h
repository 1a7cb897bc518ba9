/* The page: report_page.html (compiled in) with its three markers filled in: @@HEAD@@
 * (extra <head> markup), @@TITLE@@ (HTML-escaped) and @@DATA@@ (the JSON data block,
 * written by a callback). Written to a temporary file beside the target and renamed over
 * it, so a browser reloading the page never reads half of one. */
#ifndef REPORT_PAGE_H
#define REPORT_PAGE_H

#include <stddef.h>
#include <stdio.h>

extern const unsigned char report_page_bytes[];
extern const size_t report_page_size;

typedef void (*report_data_writer)(FILE *out, void *user);

/* 0, or -1 with errno set and `failed` naming the file at fault. */
int report_page_write(const char *path, const char *head, const char *title,
                      report_data_writer data, void *user, char *failed, size_t failed_cap);

#endif
