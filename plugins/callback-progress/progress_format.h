/* The text of one progress line, e.g.
 *   epoch 2/3 [#######.............] 180/469  34.1 it/s  ETA 0:08  loss 0.4123 acc 0.86
 * and an epoch's summary line, with the validation metrics when the epoch had them:
 *   epoch 2/3 [####################] 469/469  34.1 it/s  time 0:13  loss 0.4011 acc 0.86  val loss 0.3900 acc 0.87
 * The line is fitted to the terminal's width: the bar narrows first (down to
 * PROGRESS_BAR_MIN), then the speed, the accuracies, the bar, the validation loss, the
 * time and the training loss are dropped in that order, and only then is the text cut. */
#ifndef PROGRESS_FORMAT_H
#define PROGRESS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define PROGRESS_BAR_WIDTH 20
#define PROGRESS_BAR_MIN 10

typedef struct progress_view {
    int64_t epoch;      /* 1-based */
    int64_t max_epochs; /* <= 0: unknown, "epoch 2/?" */
    int64_t done;       /* steps done in this epoch */
    int64_t total;      /* steps in this epoch; <= 0: unknown, no bar and no ETA */
    double it_per_s;    /* <= 0: not known yet */
    int finished;       /* the epoch's last line: elapsed time instead of ETA */
    double elapsed_s;   /* finished lines only */
    int has_loss, has_acc;
    double loss, acc;
    int has_val_loss, has_val_acc;
    double val_loss, val_acc;
    int has_ppl, has_val_ppl; /* a language model's perplexity (train/ppl, val/ppl) */
    double ppl, val_ppl;
} progress_view;

typedef struct progress_style {
    int bar;   /* draw the bar (terminals) */
    int width; /* columns the line may use; <= 0: no limit (logs) */
    int color; /* colour the bar's done part (SGR); never counted as width */
} progress_style;

/* "0:08", "12:34", "1:02:03"; negative or non-finite: "?". */
void progress_format_duration(char *buf, size_t cap, double seconds);

/* The line, fitted to style->width visible columns (escape sequences not counted). */
void progress_format_line(char *buf, size_t cap, const progress_view *v, const progress_style *style);

#endif
