/* classifier_smoothed (ABI 1.11, [model] label_smoothing) on the CPU: the fused classifier
 * of softmax_xent.c with PyTorch's label smoothing. Per row: the maximum, the exponentials'
 * sum in 16 float lanes combined in double (softmax_xent.c's order, so eps = 0 gives the
 * classifier's bits), the loss (1 - eps) * nll + eps * (lse - mean logit) in double, and the
 * gradient (p - (1 - eps) * onehot - eps / classes) * factor written over the row. Losses
 * and hits are summed per fixed row chunk in double and the chunks in order. */
#include <math.h>

#include "cpu_backend.h"
#include "cpu_stage.h"
#include "fast_exp.h"
#include "xent_rows.h"

typedef struct fg_cpu_smooth_ctx {
    const float *logits;
    const int32_t *labels;
    int classes;
    size_t ld;
    float *dlogits; /* NULL: no gradient */
    double eps;
    float on, off;  /* the gradient's targets: 1 - eps at the label, eps / classes */
    float factor;
    fg_cpu_xent_sums sums;
} fg_cpu_smooth_ctx;

/* The sum of exp(x - m) over the row, in softmax_xent.c's lanes and order. */
static inline __attribute__((always_inline)) double smooth_exp_sum(const float *x, int n,
                                                                   float m)
{
    float lane[FG_CPU_XENT_LANES] = {0};
    int j = 0;
    for (; j + FG_CPU_XENT_LANES <= n; j += FG_CPU_XENT_LANES)
        for (int l = 0; l < FG_CPU_XENT_LANES; l++)
            lane[l] += fg_cpu_exp(x[j + l] - m);
    double sum = 0.0;
    for (; j < n; j++)
        sum += (double)fg_cpu_exp(x[j] - m);
    for (int l = 0; l < FG_CPU_XENT_LANES; l++)
        sum += lane[l];
    return sum;
}

/* One row: its loss (0 when ignored), *hit; its gradient into d (may alias x) when d. */
static inline __attribute__((always_inline)) double smooth_row(const fg_cpu_smooth_ctx *c,
                                                               const float *x, int label,
                                                               float *d, int *hit)
{
    int n = c->classes;
    float m = fg_cpu_xent_max(x, n);
    int best = 0;
    while (best < n && !(x[best] == m))
        best++;
    best = best < n ? best : 0; /* x[0] is NaN */
    *hit = best == label;
    int ignored = label == FG_CPU_IGNORED_LABEL;
    double sum = smooth_exp_sum(x, n, m);
    double lse = (double)m + log(sum);
    double loss = 0.0;
    if (!ignored) {
        double nll = lse - (double)x[label];
        double logit_sum = 0.0;
        for (int j = 0; c->eps != 0.0 && j < n; j++)
            logit_sum += (double)x[j];
        /* eps = 0: exactly nll (the smoothing term is finite, times 0) */
        loss = (1.0 - c->eps) * nll + c->eps * (lse - logit_sum / (double)n);
    }
    if (!d)
        return loss;
    if (ignored) {
        for (size_t j = 0; j < c->ld; j++)
            d[j] = 0.0f;
        return loss;
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) {
        float p = fg_cpu_exp(x[j] - m) * inv;
        float target = j == label ? c->on : 0.0f;
        d[j] = (p - target - c->off) * c->factor;
    }
    for (size_t j = (size_t)n; j < c->ld; j++)
        d[j] = 0.0f;
    return loss;
}

FG_CPU_VECTOR_CLONES static void smooth_chunks(void *p, size_t b, size_t e)
{
    fg_cpu_smooth_ctx *c = p;
    for (size_t k = b; k < e; k++) {
        size_t hi, lo = fg_cpu_xent_chunk_rows(&c->sums, k, &hi);
        double loss = 0.0, hits = 0.0;
        for (size_t i = lo; i < hi; i++) {
            int hit;
            float *d = c->dlogits ? c->dlogits + i * c->ld : NULL;
            loss += smooth_row(c, c->logits + i * c->ld, c->labels[i], d, &hit);
            hits += hit;
        }
        c->sums.loss[k] = loss;
        c->sums.hits[k] = hits;
    }
}

/* As the backend's other ops: the queue runs synchronously, so the scaler is read here. */
static float smooth_factor(float grad_scale, float divisor, const fg_loss_scale_dev *scaler)
{
    if (!scaler)
        return grad_scale;
    return divisor != 0.0f ? (grad_scale * (float)scaler->scale) / divisor : 0.0f;
}

fg_status fg_cpu_op_classifier_smoothed(void *state, void *queue, uint32_t dtype,
                                        const void *logits, int ld, const int32_t *labels,
                                        int rows, int classes, float smoothing,
                                        float *loss_sum, float *correct, float grad_scale,
                                        float divisor, const fg_loss_scale_dev *scaler,
                                        void *dlogits, fg_error *err)
{
    int64_t bad = fg_cpu_find_bad_label(labels, rows, classes, 1);
    if (bad >= 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "cpu backend: classifier_smoothed: row %lld has label %d, outside "
                            "[0, %d) (-1: ignored)", (long long)bad, labels[bad], classes);
    /* dlogits may alias logits: each half copy is its own f32 view, written back after */
    size_t n = (size_t)rows * (size_t)ld;
    fg_cpu_operand o[] = {ARG_IN(logits, dtype, n), ARG_OUT(dlogits, dtype, dlogits ? n : 0)};
    fg_status st = fg_cpu_stage(state, queue, "classifier_smoothed", o, NARGS(o), err);
    if (st != FG_OK)
        return st;
    fg_cpu_smooth_ctx c = {.logits = o[0].f, .labels = labels,
                           .classes = classes, .ld = (size_t)ld,
                           .dlogits = dlogits ? o[1].f : NULL, .eps = (double)smoothing,
                           .on = 1.0f - smoothing, .off = smoothing / (float)classes,
                           .factor = smooth_factor(grad_scale, divisor, scaler),
                           .sums.rows = (size_t)rows};
    fg_cpu_xent_sums_run(((fg_cpu_backend *)state)->pool, &c.sums, classes, smooth_chunks, &c,
                         loss_sum, correct);
    return fg_cpu_unstage(state, o, NARGS(o), FG_OK);
}
