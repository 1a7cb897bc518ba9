/* Kernel lab: softmax cross-entropy forward + backward over rows of logits
 * (kernels/cpu/softmax_xent.c): the language models' loss over every position, V = 256 for
 * the byte-level GPTs, V = 50257 for GPT-2's vocabulary.
 *
 *   version 0  reference: everything in double, one row at a time
 *   version 1  kernels/cpu/softmax_xent.c as of d8ca546: max and argmax, libm expf with a
 *              double sum (a dependency chain), a scaling pass; rows in fixed chunks on the
 *              pool
 *   version 2  version 1 compiled for AVX-512 / AVX2 as well (FG_CPU_VECTOR_CLONES): bitwise
 *              version 1, only the scaling and the backward vectorise
 *   version 3  version 2 with fast_exp (kernels/cpu/fast_exp.h, 2 ulp) summed in 16 float
 *              lanes, the max in 16 lanes and the argmax its first occurrence
 *              <- the winner, now kernels/cpu/softmax_xent.c
 *
 * Version 2 must equal version 1 bit for bit, the product version 3; every version's probabilities, loss and
 * gradient are within 1e-5 of the reference (relative to the largest value; the loss
 * relative to itself), and the argmax hits equal the reference's.
 *
 *   softmax_xent_lab check              (ctest kernel_lab.softmax_xent)
 *   softmax_xent_lab time [rows V]      median us of forward + backward per version */
#include "lab.h" /* first: it sets _POSIX_C_SOURCE */

#include <math.h>

#include "cpu_kernels.h"
#include "fast_exp.h"

#define LAB_INLINE static inline __attribute__((always_inline))

typedef struct xent_args {
    const float *logits;
    const int32_t *labels;
    int rows, classes;
    float *probs, *dlogits;
    size_t chunk;
    double *loss, *hits; /* one per chunk */
    float scale;
} xent_args;

/* ---- version 0 ------------------------------------------------------------------------- */

static void v0_run(const xent_args *c, double *loss, double *hits)
{
    size_t V = (size_t)c->classes;
    *loss = *hits = 0.0;
    for (size_t i = 0; i < (size_t)c->rows; i++) {
        const float *x = c->logits + i * V;
        int label = c->labels[i], best = 0;
        for (size_t j = 1; j < V; j++)
            best = x[j] > x[best] ? (int)j : best;
        double sum = 0.0;
        for (size_t j = 0; j < V; j++)
            sum += exp((double)x[j] - (double)x[best]);
        for (size_t j = 0; j < V; j++) {
            double p = exp((double)x[j] - (double)x[best]) / sum;
            c->probs[i * V + j] = (float)p;
            double d = label == FG_CPU_IGNORED_LABEL ? 0.0 : (p - (j == (size_t)label)) * c->scale;
            c->dlogits[i * V + j] = (float)d;
        }
        if (label != FG_CPU_IGNORED_LABEL)
            *loss += (double)x[best] + log(sum) - (double)x[label];
        *hits += best == label;
    }
}

/* ---- versions 1-3: the product's loops; fast = 1 is version 3 --------------------------- */

/* The maximum, as version 1's scan finds it (NaN only when x[0] is), in 16 lanes. */
LAB_INLINE float xent_max(const float *x, int n)
{
    float lane[16];
    for (int l = 0; l < 16; l++)
        lane[l] = x[0];
    int j = 0;
    for (; j + 16 <= n; j += 16)
        for (int l = 0; l < 16; l++)
            lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
    float m = x[0];
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    for (int l = 0; l < 16; l++)
        m = lane[l] > m ? lane[l] : m;
    return m;
}

