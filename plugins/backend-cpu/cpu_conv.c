/* conv2d by algorithm: im2col + gemm (kernels/cpu/conv2d.c, every dtype), or oneDNN
 * (kernels/cpu/conv2d_dnnl.c, f32 and native bf16) when the plugin is built with it.
 *
 * [backend] conv_algorithm = auto times both at the first forward and the first backward
 * call of each (shape, dtypes), as cuDNN's algorithm search does: a warm-up and three runs
 * each, the faster minimum kept. The choice is cached with the oneDNN primitives, so
 * later calls make and allocate nothing; each choice is logged once with both times.
 * `im2col` and `onednn` fix it (reproducible runs: a timed choice may differ between
 * runs, and the two differ in summation order). A conv oneDNN cannot run (f16, a dtype
 * mix, a shape it refuses) uses im2col, and the log says why. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_backend.h"
#ifdef FG_CPU_WITH_DNNL
#include "conv2d_dnnl.h"
#include "half.h"
#endif

static const char *const fg_cpu_conv_names[] = { "auto", "im2col", "onednn" };

static fg_status fg_cpu_conv_parse(const char *algorithm, int *out, fg_error *err)
{
    for (int i = 0; i < 3; i++)
        if (algorithm && strcmp(algorithm, fg_cpu_conv_names[i]) == 0) {
            *out = i;
            return FG_OK;
        }
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "cpu backend: option conv_algorithm = '%s' is not one of "
                        "auto|im2col|onednn", algorithm ? algorithm : "");
}

#ifdef FG_CPU_WITH_DNNL

enum { DIR_FWD, DIR_BWD };
#define FG_CPU_CONV_ENTRIES 256
#define FG_CPU_CONV_TIMED_RUNS 3
/* oneDNN runs the batch as this many pieces (fewer for a smaller batch), claimed by the
 * pool's threads as they come free: a thread the machine delays holds up one small piece,
 * not half the batch. A fixed count, not one per thread, so results do not depend on the
 * thread count. oneDNN's speed per image measured the same at 16 images as at 64. */
#define FG_CPU_CONV_DNNL_PIECES 8
/* Each piece sums its own f32 weight gradient in the workspace: layers with large weights
 * get fewer pieces, so these partial sums stay under this many bytes. */
#define FG_CPU_CONV_DNNL_PARTIAL_BYTES (16u << 20)

static int fg_cpu_conv_pieces(const fg_cpu_conv_shape *s)
{
    size_t wbytes = (size_t)s->k * (size_t)s->c * (size_t)s->r * (size_t)s->s * sizeof(float);
    int pieces = FG_CPU_CONV_DNNL_PIECES;
    while (pieces > 1 && (size_t)pieces * wbytes > FG_CPU_CONV_DNNL_PARTIAL_BYTES)
        pieces /= 2;
    return pieces;
}

/* One (shape, dtypes): its oneDNN state and the algorithm chosen per direction. */
typedef struct fg_cpu_conv_entry {
    fg_cpu_conv_shape s;
    int act, param;             /* FG_CPU_F32 / FG_CPU_BF16 */
    size_t budget;              /* workspace bytes the caller was told for this shape */
    fg_cpu_dnnl_conv *dnnl;     /* NULL: oneDNN cannot run it (why) */
    char why[160];
    int algo[2];                /* per direction: -1 undecided, else FG_CPU_CONV_* */
    int logged_fallback;
    pthread_mutex_t run;        /* one call at a time on the oneDNN state */
} fg_cpu_conv_entry;

struct fg_cpu_conv_cache {
    pthread_mutex_t lock;       /* guards the table, never held while a conv runs */
    fg_cpu_conv_entry *e[FG_CPU_CONV_ENTRIES];
    int count;
};

static int fg_cpu_same_shape(const fg_cpu_conv_shape *a, const fg_cpu_conv_shape *b, int n_too)
{
    return (!n_too || a->n == b->n) && a->c == b->c && a->h == b->h && a->w == b->w &&
           a->k == b->k && a->r == b->r && a->s == b->s && a->pad_h == b->pad_h &&
           a->pad_w == b->pad_w && a->stride_h == b->stride_h && a->stride_w == b->stride_w;
}

