/* The f32 gemms by OpenBLAS (kernels/cpu/gemm.c, partitioned across the pool) or oneDNN's
 * matmul (kernels/cpu/gemm_dnnl.c, cut the same way), chosen per shape.
 *
 * [backend] gemm = auto times both at the first call of each (op, m, n, k, transposes,
 * accumulate, dtype): a warm-up and three runs each into a copy of C, the faster minimum
 * kept, and logs the choice with both times once. When OpenBLAS runs kernels far below the
 * CPU (a generic core, cpu_machine.c) auto takes oneDNN wherever it can run the shape,
 * whatever the times. `openblas` and `onednn` fix the library (bitwise reproducible run to
 * run). `default` (the key unset) is onednn, or openblas in a build without oneDNN,
 * decided at load (cpu_machine.c) and logged per shape at debug level only, so a default
 * run's output is not a list of shapes; openblas logs at debug level too. A shape oneDNN
 * cannot run falls back to OpenBLAS, and the log says so. Later calls
 * look the shape up in a fixed table (no allocation, no string work). The table is the
 * backend's, so every device of a run makes the same choice for a shape. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_backend.h"
#ifdef FG_CPU_WITH_DNNL
#include "gemm_dnnl.h"
#include "half.h"
#endif

#define FG_CPU_GEMM_SHAPES 512
#define FG_CPU_GEMM_TIMED_RUNS 3

static const char *const fg_cpu_gemm_names[] = {"auto", "openblas", "onednn", "default"};
#define FG_CPU_GEMM_MODES ((int)(sizeof fg_cpu_gemm_names / sizeof *fg_cpu_gemm_names))

typedef struct gemm_key {
    int bias, trans_a, trans_b, m, n, k, accumulate;
    uint32_t dtype;
} gemm_key;

typedef struct gemm_entry {
    gemm_key key;
    _Atomic int library; /* FG_CPU_GEMM_OPENBLAS or FG_CPU_GEMM_ONEDNN */
} gemm_entry;

struct fg_cpu_gemm_choices {
    pthread_mutex_t lock; /* guards the table; held while a new shape is decided */
    gemm_entry e[FG_CPU_GEMM_SHAPES];
    int count;
    int full_noted;
};

fg_status fg_cpu_gemm_setup(fg_cpu_backend *be, const char *mode, fg_error *err)
{
    be->gemm_mode = -1;
    for (int i = 0; i < FG_CPU_GEMM_MODES; i++)
        if (mode && strcmp(mode, fg_cpu_gemm_names[i]) == 0)
            be->gemm_mode = i;
    if (be->gemm_mode < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: option gemm = '%s' is not "
                            "one of default|auto|openblas|onednn", mode ? mode : "");
#ifndef FG_CPU_WITH_DNNL
    if (be->gemm_mode == FG_CPU_GEMM_ONEDNN)
        return fg_error_set(err, FG_UNAVAILABLE, "cpu backend: gemm = onednn, but the cpu "
                            "backend was built without oneDNN; use gemm = openblas or auto");
#endif
    be->gemm_choices = calloc(1, sizeof *be->gemm_choices);
    if (!be->gemm_choices)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "cpu backend: cannot allocate the gemm "
                            "choice table");
    pthread_mutex_init(&be->gemm_choices->lock, NULL);
    return FG_OK;
}

const char *fg_cpu_gemm_mode_name(int mode)
{
    return mode >= 0 && mode < FG_CPU_GEMM_MODES ? fg_cpu_gemm_names[mode] : "?";
}

void fg_cpu_gemm_teardown(fg_cpu_backend *be)
{
    if (be->gemm_choices)
        pthread_mutex_destroy(&be->gemm_choices->lock);
    free(be->gemm_choices);
    be->gemm_choices = NULL;
}

static void run_openblas(fg_cpu_backend *be, const fg_cpu_gemm_call *g, float *c)
{
    if (g->bias)
        fg_cpu_gemm_bias(be->pool, g->trans_a, g->trans_b, g->m, g->n, g->k, g->a, g->lda, g->b,
                         g->ldb, g->bias, c, g->ldc);
    else
        fg_cpu_gemm(be->pool, g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, g->a, g->lda,
                    g->b, g->ldb, g->beta, c, g->ldc);
}