LAB_INLINE double xent_row(const float *x, int label, int classes, float *prob, int *hit,
                           int fast)
{
    float m = x[0];
    int best = 0;
    if (fast) {
        m = xent_max(x, classes);
        while (best < classes && !(x[best] == m))
            best++;
        best = best < classes ? best : 0; /* x[0] is NaN */
    } else {
        for (int j = 1; j < classes; j++)
            if (x[j] > m) {
                m = x[j];
                best = j;
            }
    }
    float at_label = label == FG_CPU_IGNORED_LABEL ? 0.0f : x[label];
    double sum = 0.0;
    if (fast) {
        float lane[16] = {0};
        int j = 0;
        for (; j + 16 <= classes; j += 16)
            for (int l = 0; l < 16; l++) {
                float e = fg_cpu_exp(x[j + l] - m);
                prob[j + l] = e;
                lane[l] += e;
            }
        for (; j < classes; j++) {
            prob[j] = fg_cpu_exp(x[j] - m);
            sum += (double)prob[j];
        }
        for (int l = 0; l < 16; l++)
            sum += lane[l];
    } else {
        for (int j = 0; j < classes; j++) {
            float e = expf(x[j] - m);
            prob[j] = e;
            sum += (double)e;
        }
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < classes; j++)
        prob[j] *= inv;
    *hit = best == label;
    return label == FG_CPU_IGNORED_LABEL ? 0.0 : (double)m + log(sum) - (double)at_label;
}

LAB_INLINE void xent_chunks(void *p, size_t b, size_t e, int fast)
{
    xent_args *c = p;
    size_t cl = (size_t)c->classes;
    for (size_t k = b; k < e; k++) {
        size_t lo = k * c->chunk, hi = lo + c->chunk;
        if (hi > (size_t)c->rows)
            hi = (size_t)c->rows;
        double loss = 0.0, hits = 0.0;
        for (size_t i = lo; i < hi; i++) {
            int hit;
            loss += xent_row(c->logits + i * cl, c->labels[i], c->classes, c->probs + i * cl,
                             &hit, fast);
            hits += hit;
        }
        c->loss[k] = loss;
        c->hits[k] = hits;
    }
}

LAB_INLINE void xent_backward(void *p, size_t b, size_t e)
{
    xent_args *c = p;
    size_t cl = (size_t)c->classes;
    for (size_t i = b; i < e; i++) {
        const float *prob = c->probs + i * cl;
        float *d = c->dlogits + i * cl;
        int label = c->labels[i];
        if (label == FG_CPU_IGNORED_LABEL) {
            for (size_t j = 0; j < cl; j++)
                d[j] = 0.0f;
            continue;
        }
        float at_label = prob[label];
        for (size_t j = 0; j < cl; j++)
            d[j] = prob[j] * c->scale;
        d[label] = (at_label - 1.0f) * c->scale;
    }
}

static void v1_fwd(void *p, size_t b, size_t e) { xent_chunks(p, b, e, 0); }
static void v1_bwd(void *p, size_t b, size_t e) { xent_backward(p, b, e); }
LAB_CLONES static void v2_fwd(void *p, size_t b, size_t e) { xent_chunks(p, b, e, 0); }
LAB_CLONES static void v2_bwd(void *p, size_t b, size_t e) { xent_backward(p, b, e); }
LAB_CLONES static void v3_fwd(void *p, size_t b, size_t e) { xent_chunks(p, b, e, 1); }

static void run_versioned(fg_cpu_pool *pool, xent_args *c, fg_cpu_range_fn fwd,
                          fg_cpu_range_fn bwd, double *loss, double *hits)
{
    double l[FG_CPU_MAX_CHUNKS], h[FG_CPU_MAX_CHUNKS];
    size_t min_rows = 2048 / (size_t)c->classes;
    c->chunk = fg_cpu_reduce_chunk((size_t)c->rows, min_rows ? min_rows : 1);
    size_t chunks = ((size_t)c->rows + c->chunk - 1) / c->chunk;
    c->loss = l, c->hits = h;
    size_t grain = (FG_CPU_GRAIN / 16 / ((size_t)c->classes * c->chunk)) + 1;
    fg_cpu_parallel_for(pool, chunks, grain, 1, fwd, c);
    *loss = *hits = 0.0;
    for (size_t k = 0; k < chunks; k++)
        *loss += l[k], *hits += h[k];
    fg_cpu_parallel_for(pool, (size_t)c->rows, FG_CPU_GRAIN / (size_t)c->classes + 1, 1, bwd, c);
}