/* The entry of (s, act, param), made on first use: NULL only when the table is full or
 * out of memory (then im2col runs). */
static fg_cpu_conv_entry *fg_cpu_conv_entry_get(fg_cpu_backend *be, const fg_cpu_conv_shape *s,
                                                int act, int param)
{
    fg_cpu_conv_cache *c = be->conv_cache;
    fg_cpu_conv_entry *found = NULL;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->count && !found; i++)
        if (c->e[i]->act == act && c->e[i]->param == param && fg_cpu_same_shape(&c->e[i]->s, s, 1))
            found = c->e[i];
    if (!found && c->count < FG_CPU_CONV_ENTRIES && (found = calloc(1, sizeof *found))) {
        found->s = *s;
        found->act = act;
        found->param = param;
        found->algo[0] = found->algo[1] = -1;
        pthread_mutex_init(&found->run, NULL);
        if (fg_cpu_dnnl_conv_create(s, act, param, fg_cpu_conv_pieces(s), &found->dnnl,
                                    found->why, sizeof found->why) != 0)
            found->dnnl = NULL;
        c->e[c->count++] = found;
    }
    pthread_mutex_unlock(&c->lock);
    return found;
}

/* The workspace a caller holds for s: the most it was told for this shape at a batch of
 * at least s->n (the model asks once, at its largest batch). 0: never asked. */
static size_t fg_cpu_conv_budget(fg_cpu_backend *be, const fg_cpu_conv_shape *s)
{
    fg_cpu_conv_cache *c = be->conv_cache;
    size_t b = 0;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->count; i++)
        if (c->e[i]->s.n >= s->n && fg_cpu_same_shape(&c->e[i]->s, s, 0) && c->e[i]->budget > b)
            b = c->e[i]->budget;
    pthread_mutex_unlock(&c->lock);
    return b;
}

static void fg_cpu_conv_set_budget(fg_cpu_backend *be, const fg_cpu_conv_shape *s, size_t bytes)
{
    fg_cpu_conv_cache *c = be->conv_cache;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->count; i++)
        if (fg_cpu_same_shape(&c->e[i]->s, s, 1) && c->e[i]->budget < bytes)
            c->e[i]->budget = bytes;
    pthread_mutex_unlock(&c->lock);
}

/* The dtypes oneDNN runs here: all f32, or bf16 activations and weights where bf16 is
 * native (the CPU, the build and [backend] bf16 allow it, cpu_bf16.c, and oneDNN's ISA has
 * it); the gradients' dtype is free: they are summed in f32, then stored. */
static int fg_cpu_conv_dnnl_types(const fg_cpu_backend *be, uint32_t act, uint32_t param)
{
    return (act == FG_F32 && param == FG_F32) ||
           (act == FG_BF16 && param == FG_BF16 && be->bf16_native &&
            fg_cpu_dnnl_bf16_native());
}

static void fg_cpu_conv_describe(const fg_cpu_conv_entry *e, char *buf, size_t len)
{
    const fg_cpu_conv_shape *s = &e->s;
    snprintf(buf, len, "conv2d n%d c%d %dx%d -> k%d %dx%d stride %d,%d pad %d,%d %s", s->n, s->c,
             s->h, s->w, s->k, s->r, s->s, s->stride_h, s->stride_w, s->pad_h, s->pad_w,
             e->act == FG_CPU_BF16 ? "bf16" : "f32");
}

/* The entry to run this call with oneDNN (its algorithm still to be decided), or NULL for
 * im2col. Why oneDNN cannot run a shape is logged once per (shape, dtypes): a warning
 * when conv_algorithm = onednn asked for it, an info line (the run's record) under auto. */
