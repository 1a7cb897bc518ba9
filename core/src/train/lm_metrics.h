/* A language model's figures beside its loss: perplexity, exp of the mean cross-entropy
 * (nats per token), and for byte-level models (data.text: every byte a token, vocab 256)
 * bits per byte, loss / ln 2. A model is a language model when its loss is the softmax
 * cross-entropy over every position of a sequence (T, V); classification models get
 * neither and keep their acc. Decided once at setup; computed on the host from the loss
 * the trainer already read (no device work). */
#ifndef FG_LM_METRICS_H
#define FG_LM_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/callback.h"
#include "model.h"

#define FG_LM_METRICS_MAX 2
#define FG_LM_METRIC_NAME_MAX 64

typedef struct fg_lm_metrics {
    int ppl, bpb;
} fg_lm_metrics;

/* data_name: the [data] plugin's name. */
void fg_lm_metrics_init(fg_lm_metrics *lm, const fg_model *m, const char *data_name);

/* Appends PREFIXppl and PREFIXbpb (prefix "train/", "val/", "train/step_", ...) of loss to
 * out; their names are written into names, which must outlive out. Returns how many. */
uint32_t fg_lm_metrics_add(const fg_lm_metrics *lm, const char *prefix, double loss,
                           fg_metric *out, char names[][FG_LM_METRIC_NAME_MAX]);

/* "  ppl 3.2101  bpb 1.6812" for the printed lines ("" for none). */
void fg_lm_metrics_text(const fg_lm_metrics *lm, double loss, char *buf, size_t cap);

#endif
