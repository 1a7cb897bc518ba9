/* The page: report_page.html (compiled in) with its three markers filled in: @@HEAD@@
 * (extra <head> markup), @@TITLE@@ (HTML-escaped) and @@DATA@@ (the JSON data block,
 * written by a callback). Written whole to a temporary file beside the target and renamed
 * over it (report_page_write), or in two parts for a page kept in place (report_file.h):
 * the prefix, everything before the data block's <script>, and the tail, that block and
 * everything after it. */
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

/* The template up to the data block's <script>, head and title filled in. */
void report_page_prefix(FILE *out, const char *head, const char *title);
/* Where @@HEAD@@ starts in the page: the template has no marker before it. */
size_t report_page_head_offset(void);
/* The data block (its text from data()) and the rest of the template. */
void report_page_tail(FILE *out, report_data_writer data, void *user);

#endif