static fg_cpu_conv_entry *fg_cpu_conv_pick(fg_cpu_backend *be, const fg_conv2d_desc *d,
                                           uint32_t act, uint32_t param, const void *workspace)
{
    if (be->conv_algorithm == FG_CPU_CONV_IM2COL || !workspace)
        return NULL;
    if (fg_cpu_im2col_conv2d_workspace(be, d) == 0)
        return NULL; /* a bad descriptor: im2col's checks say why */
    if (!fg_cpu_conv_dnnl_types(be, act, param))
        return NULL;
    fg_cpu_conv_shape s = { d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->pad_h, d->pad_w,
                            d->stride_h, d->stride_w, d->out_h, d->out_w, NULL };
    fg_cpu_conv_entry *e = fg_cpu_conv_entry_get(be, &s, (int)act, (int)param);
    if (!e)
        return NULL;
    const char *why = e->why;
    if (e->dnnl && fg_cpu_dnnl_conv_workspace(e->dnnl) > fg_cpu_conv_budget(be, &s))
        why = "its workspace is larger than the one conv2d_workspace sized for this shape";
    else if (e->dnnl)
        return e;
    pthread_mutex_lock(&e->run);
    if (!e->logged_fallback && be->host && be->host->log) {
        char what[160];
        fg_cpu_conv_describe(e, what, sizeof what);
        if (be->conv_algorithm == FG_CPU_CONV_ONEDNN)
            be->host->log(be->host, FG_LOG_WARN,
                          "cpu backend: %s runs im2col although conv_algorithm = onednn: %s",
                          what, why);
        else
            be->host->log(be->host, FG_LOG_INFO, "cpu backend: %s: im2col (oneDNN cannot: %s)",
                          what, why);
        e->logged_fallback = 1;
    }
    pthread_mutex_unlock(&e->run);
    return NULL;
}

static double fg_cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One line per (shape, dtypes, direction): what runs and why, at info level. */
static void fg_cpu_conv_log(fg_cpu_backend *be, const fg_cpu_conv_entry *e, int dir,
                            const char *how, double onednn_s, double im2col_s)
{
    if (!be->host || !be->host->log)
        return;
    char what[160], times[96] = "";
    const char *impl[3];
    fg_cpu_conv_describe(e, what, sizeof what);
    fg_cpu_dnnl_conv_impl(e->dnnl, &impl[0], &impl[1], &impl[2]);
    if (onednn_s > 0)
        snprintf(times, sizeof times, ": onednn %.3f ms, im2col %.3f ms", onednn_s * 1e3,
                 im2col_s * 1e3);
    be->host->log(be->host, FG_LOG_INFO, "cpu backend: %s %s: %s (%s%s; oneDNN %s)", what,
                  dir == DIR_FWD ? "forward" : "backward", fg_cpu_conv_names[e->algo[dir]], how,
                  times, dir == DIR_FWD ? impl[0] : impl[2]);
}

typedef fg_status (*fg_cpu_conv_run_fn)(void *ctx, int algo, fg_error *err);

/* Times both algorithms (a warm-up, then the minimum of a few runs) and keeps the faster;
 * logs the choice. */
static fg_status fg_cpu_conv_choose(fg_cpu_backend *be, fg_cpu_conv_entry *e, int dir,
                                    fg_cpu_conv_run_fn run, void *ctx, fg_error *err)
{
    double best[2] = { 1e30, 1e30 };
    int algos[2] = { FG_CPU_CONV_IM2COL, FG_CPU_CONV_ONEDNN };
    for (int a = 0; a < 2; a++) {
        for (int i = 0; i <= FG_CPU_CONV_TIMED_RUNS; i++) {
            double t0 = fg_cpu_now();
            fg_status st = run(ctx, algos[a], err);
            if (st != FG_OK)
                return st;
            double t = fg_cpu_now() - t0;
            if (i > 0 && t < best[a])
                best[a] = t;
        }
    }
    e->algo[dir] = best[1] < best[0] ? FG_CPU_CONV_ONEDNN : FG_CPU_CONV_IM2COL;
    fg_cpu_conv_log(be, e, dir, "timed", best[1], best[0]);
    return FG_OK;
}

