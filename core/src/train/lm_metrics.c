/* Perplexity and bits per byte of a language model's loss (lm_metrics.h). */
#include "lm_metrics.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void fg_lm_metrics_init(fg_lm_metrics *lm, const fg_model *m, const char *data_name)
{
    lm->ppl = fg_model_loss(m) == FG_LOSS_KIND_XENT && fg_model_positions(m) > 1;
    lm->bpb = lm->ppl && fg_model_num_classes(m) == 256 && data_name &&
              strcmp(data_name, "text") == 0;
}

uint32_t fg_lm_metrics_add(const fg_lm_metrics *lm, const char *prefix, double loss,
                           fg_metric *out, char names[][FG_LM_METRIC_NAME_MAX])
{
    uint32_t n = 0;
    if (lm->ppl) {
        snprintf(names[n], FG_LM_METRIC_NAME_MAX, "%sppl", prefix);
        out[n] = (fg_metric){names[n], exp(loss)};
        n++;
    }
    if (lm->bpb) {
        snprintf(names[n], FG_LM_METRIC_NAME_MAX, "%sbpb", prefix);
        out[n] = (fg_metric){names[n], loss / log(2.0)};
        n++;
    }
    return n;
}

void fg_lm_metrics_text(const fg_lm_metrics *lm, double loss, char *buf, size_t cap)
{
    int len = 0;
    buf[0] = '\0';
    if (lm->ppl)
        len = snprintf(buf, cap, "  ppl %.4f", exp(loss));
    if (lm->bpb && len >= 0 && (size_t)len < cap)
        snprintf(buf + len, cap - (size_t)len, "  bpb %.4f", loss / log(2.0));
}
