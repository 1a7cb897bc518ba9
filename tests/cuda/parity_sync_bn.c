/* Parity group batchnorm_sync: the ABI 1.8 split batch-norm ops ([model] sync_batchnorm)
 * over two replicas with different batch sizes, their f64 sums added on the host between
 * the halves as the replica all-reduce would; odd channel counts, n * spatial off the CUDA
 * kernels' block of 512, f32 and the half-precision mixes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

typedef struct sbn_mix {
    uint32_t act, param, grad;
} sbn_mix;

static const sbn_mix sbn_mixes[] = {
    {FG_F32, FG_F32, FG_F32},
    {FG_BF16, FG_BF16, FG_F32},
    {FG_BF16, FG_F32, FG_F32},
    {FG_F16, FG_F16, FG_F32},
};

/* n of replica 0, n of replica 1, c, spatial; the last as channels-last batch norm calls it,
 * (n*h*w, c, 1) */
static const int sbn_shapes[][4] = {{2, 3, 3, 1},   {3, 5, 7, 173}, {1, 4, 5, 130},
                                    {4, 1, 1, 513}, {300, 173, 7, 1}};

static double sbn_tol(const sbn_mix *dt)
{
    double t = tol_of(dt->act);
    return tol_of(dt->param) > t ? tol_of(dt->param) : t;
}

/* The (2c + 1) f64 sums: within tol of the CPU's relative to their norm, the count exact
 * (bitwise when the backend under test is the CPU's). */
static void compare_sums(const char *what, pair p, int c, double tol)
{
    size_t n = 2 * (size_t)c + 1;
    if (P.skip_outputs)
        return;
    if (P.exact) {
        compare_exact(what, p, n * sizeof(double));
        return;
    }
    checks++;
    double *g = malloc(n * sizeof *g);
    const double *want = p.c;
    download(p, g);
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (!isfinite(g[i]))
            diff = INFINITY;
        diff += (g[i] - want[i]) * (g[i] - want[i]);
        norm += want[i] * want[i];
    }
    double rel = norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
    if (!(rel <= tol))
        fail("%s: sums differ by %g relative (tolerance %g)", what, rel, tol);
    else if (g[n - 1] != want[n - 1])
        fail("%s: count %.17g, cpu %.17g", what, g[n - 1], want[n - 1]);
    free(g);
}

/* total = a + b on the CPU side's values, then the same bytes on both sides. */
static pair sum_of(pair a, pair b, int c)
{
    size_t n = 2 * (size_t)c + 1;
    pair t = pnew(n * sizeof(double));
    double *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = ((const double *)a.c)[i] + ((const double *)b.c)[i];
    pput(t, h);
    free(h);
    return t;
}

typedef struct sbn_replica {
    int n;
    size_t xn;
    pair x, y, stats, sm, si, rm, rv, dy, dx, sums, dg, db;
} sbn_replica;

static void forward_half(const sbn_mix *dt, sbn_replica *r, int c, int sp)
{
    r->xn = (size_t)r->n * (size_t)c * (size_t)sp;
    r->x = prandom(r->xn, dt->act, -2, 3);
    r->stats = pnew((2 * (size_t)c + 1) * sizeof(double));
    ppoison(r->stats);
    const char *what = W("batchnorm_stats n=%d c=%d sp=%d %s", r->n, c, sp,
                         fg_dtype_name((fg_dtype)dt->act));
    BOTH(what, V->batchnorm_stats(S, Q, dt->act, r->n, c, sp, X(r->x), X(r->stats), E));
    compare_sums(what, r->stats, c, 1e-12);
}

static void apply(const sbn_mix *dt, sbn_replica *r, int c, int sp, int affine, pair total,
                  pair gamma, pair beta)
{
    r->y = pnew(r->xn * dtype_size(dt->act));
    r->sm = pnew((size_t)c * 4);
    r->si = pnew((size_t)c * 4);
    r->rm = prandom((size_t)c, FG_F32, -0.5, 0.5);
    r->rv = prandom((size_t)c, FG_F32, 0.5, 2);
    ppoison(r->y);
    ppoison(r->sm);
    ppoison(r->si);
    const char *what = W("batchnorm_apply n=%d c=%d sp=%d affine=%d %s", r->n, c, sp, affine,
                         fg_dtype_name((fg_dtype)dt->act));
    BOTH(what, V->batchnorm_apply(S, Q, dt->act, dt->param, r->n, c, sp, X(r->x), X(total),
                                  XN(affine, gamma), XN(affine, beta), XN(affine, r->rm),
                                  XN(affine, r->rv), 0.1f, 1e-5f, X(r->sm), X(r->si), X(r->y),
                                  E));
    compare(what, r->y, r->xn, dt->act, sbn_tol(dt));
    compare(W("batchnorm_apply c=%d sp=%d (saved mean)", c, sp), r->sm, (size_t)c, FG_F32, 1e-6);
    compare(W("batchnorm_apply c=%d sp=%d (saved invstd)", c, sp), r->si, (size_t)c, FG_F32,
            1e-6);
    if (affine) {
        compare(W("batchnorm_apply c=%d sp=%d (running mean)", c, sp), r->rm, (size_t)c, FG_F32,
                1e-6);
        compare(W("batchnorm_apply c=%d sp=%d (running var)", c, sp), r->rv, (size_t)c, FG_F32,
                1e-6);
    }
    pmirror(r->sm); /* backward reads the same saved statistics on both sides */
    pmirror(r->si);
}