typedef void (*lab_xent_fn)(fg_cpu_pool *pool, xent_args *c, double *loss, double *hits);

static void run_v0(fg_cpu_pool *pool, xent_args *c, double *loss, double *hits)
{
    (void)pool;
    v0_run(c, loss, hits);
}
static void run_v1(fg_cpu_pool *pool, xent_args *c, double *l, double *h) { run_versioned(pool, c, v1_fwd, v1_bwd, l, h); }
static void run_v2(fg_cpu_pool *pool, xent_args *c, double *l, double *h) { run_versioned(pool, c, v2_fwd, v2_bwd, l, h); }
static void run_v3(fg_cpu_pool *pool, xent_args *c, double *l, double *h) { run_versioned(pool, c, v3_fwd, v2_bwd, l, h); }

static void run_product(fg_cpu_pool *pool, xent_args *c, double *loss, double *hits)
{
    float l = 0.0f, h = 0.0f;
    fg_cpu_softmax_xent_forward(pool, c->logits, c->labels, c->rows, c->classes, c->probs, &l,
                                &h);
    fg_cpu_softmax_xent_backward(pool, c->probs, c->labels, c->rows, c->classes, c->scale,
                                 c->dlogits);
    *loss = l, *hits = h;
}

static const struct {
    const char *name;
    lab_xent_fn fn;
} versions[] = {
    { "v0 reference", run_v0 },
    { "v1 libm expf", run_v1 },
    { "v2 v1 + AVX-512 clones", run_v2 },
    { "v3 v2 + fast_exp lanes", run_v3 },
    { "kernels/cpu now", run_product },
};
#define NVERSIONS (sizeof versions / sizeof versions[0])

typedef struct xent_bufs {
    float *logits, *probs, *dlogits;
    int32_t *labels;
} xent_bufs;

static void bufs_init(xent_bufs *m, int rows, int V)
{
    size_t n = (size_t)rows * V;
    m->logits = lab_alloc(n), m->probs = lab_alloc(n), m->dlogits = lab_alloc(n);
    m->labels = malloc((size_t)rows * sizeof *m->labels);
    if (!m->labels) {
        fprintf(stderr, "softmax_xent lab: out of memory\n");
        exit(1);
    }
    lab_fill(m->logits, n, 21);
    for (size_t i = 0; i < n; i++)
        m->logits[i] *= 16.0f; /* logits over 8 units either side: a peaked softmax */
    for (int i = 0; i < rows; i++) /* every 7th row ignored, the rest spread over V */
        m->labels[i] = i % 7 == 3 ? FG_CPU_IGNORED_LABEL : (int32_t)((i * 2654435761u) % (unsigned)V);
    for (int i = 0; i < rows; i += 5) /* some rows whose label is the argmax */
        if (m->labels[i] >= 0)
            m->logits[(size_t)i * V + (size_t)m->labels[i]] = 9.0f;
}

static void bufs_free(xent_bufs *m)
{
    free(m->logits), free(m->probs), free(m->dlogits), free(m->labels);
}

static xent_args args_of(const xent_bufs *m, int rows, int V)
{
    return (xent_args){.logits = m->logits, .labels = m->labels, .rows = rows, .classes = V,
                       .probs = m->probs, .dlogits = m->dlogits, .scale = 1.0f / (float)rows};
}

