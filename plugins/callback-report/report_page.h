/* The page: report_page.html (compiled in) with its three markers filled in: @@HEAD@@
 * (extra <head> markup), @@TITLE@@ (HTML-escaped) and @@DATA@@ (the JSON data block,
 * written by a callback). Written to a temporary file beside the target and renamed over
 * it, so a browser reloading the page never reads half of one. */
#ifndef REPORT_PAGE_H
#define REPORT_PAGE_H

#include <stddef.h>
#include <stdio.h>

#include "fulgur/plugin.h"

extern const unsigned char report_page_bytes[];
extern const size_t report_page_size;

typedef void (*report_data_writer)(FILE *out, void *user);

/* FG_OK, or the failure with err naming the file at fault (output_file.h: a FIFO, device
 * or folder at path is refused, never replaced; a full disk is FG_IO_ERROR). */
fg_status report_page_write(const char *path, const char *head, const char *title,
                            report_data_writer data, void *user, fg_error *err);

#endif
