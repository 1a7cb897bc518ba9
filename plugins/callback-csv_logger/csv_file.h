/* The file side of the CSV logger: run_dir/metrics.csv with the header
 *   epoch,step,<metric columns in order of first appearance>
 * and one row per event, empty cells where the event did not carry a metric.
 *
 * When a flush brings columns the file's header lacks, the file is rewritten to a
 * temporary beside it with the widened header, each old row padded with empty cells
 * (new columns are always last, so padding is appending commas), the new rows appended,
 * and renamed over the old one: a reader never sees a half-rewritten file. Old rows are
 * streamed line by line, never all loaded, so memory stays bounded by the pending rows. */
#ifndef CSV_FILE_H
#define CSV_FILE_H

#include <stddef.h>

#include "csv_table.h"
#include "fulgur/plugin.h"

#define CSV_PATH_MAX 4096

typedef struct csv_file {
    char path[CSV_PATH_MAX];
    int created;           /* the header was written once (this run truncated the file) */
    size_t header_columns; /* metric columns in the file's header */
    long header_bytes;     /* length of the header line, newline included */
    double *values;        /* scratch: one dense row, column_count long */
    unsigned char *present;
    size_t scratch_cap;
} csv_file;

/* Writes t's pending rows to f->path (creating or widening the file as needed). Does
 * not clear them. The failure names the file and the reason: a FIFO, device or folder at
 * the path is refused, never written through (output_file.h); a full disk is FG_IO_ERROR. */
fg_status csv_file_flush(csv_file *f, const csv_table *t, fg_error *err);

void csv_file_free(csv_file *f);

#endif