/* Decides the algorithm of e for dir: fixed by the key, or timed with run. */
static fg_status fg_cpu_conv_decide(fg_cpu_backend *be, fg_cpu_conv_entry *e, int dir,
                                    fg_cpu_conv_run_fn run, void *ctx, fg_error *err)
{
    if (e->algo[dir] >= 0)
        return FG_OK;
    if (be->conv_algorithm == FG_CPU_CONV_ONEDNN) {
        e->algo[dir] = FG_CPU_CONV_ONEDNN;
        fg_cpu_conv_log(be, e, dir, "conv_algorithm = onednn", 0, 0);
        return FG_OK;
    }
    return fg_cpu_conv_choose(be, e, dir, run, ctx, err);
}

static fg_status fg_cpu_conv_dnnl_error(int rc, const char *why, fg_error *err)
{
    return rc == 0 ? FG_OK : fg_error_set(err, FG_BACKEND_ERROR, "cpu backend: %s", why);
}

/* ---- forward ---------------------------------------------------------------------------- */

typedef struct fg_cpu_conv_fwd {
    fg_cpu_backend *be;
    fg_cpu_conv_entry *e;
    void *queue;
    uint32_t act, param;
    const fg_conv2d_desc *d;
    const void *x, *w, *bias;
    void *y, *workspace;
} fg_cpu_conv_fwd;

static fg_status fg_cpu_conv_fwd_run(void *p, int algo, fg_error *err)
{
    fg_cpu_conv_fwd *f = p;
    if (algo == FG_CPU_CONV_IM2COL)
        return fg_cpu_im2col_conv2d_forward(f->be, f->queue, f->act, f->param, f->d, f->x, f->w,
                                            f->bias, f->y, f->workspace, err);
    char why[200];
    int rc = fg_cpu_dnnl_conv_forward(f->be->pool, f->e->dnnl, f->x, f->w, f->bias, f->y,
                                      f->workspace, why, sizeof why);
    return fg_cpu_conv_dnnl_error(rc, why, err);
}

fg_status fg_cpu_op_conv2d_forward(void *state, void *queue, uint32_t x_dtype,
                                   uint32_t param_dtype, const fg_conv2d_desc *d,
                                   const void *x, const void *w, const void *bias, void *y,
                                   void *workspace, fg_error *err)
{
    fg_status nchw = fg_cpu_nchw_only("conv2d_forward", d, err);
    if (nchw != FG_OK)
        return nchw;
    fg_cpu_backend *be = state;
    fg_cpu_conv_entry *e = queue && x && w && y ? fg_cpu_conv_pick(be, d, x_dtype, param_dtype,
                                                                   workspace)
                                                : NULL;
    if (!e)
        return fg_cpu_im2col_conv2d_forward(state, queue, x_dtype, param_dtype, d, x, w, bias, y,
                                            workspace, err);
    fg_cpu_conv_fwd f = { be, e, queue, x_dtype, param_dtype, d, x, w, bias, y, workspace };
    pthread_mutex_lock(&e->run);
    fg_status st = fg_cpu_conv_decide(be, e, DIR_FWD, fg_cpu_conv_fwd_run, &f, err);
    if (st == FG_OK)
        st = fg_cpu_conv_fwd_run(&f, e->algo[DIR_FWD], err);
    pthread_mutex_unlock(&e->run);
    return st;
}

/* ---- backward --------------------------------------------------------------------------- */

typedef struct fg_cpu_conv_bwd {
    fg_cpu_backend *be;
    fg_cpu_conv_entry *e;
    void *queue;
    uint32_t act, param, grad;
    const fg_conv2d_desc *d;
    const void *x, *w, *dy;
    void *dx, *dw, *dbias, *workspace;
    int accumulate;
} fg_cpu_conv_bwd;

static fg_status fg_cpu_conv_bwd_run(void *p, int algo, fg_error *err)
{
    fg_cpu_conv_bwd *b = p;
    if (algo == FG_CPU_CONV_IM2COL)
        return fg_cpu_im2col_conv2d_backward(b->be, b->queue, b->act, b->param, b->grad, b->d,
                                             b->x, b->w, b->dy, b->dx, b->dw, b->dbias,
                                             b->accumulate, b->workspace, err);
    char why[200];
    int rc = fg_cpu_dnnl_conv_backward(b->be->pool, b->e->dnnl, b->x, b->w, b->dy, b->dx, b->dw,
                                       b->dbias, (int)b->grad, b->accumulate, b->workspace, why,
                                       sizeof why);
    return fg_cpu_conv_dnnl_error(rc, why, err);
}