static void backward_reduce(const sbn_mix *dt, sbn_replica *r, int c, int sp, int acc)
{
    r->dy = prandom(r->xn, dt->act, -1, 1);
    r->dg = prandom((size_t)c, dt->grad, -1, 1);
    r->db = prandom((size_t)c, dt->grad, -1, 1);
    r->sums = pnew((2 * (size_t)c + 1) * sizeof(double));
    ppoison(r->sums);
    if (!acc) {
        ppoison(r->dg);
        ppoison(r->db);
    }
    const char *what = W("batchnorm_backward_reduce n=%d c=%d sp=%d acc=%d %s", r->n, c, sp,
                         acc, fg_dtype_name((fg_dtype)dt->act));
    BOTH(what, V->batchnorm_backward_reduce(S, Q, dt->act, dt->grad, r->n, c, sp, X(r->x),
                                            X(r->sm), X(r->si), X(r->dy), X(r->sums),
                                            X(r->dg), X(r->db), acc, E));
    compare_sums(what, r->sums, c, 1e-10);
    compare(W("batchnorm_backward_reduce c=%d sp=%d acc=%d (dgamma)", c, sp, acc), r->dg,
            (size_t)c, dt->grad, sbn_tol(dt));
    compare(W("batchnorm_backward_reduce c=%d sp=%d acc=%d (dbeta)", c, sp, acc), r->db,
            (size_t)c, dt->grad, sbn_tol(dt));
}

static void backward_apply(const sbn_mix *dt, sbn_replica *r, int c, int sp, int affine,
                           pair total, pair gamma)
{
    r->dx = pnew(r->xn * dtype_size(dt->act));
    ppoison(r->dx);
    const char *what = W("batchnorm_backward_apply n=%d c=%d sp=%d affine=%d %s", r->n, c, sp,
                         affine, fg_dtype_name((fg_dtype)dt->act));
    BOTH(what, V->batchnorm_backward_apply(S, Q, dt->act, dt->param, r->n, c, sp, X(r->x),
                                           XN(affine, gamma), X(r->sm), X(r->si), X(r->dy),
                                           X(total), X(r->dx), E));
    compare(what, r->dx, r->xn, dt->act, sbn_tol(dt));
}

static void sync_case(const sbn_mix *dt, const int *shape, int affine, int acc)
{
    int c = shape[2], sp = shape[3];
    sbn_replica r[2] = {{.n = shape[0]}, {.n = shape[1]}};
    pair gamma = prandom((size_t)c, dt->param, 0.5, 1.5);
    pair beta = prandom((size_t)c, dt->param, -0.5, 0.5);
    for (int i = 0; i < 2; i++)
        forward_half(dt, &r[i], c, sp);
    pair total = sum_of(r[0].stats, r[1].stats, c);
    for (int i = 0; i < 2; i++)
        apply(dt, &r[i], c, sp, affine, total, gamma, beta);
    for (int i = 0; i < 2; i++)
        backward_reduce(dt, &r[i], c, sp, acc);
    pair dtotal = sum_of(r[0].sums, r[1].sums, c);
    for (int i = 0; i < 2; i++)
        backward_apply(dt, &r[i], c, sp, affine, dtotal, gamma);
    release_all();
}

void test_batchnorm_sync(void)
{
    for (size_t m = 0; m < sizeof sbn_mixes / sizeof sbn_mixes[0]; m++)
        for (size_t s = 0; s < sizeof sbn_shapes / sizeof sbn_shapes[0]; s++)
            for (int variant = 0; variant < 2; variant++) /* 0: affine, running, acc=0 */
                sync_case(&sbn_mixes[m], sbn_shapes[s], variant == 0, variant);
}
