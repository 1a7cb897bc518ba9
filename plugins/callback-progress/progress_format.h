/* The text of one progress line, e.g.
 *   epoch 2/? [#######.............] 180/469  34.1 it/s  ETA 0:08  loss 0.4123 acc 0.86
 * The trainer does not tell a callback how many epochs there are, hence "/?". */
#ifndef PROGRESS_FORMAT_H
#define PROGRESS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define PROGRESS_BAR_WIDTH 20

typedef struct progress_view {
    int64_t epoch;      /* 1-based */
    int64_t done;       /* steps done in this epoch */
    int64_t total;      /* steps in this epoch; <= 0: unknown, no bar and no ETA */
    double it_per_s;    /* <= 0: not known yet */
    int finished;       /* the epoch's last line: elapsed time instead of ETA */
    double elapsed_s;   /* finished lines only */
    int has_loss, has_acc;
    double loss, acc;
} progress_view;

/* "0:08", "12:34", "1:02:03"; negative or non-finite: "?". */
void progress_format_duration(char *buf, size_t cap, double seconds);

/* The line, with the bar when with_bar is set (terminals) and without it for logs. */
void progress_format_line(char *buf, size_t cap, const progress_view *v, int with_bar);

#endif