static size_t fg_cpu_dtype_size(uint32_t t)
{
    return t == FG_F32 ? 4 : 2;
}

/* Times both algorithms on scratch outputs, so that the real gradients (which may be
 * accumulated into) are written once, by the chosen one. */
static fg_status fg_cpu_conv_bwd_decide(fg_cpu_conv_bwd *b, fg_error *err)
{
    fg_cpu_conv_entry *e = b->e;
    if (e->algo[DIR_BWD] >= 0 || b->be->conv_algorithm == FG_CPU_CONV_ONEDNN)
        return fg_cpu_conv_decide(b->be, e, DIR_BWD, fg_cpu_conv_bwd_run, b, err);
    const fg_conv2d_desc *d = b->d;
    size_t xn = (size_t)d->n * (size_t)d->c * (size_t)d->h * (size_t)d->w;
    size_t wn = (size_t)d->k * (size_t)d->c * (size_t)d->r * (size_t)d->s;
    fg_cpu_conv_bwd t = *b;
    t.accumulate = 0;
    t.dx = b->dx ? malloc(xn * fg_cpu_dtype_size(b->act)) : NULL;
    t.dw = b->dw ? malloc(wn * fg_cpu_dtype_size(b->grad)) : NULL;
    t.dbias = b->dbias ? malloc((size_t)d->k * fg_cpu_dtype_size(b->grad)) : NULL;
    fg_status st = FG_OK;
    if ((b->dx && !t.dx) || (b->dw && !t.dw) || (b->dbias && !t.dbias))
        st = fg_error_set(err, FG_OUT_OF_MEMORY,
                          "cpu backend: conv2d_backward: no memory to time the algorithms");
    else
        st = fg_cpu_conv_decide(b->be, e, DIR_BWD, fg_cpu_conv_bwd_run, &t, err);
    free(t.dx);
    free(t.dw);
    free(t.dbias);
    return st;
}

fg_status fg_cpu_op_conv2d_backward(void *state, void *queue, uint32_t x_dtype,
                                    uint32_t param_dtype, uint32_t grad_dtype,
                                    const fg_conv2d_desc *d, const void *x, const void *w,
                                    const void *dy, void *dx, void *dw, void *dbias,
                                    int accumulate, void *workspace, fg_error *err)
{
    fg_status nchw = fg_cpu_nchw_only("conv2d_backward", d, err);
    if (nchw != FG_OK)
        return nchw;
    fg_cpu_backend *be = state;
    int grad_ok = grad_dtype == FG_F32 || grad_dtype == FG_F16 || grad_dtype == FG_BF16;
    fg_cpu_conv_entry *e = queue && x && w && dy && dw && grad_ok
                               ? fg_cpu_conv_pick(be, d, x_dtype, param_dtype, workspace)
                               : NULL;
    if (!e)
        return fg_cpu_im2col_conv2d_backward(state, queue, x_dtype, param_dtype, grad_dtype, d,
                                             x, w, dy, dx, dw, dbias, accumulate, workspace,
                                             err);
    fg_cpu_conv_bwd b = { be, e, queue, x_dtype, param_dtype, grad_dtype, d, x, w, dy,
                          dx, dw, dbias, workspace, accumulate };
    pthread_mutex_lock(&e->run);
    fg_status st = fg_cpu_conv_bwd_decide(&b, err);
    if (st == FG_OK)
        st = fg_cpu_conv_bwd_run(&b, e->algo[DIR_BWD], err);
    pthread_mutex_unlock(&e->run);
    return st;
}

/* ---- workspace, setup ------------------------------------------------------------------- */