static int check(fg_cpu_pool *pool)
{
    const int shapes[][2] = { {4096, 256}, {33, 50257}, {333, 10}, {50, 1000} };
    const double tol = 1e-5;
    int bad = 0;
    double worst_all = 0.0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        int rows = shapes[sh][0], V = shapes[sh][1];
        size_t n = (size_t)rows * V;
        xent_bufs r, m, m1, m3;
        bufs_init(&r, rows, V), bufs_init(&m, rows, V), bufs_init(&m1, rows, V);
        bufs_init(&m3, rows, V);
        double loss0, hits0, loss1, hits1, loss3 = 0.0;
        xent_args a0 = args_of(&r, rows, V), a1 = args_of(&m1, rows, V);
        run_v0(pool, &a0, &loss0, &hits0);
        run_v1(pool, &a1, &loss1, &hits1);
        for (size_t v = 1; v < NVERSIONS; v++) {
            double loss, hits;
            xent_args a = args_of(&m, rows, V);
            memset(m.probs, 0xff, n * 4), memset(m.dlogits, 0xff, n * 4);
            versions[v].fn(pool, &a, &loss, &hits);
            double e = lab_max_rel(m.probs, r.probs, n), ed = lab_max_rel(m.dlogits, r.dlogits, n);
            double el = fabs(loss - loss0) / fabs(loss0);
            e = ed > e || ed != ed ? ed : e;
            e = el > e || el != el ? el : e;
            worst_all = e > worst_all ? e : worst_all;
            if (!(e < tol) || hits != hits0) {
                printf("FAIL %s, %d rows x V %d: max relative error %.3g (tolerance %g), "
                       "hits %.0f (reference %.0f)\n", versions[v].name, rows, V, e, tol, hits,
                       hits0);
                bad = 1;
            }
            if (v == 3) {
                memcpy(m3.probs, m.probs, n * 4), memcpy(m3.dlogits, m.dlogits, n * 4);
                loss3 = loss;
            }
            if (v == NVERSIONS - 1 && (lab_first_diff(m.probs, m3.probs, n) < n ||
                                       lab_first_diff(m.dlogits, m3.dlogits, n) < n ||
                                       (float)loss != (float)loss3)) {
                printf("FAIL %s, %d rows x V %d: not bitwise version 3\n", versions[v].name,
                       rows, V);
                bad = 1;
            }
            if (v == 2 && (lab_first_diff(m.probs, m1.probs, n) < n ||
                           lab_first_diff(m.dlogits, m1.dlogits, n) < n || loss != loss1)) {
                printf("FAIL %s, %d rows x V %d: not bitwise version 1\n", versions[v].name,
                       rows, V);
                bad = 1;
            }
        }
        bufs_free(&r), bufs_free(&m), bufs_free(&m1), bufs_free(&m3);
    }
    if (!bad)
        printf("softmax_xent lab: %zu versions x %zu shapes within %g of the reference (worst "
               "%.2e), hits equal; version 2 bitwise version 1, the product version 3\n", NVERSIONS - 1,
               sizeof shapes / sizeof shapes[0], tol, worst_all);
    return bad;
}

static void time_versions(fg_cpu_pool *pool, int rows, int V)
{
    enum { ROUNDS = 21 };
    xent_bufs m;
    bufs_init(&m, rows, V);
    static double t[NVERSIONS][ROUNDS];
    int calls = (int)(2e7 / ((double)rows * V)) + 1;
    for (int r = 0; r < ROUNDS; r++)
        for (size_t v = 1; v < NVERSIONS; v++) {
            xent_args a = args_of(&m, rows, V);
            double loss, hits;
            double t0 = lab_now();
            for (int k = 0; k < calls; k++)
                versions[v].fn(pool, &a, &loss, &hits);
            t[v][r] = (lab_now() - t0) / calls;
        }
    printf("softmax_xent lab: %d rows x V %d, %d threads; median of %d rounds of %d forward + "
           "backward, the versions taking turns\n", rows, V, fg_cpu_pool_threads(pool), ROUNDS,
           calls);
    for (size_t v = 1; v < NVERSIONS; v++) {
        double med = lab_median(t[v], ROUNDS);
        printf("  %-24s %8.1f us  (fastest %8.1f us)\n", versions[v].name, med * 1e6,
               t[v][0] * 1e6);
    }
    bufs_free(&m);
}

static int time_main(fg_cpu_pool *pool, int argc, char **argv)
{
    int rows = argc >= 2 ? atoi(argv[0]) : 4096, V = argc >= 2 ? atoi(argv[1]) : 256;
    if (rows < 1 || V < 1) {
        fprintf(stderr, "softmax_xent lab: rows and V must be >= 1\n");
        return 2;
    }
    time_versions(pool, rows, V);
    return 0;
}

int main(int argc, char **argv)
{
    return lab_main(argc, argv, "softmax_xent", "[rows V]", check, time_main);
}