#ifdef FG_CPU_WITH_DNNL
/* 0, FG_CPU_DNNL_NONE (oneDNN cannot run it) or FG_CPU_DNNL_FAILED. */
static int run_onednn(fg_cpu_backend *be, fg_cpu_queue *q, int slot, const fg_cpu_gemm_call *g,
                      float *c)
{
    fg_cpu_dnnl_gemm *d = slot == 0 ? fg_cpu_queue_dnnl(q) : fg_cpu_queue_dnnl_slot(q, slot);
    if (!d)
        return FG_CPU_DNNL_NONE;
    fg_cpu_mm mm = {g->trans_a, g->trans_b, g->m, g->n, g->k, g->a, g->b, g->bias, c,
                    g->lda, g->ldb, g->ldc, FG_CPU_F32, FG_CPU_F32, g->beta, FG_CPU_F32,
                    g->alpha};
    return fg_cpu_dnnl_gemm_run(d, be->pool, &mm);
}
#endif

static void describe(const gemm_key *k, const char *op, char *buf, size_t len)
{
    snprintf(buf, len, "%s m%d n%d k%d %c%c%s %s", op, k->m, k->n, k->k, k->trans_a ? 'T' : 'N',
             k->trans_b ? 'T' : 'N', k->accumulate ? " accumulate" : "",
             fg_dtype_name((fg_dtype)k->dtype));
}

