/* The run's page kept in place, so that a write costs the new rows, not the run: the page
 * is the template's prefix (report_page.h), then one row block per write that had new rows,
 *   <script type="application/json" class="fulgur-report-rows">[[epoch, step, ...], ...]</script>
 * and the tail: the data block (the run's document, its "rows" empty and "row_blocks" true)
 * and the rest of the template. A write appends its block where the tail began and writes
 * the tail after it; the prefix and the earlier blocks are never rewritten. The first write
 * creates the page whole through a temporary file (output_file.h); so does a write that
 * finds the page replaced, removed or resized by someone else, with `restarted` set (the
 * earlier rows are then lost to the page). The auto-refresh <meta> of a running run is
 * overwritten, in place, by a comment of its length when the run has ended. */
#ifndef REPORT_FILE_H
#define REPORT_FILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "report_page.h"

typedef struct report_file {
    off_t rows_end;    /* where the next row block goes: the tail's first byte */
    off_t end;         /* the page's size as last written */
    off_t refresh_at;  /* the auto-refresh <meta>; refresh_len 0: none on the page */
    size_t refresh_len;
    dev_t dev;
    ino_t ino;
    int exists;        /* the page was written by this writer */
    int restarted;     /* it was found changed by someone else and started again */
} report_file;

typedef struct report_file_parts {
    const char *head;        /* the <meta> refresh of a running run, or "" */
    const char *title;
    int has_rows;            /* rows() has rows to write */
    report_data_writer rows; /* the new rows' JSON text, "[...],\n[...]" (no brackets) */
    report_data_writer doc;  /* the run's document (the data block's text) */
    void *user;
    int ended;               /* the run has ended: no more refreshing */
} report_file_parts;

/* Writes the page at path (see above). FG_OK, or the failure naming the file (a full disk
 * is FG_IO_ERROR; a FIFO, device or folder at path is refused, never written through). */
fg_status report_file_write(report_file *f, const char *path, const report_file_parts *parts,
                            fg_error *err);

#endif
