/* The smoothing group (ABI 1.11): classifier_smoothed, the fused classifier with label
 * smoothing ([model] label_smoothing). In f32, bf16 and f16 logits, padded rows, every
 * fifth row ignored, eps 0.1 and 0.3:
 *   - the CPU backend's loss sum within 1e-6 relative, its hits exactly, and its gradient
 *     within 1e-6 (f32) / tol_of(dtype) relative (L2) of a double-precision reference
 *     written from torch.nn.CrossEntropyLoss(label_smoothing=eps)'s definition, with zeros
 *     in the padding and in ignored rows;
 *   - the backend under test against the CPU backend: gradient within tol_of(dtype), loss
 *     and hits within 1e-5 (bitwise for the CPU backend itself);
 *   - eps = 0: the CPU backend's loss, hits and gradient bitwise its classifier's;
 *   - the fp16 scaler's device factor: bitwise grad_scale = (g * scale) / divisor on each
 *     side; without a gradient: the same loss and hits;
 *   - a bad label reported (by the op, or at the next queue_sync). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

static const uint32_t dtypes[] = { FG_F32, FG_BF16, FG_F16 };

/* The largest figures seen, printed at the end: per dtype, the CPU's gradient against the
 * double reference and the tested backend's against the CPU's (relative L2); the CPU's loss
 * sum against the reference (relative). */
static double worst_ref[3], worst_dut[3], worst_loss;

static int dtype_index(uint32_t dt)
{
    return dt == FG_F32 ? 0 : dt == FG_BF16 ? 1 : 2;
}