/* One line per shape at level (a warning when a fixed onednn could not be kept). */
static void log_choice(fg_cpu_backend *be, const gemm_entry *e, const char *op, int level,
                       const char *why, double onednn_s, double openblas_s)
{
    if (!be->host || !be->host->log)
        return;
    char what[128], times[96] = "";
    describe(&e->key, op, what, sizeof what);
    if (onednn_s > 0 && openblas_s > 0)
        snprintf(times, sizeof times, ": onednn %.4f ms, openblas %.4f ms", onednn_s * 1e3,
                 openblas_s * 1e3);
    be->host->log(be->host, level, "cpu backend: %s: %s (%s%s)", what,
                  fg_cpu_gemm_names[e->library], why, times);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#ifdef FG_CPU_WITH_DNNL
/* Elements a row-major (rows, cols) matrix with leading dimension ld spans. */
static size_t span(int rows, int cols, int ld)
{
    return (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
}

/* The best of a few runs of one library into scratch (a fresh copy of C before each run,
 * so beta C sees C's values); < 0: oneDNN cannot run the shape. */
static double time_library(fg_cpu_backend *be, fg_cpu_queue *q, int slot,
                           const fg_cpu_gemm_call *g, int library, float *scratch)
{
    size_t bytes = span(g->m, g->n, g->ldc) * sizeof(float);
    double best = 1e30;
    for (int i = 0; i <= FG_CPU_GEMM_TIMED_RUNS; i++) {
        memcpy(scratch, g->c, bytes);
        double t0 = now_s();
        if (library == FG_CPU_GEMM_OPENBLAS)
            run_openblas(be, g, scratch);
        else if (run_onednn(be, q, slot, g, scratch) != 0)
            return -1;
        double t = now_s() - t0;
        if (i > 0 && t < best)
            best = t;
    }
    return best;
}

/* auto: times both (or takes oneDNN where OpenBLAS runs generic kernels) and logs. */
static void decide_timed(fg_cpu_backend *be, fg_cpu_queue *q, int slot,
                         const fg_cpu_gemm_call *g, gemm_entry *e)
{
    float *scratch = malloc(span(g->m, g->n, g->ldc) * sizeof(float));
    e->library = FG_CPU_GEMM_OPENBLAS;
    if (!scratch) {
        log_choice(be, e, g->op, FG_LOG_INFO, "no memory to time oneDNN against it", 0, 0);
        return;
    }
    double onednn = time_library(be, q, slot, g, FG_CPU_GEMM_ONEDNN, scratch);
    double openblas = time_library(be, q, slot, g, FG_CPU_GEMM_OPENBLAS, scratch);
    free(scratch);
    if (onednn < 0) {
        log_choice(be, e, g->op, FG_LOG_INFO, "oneDNN has no matmul for this shape", 0, 0);
        return;
    }
    if (be->openblas_generic) {
        e->library = FG_CPU_GEMM_ONEDNN;
        log_choice(be, e, g->op, FG_LOG_INFO, "OpenBLAS runs generic kernels; timed", onednn,
                   openblas);
        return;
    }
    e->library = onednn < openblas ? FG_CPU_GEMM_ONEDNN : FG_CPU_GEMM_OPENBLAS;
    log_choice(be, e, g->op, FG_LOG_INFO, "timed", onednn, openblas);
}
#endif

/* The entry of this call's shape: looked up, or decided (and logged) at its first call;
 * NULL when the table is full (then OpenBLAS runs). */
static gemm_entry *choose(fg_cpu_backend *be, fg_cpu_queue *q, int slot,
                          const fg_cpu_gemm_call *g)
{
    fg_cpu_gemm_choices *t = be->gemm_choices;
    gemm_key key = {g->bias != NULL, g->trans_a, g->trans_b, g->m, g->n, g->k,
                    g->beta != 0.0f, g->dtype};
    gemm_entry *e = NULL;
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->count && !e; i++)
        if (memcmp(&t->e[i].key, &key, sizeof key) == 0)
            e = &t->e[i];
    if (!e && t->count == FG_CPU_GEMM_SHAPES) {
        if (!t->full_noted && be->host && be->host->log)
            be->host->log(be->host, FG_LOG_WARN, "cpu backend: more than %d gemm shapes: "
                          "the new ones run OpenBLAS untimed", FG_CPU_GEMM_SHAPES);
        t->full_noted = 1;
    } else if (!e) {
        e = &t->e[t->count++];
        e->key = key;
        e->library = be->gemm_mode == FG_CPU_GEMM_AUTO ? FG_CPU_GEMM_OPENBLAS : be->gemm_mode;
        /* the default and openblas at debug level: a run's output is its losses */
        if (be->gemm_defaulted)
            log_choice(be, e, g->op, FG_LOG_DEBUG, "gemm unset", 0, 0);
        else if (be->gemm_mode == FG_CPU_GEMM_OPENBLAS)
            log_choice(be, e, g->op, FG_LOG_DEBUG, "gemm = openblas", 0, 0);
        else if (be->gemm_mode == FG_CPU_GEMM_ONEDNN)
            log_choice(be, e, g->op, FG_LOG_INFO, "gemm = onednn", 0, 0);
#ifdef FG_CPU_WITH_DNNL
        else
            decide_timed(be, q, slot, g, e);
#else
        else
            log_choice(be, e, g->op, FG_LOG_INFO, "this build has no oneDNN", 0, 0);
#endif
    }
    pthread_mutex_unlock(&t->lock);
    (void)q;
    (void)slot;
    return e;
}

#ifdef FG_CPU_WITH_DNNL
/* oneDNN ran it (FG_OK), failed (an error), or cannot: then OpenBLAS runs it, and a fixed
 * onednn says so once for the shape. */
static fg_status run_chosen_onednn(fg_cpu_backend *be, fg_cpu_queue *q, int slot,
                                   const fg_cpu_gemm_call *g, gemm_entry *e, fg_error *err)
{
    int rc = run_onednn(be, q, slot, g, g->c);
    if (rc == FG_CPU_DNNL_FAILED)
        return fg_error_set(err, FG_BACKEND_ERROR, "cpu backend: %s: oneDNN's f32 matmul "
                            "failed (m = %d, n = %d, k = %d)", g->op, g->m, g->n, g->k);
    if (rc == 0)
        return FG_OK;
    pthread_mutex_lock(&be->gemm_choices->lock);
    if (e->library == FG_CPU_GEMM_ONEDNN) {
        e->library = FG_CPU_GEMM_OPENBLAS;
        if (be->gemm_defaulted)
            log_choice(be, e, g->op, FG_LOG_DEBUG, "gemm unset; oneDNN has no matmul for it",
                       0, 0);
        else
            log_choice(be, e, g->op, FG_LOG_WARN, "although gemm = onednn: oneDNN has no "
                       "matmul for it", 0, 0);
    }
    pthread_mutex_unlock(&be->gemm_choices->lock);
    run_openblas(be, g, g->c);
    return FG_OK;
}
#endif

fg_status fg_cpu_gemm_run(fg_cpu_backend *be, fg_cpu_queue *q, const fg_cpu_gemm_call *g,
                          fg_error *err)
{
    return fg_cpu_gemm_run_slot(be, q, 0, g, err);
}

fg_status fg_cpu_gemm_run_slot(fg_cpu_backend *be, fg_cpu_queue *q, int slot,
                               const fg_cpu_gemm_call *g, fg_error *err)
{
    if (g->m == 0 || g->n == 0 || g->k == 0 || !q) { /* nothing to choose: gemm.c's cases */
        run_openblas(be, g, g->c);
        return FG_OK;
    }
    gemm_entry *e = choose(be, q, slot, g);
#ifdef FG_CPU_WITH_DNNL
    if (e && e->library == FG_CPU_GEMM_ONEDNN)
        return run_chosen_onednn(be, q, slot, g, e, err);
#else
    (void)err;
#endif
    (void)e;
    run_openblas(be, g, g->c);
    return FG_OK;
}