size_t fg_cpu_op_conv2d_workspace(void *state, const fg_conv2d_desc *d)
{
    fg_cpu_backend *be = state;
    size_t ws = fg_cpu_im2col_conv2d_workspace(state, d);
    if (ws == 0 || be->conv_algorithm == FG_CPU_CONV_IM2COL)
        return ws;
    fg_cpu_conv_shape s = { d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->pad_h, d->pad_w,
                            d->stride_h, d->stride_w, d->out_h, d->out_w, NULL };
    /* every dtype the ops may run oneDNN with: f32, and bf16 where it is native */
    for (int t = FG_CPU_F32; t <= FG_CPU_BF16; t += FG_CPU_BF16 - FG_CPU_F32) {
        if (!fg_cpu_conv_dnnl_types(be, (uint32_t)t, (uint32_t)t))
            continue;
        fg_cpu_conv_entry *e = fg_cpu_conv_entry_get(be, &s, t, t);
        if (e && e->dnnl && fg_cpu_dnnl_conv_workspace(e->dnnl) > ws)
            ws = fg_cpu_dnnl_conv_workspace(e->dnnl);
    }
    fg_cpu_conv_set_budget(be, &s, ws);
    return ws;
}

fg_status fg_cpu_conv_init(fg_cpu_backend *be, const char *algorithm, fg_error *err)
{
    int a = FG_CPU_CONV_AUTO;
    fg_status st = fg_cpu_conv_parse(algorithm, &a, err);
    if (st != FG_OK)
        return st;
    be->conv_algorithm = a;
    if (a == FG_CPU_CONV_IM2COL)
        return FG_OK;
    if (!(be->conv_cache = calloc(1, sizeof *be->conv_cache)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "cpu backend: cannot allocate the conv cache");
    pthread_mutex_init(&be->conv_cache->lock, NULL);
    return FG_OK;
}

void fg_cpu_conv_deinit(fg_cpu_backend *be)
{
    fg_cpu_conv_cache *c = be->conv_cache;
    if (!c)
        return;
    for (int i = 0; i < c->count; i++) {
        fg_cpu_dnnl_conv_destroy(c->e[i]->dnnl);
        pthread_mutex_destroy(&c->e[i]->run);
        free(c->e[i]);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
    be->conv_cache = NULL;
}

#else /* without oneDNN: im2col, and conv_algorithm = onednn is refused */

size_t fg_cpu_op_conv2d_workspace(void *state, const fg_conv2d_desc *d)
{
    return fg_cpu_im2col_conv2d_workspace(state, d);
}

fg_status fg_cpu_op_conv2d_forward(void *state, void *queue, uint32_t x_dtype,
                                   uint32_t param_dtype, const fg_conv2d_desc *d,
                                   const void *x, const void *w, const void *bias, void *y,
                                   void *workspace, fg_error *err)
{
    return fg_cpu_im2col_conv2d_forward(state, queue, x_dtype, param_dtype, d, x, w, bias, y,
                                        workspace, err);
}

fg_status fg_cpu_op_conv2d_backward(void *state, void *queue, uint32_t x_dtype,
                                    uint32_t param_dtype, uint32_t grad_dtype,
                                    const fg_conv2d_desc *d, const void *x, const void *w,
                                    const void *dy, void *dx, void *dw, void *dbias,
                                    int accumulate, void *workspace, fg_error *err)
{
    return fg_cpu_im2col_conv2d_backward(state, queue, x_dtype, param_dtype, grad_dtype, d, x, w,
                                         dy, dx, dw, dbias, accumulate, workspace, err);
}

fg_status fg_cpu_conv_init(fg_cpu_backend *be, const char *algorithm, fg_error *err)
{
    int a = FG_CPU_CONV_AUTO;
    fg_status st = fg_cpu_conv_parse(algorithm, &a, err);
    if (st != FG_OK)
        return st;
    if (a == FG_CPU_CONV_ONEDNN)
        return fg_error_set(err, FG_UNAVAILABLE,
                            "cpu backend: option conv_algorithm = onednn: this fulgur-backend-cpu "
                            "was built without oneDNN (install libdnnl-dev and rebuild with "
                            "FULGUR_WITH_DNNL=ON); use auto or im2col");
    be->conv_algorithm = FG_CPU_CONV_IM2COL; /* auto: the only one there is */
    return FG_OK;
}

void fg_cpu_conv_deinit(fg_cpu_backend *be)
{
    (void)be;
}

#endif