static double rel_l2(const void *got, const void *want, uint32_t dt, size_t n)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < n; i++) {
        double a = to_double(got, dt, i), b = to_double(want, dt, i);
        diff += (a - b) * (a - b);
        norm += b * b;
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

static pair smooth_labels(int rows, int classes)
{
    pair l = pnew((size_t)rows * 4);
    int32_t *v = l.c;
    for (int i = 0; i < rows; i++)
        v[i] = i % 5 == 4 ? FG_IGNORED_LABEL : (int32_t)rng_uniform(0, classes) % classes;
    pmirror(l);
    return l;
}

/* The double reference of the loss sum, the hits and the gradient (grad: rows * ld). */
static void reference(const pair logits, uint32_t dt, const int32_t *labels, int rows,
                      int classes, int ld, double eps, double scale, double *loss,
                      double *hits, double *grad)
{
    *loss = *hits = 0.0;
    for (int r = 0; r < rows; r++) {
        size_t base = (size_t)r * (size_t)ld;
        for (int j = 0; j < ld; j++)
            grad[base + j] = 0.0;
        int y = labels[r];
        if (y == FG_IGNORED_LABEL)
            continue;
        double m = -INFINITY, s = 0.0;
        int best = 0;
        for (int j = 0; j < classes; j++) {
            double z = to_double(logits.c, dt, base + j);
            if (z > m) {
                m = z;
                best = j;
            }
        }
        for (int j = 0; j < classes; j++)
            s += exp(to_double(logits.c, dt, base + j) - m);
        double lse = m + log(s), smooth = 0.0;
        for (int j = 0; j < classes; j++) {
            double z = to_double(logits.c, dt, base + j);
            smooth += lse - z; /* -log p_j */
            double p = exp(z - lse);
            grad[base + j] = (p - (j == y ? 1.0 - eps : 0.0) - eps / classes) * scale;
        }
        *loss += (1.0 - eps) * (lse - to_double(logits.c, dt, base + y)) +
                 eps * smooth / classes;
        *hits += best == y;
    }
}

static void check_reference(const char *what, pair logits, pair labels, pair sums, pair dl,
                            uint32_t dt, int rows, int classes, int ld, double eps,
                            double scale, const float start[2])
{
    size_t n = (size_t)rows * (size_t)ld;
    double *grad = malloc(n * sizeof *grad), loss, hits;
    reference(logits, dt, labels.c, rows, classes, ld, eps, scale, &loss, &hits, grad);
    const float *s = sums.c;
    checks += 3;
    double want = start[0] + loss;
    double loss_rel = fabs((double)s[0] - want) / (fabs(want) > 1 ? fabs(want) : 1.0);
    worst_loss = loss_rel > worst_loss ? loss_rel : worst_loss;
    if (fabs((double)s[0] - want) > 1e-6 * fabs(want) + 1e-6)
        fail("%s: cpu: loss sum %.9g, the double reference %.9g", what, (double)s[0], want);
    if ((double)s[1] != start[1] + hits)
        fail("%s: cpu: hits %.9g, the reference %.9g", what, (double)s[1], start[1] + hits);
    double diff = 0.0, norm = 0.0;
    int zeros_ok = 1;
    for (size_t i = 0; i < n; i++) {
        double got = to_double(dl.c, dt, i), d = got - grad[i];
        diff += d * d;
        norm += grad[i] * grad[i];
        if (grad[i] == 0.0 && ((int)(i % (size_t)ld) >= classes ||
                               ((int32_t *)labels.c)[i / (size_t)ld] == FG_IGNORED_LABEL))
            zeros_ok &= got == 0.0;
    }
    double rel = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
    int k = dtype_index(dt);
    worst_ref[k] = rel > worst_ref[k] ? rel : worst_ref[k];
    double tol = dt == FG_F32 ? 1e-6 : tol_of(dt);
    if (!(rel <= tol))
        fail("%s: cpu: gradient %.3g (relative L2) from the double reference (tolerance %g)",
             what, rel, tol);
    if (!zeros_ok)
        fail("%s: cpu: a padding column or an ignored row's gradient is not 0", what);
    free(grad);
}

static void same_bytes(const char *what, const void *a, const void *b, size_t bytes)
{
    checks++;
    if (memcmp(a, b, bytes) != 0)
        fail("%s", what);
}

static void smoothing_case(uint32_t dt, int rows, int classes, int ld, float eps)
{
    size_t n = (size_t)rows * (size_t)ld, es = dtype_size(dt);
    float scale = 1.0f / (float)rows, start[2] = { 1.5f, 3.0f };
    pair logits = prandom(n, dt, -6, 6), labels = smooth_labels(rows, classes);
    pair sums = pnew(8), dl = pnew(n * es);
    pput(sums, start);
    ppoison(dl);
    char what[160];
    snprintf(what, sizeof what, "classifier_smoothed %d x %d (ld %d) %s eps %g", rows, classes,
             ld, fg_dtype_name((fg_dtype)dt), (double)eps);
    BOTH(what, V->classifier_smoothed(S, Q, dt, X(logits), ld, X(labels), rows, classes, eps,
                                      X(sums), (float *)X(sums) + 1, scale, 0.0f, NULL, X(dl),
                                      E));
    if (P.skip_outputs)
        return;
    compare(what, dl, n, dt, tol_of(dt));
    compare(W("%s (loss, hits)", what), sums, 2, FG_F32, 1e-5);
    void *got = malloc(n * es);
    download(dl, got);
    double rd = rel_l2(got, dl.c, dt, n);
    int k = dtype_index(dt);
    worst_dut[k] = rd > worst_dut[k] ? rd : worst_dut[k];
    free(got);
    check_reference(what, logits, labels, sums, dl, dt, rows, classes, ld, eps, scale, start);
    /* without a gradient: the same sums */
    pair eval = pnew(8);
    pput(eval, start);
    BOTH(what, V->classifier_smoothed(S, Q, dt, X(logits), ld, X(labels), rows, classes, eps,
                                      X(eval), (float *)X(eval) + 1, scale, 0.0f, NULL, NULL,
                                      E));
    float ge[2], gs[2];
    download(eval, ge);
    download(sums, gs);
    same_bytes(W("%s: cpu: without a gradient, other sums", what), eval.c, sums.c, 8);
    same_bytes(W("%s: %s: without a gradient, other sums", what, P.dut_name), ge, gs, 8);
    /* the fp16 scaler's factor, read on the device: bitwise the host's */
    fg_loss_scale_dev ls = { 1024.0, 0, 1, 0, 0 };
    pair st = pnew(sizeof ls), dls = pnew(n * es), sums2 = pnew(8);
    pput(st, &ls);
    pput(sums2, start);
    float counted = (float)(rows - rows / 5), host = (0.5f * 1024.0f) / counted;
    BOTH(what, V->classifier_smoothed(S, Q, dt, X(logits), ld, X(labels), rows, classes, eps,
                                      X(sums2), (float *)X(sums2) + 1, 0.5f, counted,
                                      (const fg_loss_scale_dev *)X(st), X(dls), E));
    BOTH(what, V->classifier_smoothed(S, Q, dt, X(logits), ld, X(labels), rows, classes, eps,
                                      NULL, NULL, host, 0.0f, NULL, X(dl), E));
    unsigned char *a = malloc(n * es), *b = malloc(n * es);
    download(dls, a);
    download(dl, b);
    same_bytes(W("%s: cpu: the scaler's factor differs from the host's", what), dls.c, dl.c,
               n * es);
    same_bytes(W("%s: %s: the scaler's factor differs from the host's", what, P.dut_name), a,
               b, n * es);
    free(a);
    free(b);
}

/* eps = 0: the CPU backend's classifier, bit for bit. */
static void zero_case(uint32_t dt, int rows, int classes, int ld)
{
    size_t n = (size_t)rows * (size_t)ld, es = dtype_size(dt);
    float scale = 1.0f / (float)rows, start[2] = { 1.5f, 3.0f };
    pair logits = prandom(n, dt, -6, 6), labels = smooth_labels(rows, classes);
    pair s1 = pnew(8), s2 = pnew(8), d1 = pnew(n * es), d2 = pnew(n * es);
    pput(s1, start);
    pput(s2, start);
    char what[160];
    snprintf(what, sizeof what, "classifier_smoothed eps 0 %d x %d (ld %d) %s", rows, classes,
             ld, fg_dtype_name((fg_dtype)dt));
    BOTH(what, V->classifier_smoothed(S, Q, dt, X(logits), ld, X(labels), rows, classes, 0.0f,
                                      X(s1), (float *)X(s1) + 1, scale, 0.0f, NULL, X(d1), E));
    BOTH(what, V->classifier(S, Q, dt, X(logits), ld, X(labels), rows, classes, X(s2),
                             (float *)X(s2) + 1, scale, X(d2), E));
    if (P.skip_outputs)
        return;
    same_bytes(W("%s: cpu: the gradient differs from classifier's", what), d1.c, d2.c, n * es);
    same_bytes(W("%s: cpu: loss or hits differ from classifier's", what), s1.c, s2.c, 8);
    compare(what, d1, n, dt, tol_of(dt));
}

void test_smoothing(void)
{
    static const int shapes[][3] = { { 1, 1, 1 },   { 7, 10, 10 },       { 33, 1000, 1000 },
                                     { 9, 10, 16 }, { 65, 1000, 1024 }, { 1024, 10, 10 } };
    static const float eps[] = { 0.1f, 0.3f };
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            for (size_t e = 0; e < 2; e++) {
                smoothing_case(dtypes[d], shapes[s][0], shapes[s][1], shapes[s][2], eps[e]);
                release_all();
            }
            zero_case(dtypes[d], shapes[s][0], shapes[s][1], shapes[s][2]);
            release_all();
        }
    printf("smoothing: cpu gradient vs the double reference (relative L2) f32 %.2e bf16 %.2e "
           "f16 %.2e, loss sum %.2e; %s vs cpu f32 %.2e bf16 %.2e f16 %.2e\n", worst_ref[0],
           worst_ref[1], worst_ref[2], worst_loss, P.dut_name, worst_dut[0], worst_dut[1],
           worst_dut[2]);
    /* a label outside [0, classes): reported by the op, or at the next queue_sync */
    pair logits = prandom(640, FG_F32, -3, 3), labels = smooth_labels(64, 10);
    ((int32_t *)labels.c)[2] = 10;
    pmirror(labels);
    pair sums = pnew(8);
    fg_error e = {0};
    fg_status st = P.dut->classifier_smoothed(P.ds, P.dq, FG_F32, logits.g, 10, labels.g, 64,
                                              10, 0.1f, sums.g, NULL, 1.0f, 0.0f, NULL, NULL,
                                              &e);
    if (st == FG_OK)
        st = P.dut->queue_sync(P.ds, P.dq, &e);
    checks++;
    if (st != FG_INVALID_ARGUMENT || !strstr(e.message, "row 2 has label 10"))
        fail("classifier_smoothed, a bad label: %s: %s", fg_status_name(st), e.message);
    checks++;
    if ((st = P.dut->queue_sync(P.ds, P.dq, &e)) != FG_OK)
        fail("queue_sync after a reported bad label: %s", e.message);
    release_all();
}
