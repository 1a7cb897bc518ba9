/* Parity of the fused residual layer norms (ABI 1.5) against the CPU backend, and on each
 * backend bitwise against the two ops they fuse (what the transformer block ran before
 * them): layernorm_residual_forward = axpy(1, a, b) then layernorm_forward, in place of b
 * (the block's use), of a and into a third buffer; layernorm_residual_backward =
 * layernorm_backward then axpy(1, dres, dx), with and without dx, accumulating or not. Odd
 * widths, rows past one block's shared sums, aligned and unaligned buffers, f32, bf16 and
 * f16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

/* activations, parameters, gradients */
static const uint32_t res_mixes[][3] = {
    { FG_F32, FG_F32, FG_F32 },
    { FG_BF16, FG_BF16, FG_F32 },
    { FG_F16, FG_F16, FG_F32 },
};

enum { INTO_B, INTO_A, INTO_R };

static pair at(size_t n, uint32_t t, size_t skip, double lo, double hi)
{
    pair p = prandom(n + skip, t, lo, hi);
    size_t b = skip * dtype_size(t);
    pair v = { (char *)p.c + b, (char *)p.g + b, p.bytes - b };
    return v;
}

/* A second buffer with the same bytes as p on each side, at the same skip. */
static pair twin(pair p, size_t n, uint32_t t, size_t skip)
{
    pair q = at(n, t, skip, 0, 1);
    unsigned char *g = malloc(p.bytes);
    memcpy(q.c, p.c, p.bytes);
    download(p, g);
    fg_error e = {0};
    if (P.dut->copy(P.ds, P.dq, q.g, 0, g, -1, p.bytes, &e) != FG_OK ||
        P.dut->queue_sync(P.ds, P.dq, &e) != FG_OK)
        fail("twin: copy: %s", e.message);
    free(g);
    return q;
}

/* Each side's a and b hold the same bytes. */
static void same_bits(const char *what, pair a, pair b, size_t bytes)
{
    unsigned char *ga = malloc(bytes), *gb = malloc(bytes);
    download(a, ga);
    download(b, gb);
    checks++;
    if (memcmp(a.c, b.c, bytes) != 0)
        fail("%s: cpu: the fused and the two-op results differ", what);
    checks++;
    if (memcmp(ga, gb, bytes) != 0)
        fail("%s: %s: the fused and the two-op results differ", what, P.dut_name);
    free(ga);
    free(gb);
}

static void forward_case(const uint32_t *dt, int rows, int cols, int rms, int into, size_t off)
{
    size_t n = (size_t)rows * (size_t)cols, c = (size_t)cols, es = dtype_size(dt[0]);
    double tol = tol_of(dt[0]) > tol_of(dt[1]) ? tol_of(dt[0]) : tol_of(dt[1]);
    char name[160];
    snprintf(name, sizeof name, "%d x %d rms=%d into=%c +%zu %s", rows, cols, rms,
             "bar"[into], off, fg_dtype_name((fg_dtype)dt[0]));
    pair a = at(n, dt[0], off, -2, 2), b = at(n, dt[0], off, -1, 3);
    pair g = at(c, dt[1], off, 0.5, 1.5), be = at(c, dt[1], off, -1, 1);
    pair a0 = twin(a, n, dt[0], off), b0 = twin(b, n, dt[0], off);
    pair r = into == INTO_B ? b : into == INTO_A ? a : at(n, dt[0], off, 0, 1);
    pair y = at(n, dt[0], off, 0, 1), mean = pnew((size_t)rows * 4), rstd = pnew((size_t)rows * 4);
    ppoison(y);
    ppoison(mean);
    ppoison(rstd);
    if (into == INTO_R)
        ppoison(r);
    const char *what = W("layernorm_residual_forward %s", name);
    BOTH(what, V->layernorm_residual_forward(S, Q, dt[0], dt[1], rms, rows, cols, X(a), X(b),
                                             X(r), X(g), XN(!rms, be), 1e-5f, XN(!rms, mean),
                                             X(rstd), X(y), E));
    compare(W("layernorm_residual_forward %s (r)", name), r, n, dt[0], 0);
    compare(W("layernorm_residual_forward %s (y)", name), y, n, dt[0], tol);
    if (!rms)
        compare(W("layernorm_residual_forward %s (mean)", name), mean, (size_t)rows, FG_F32,
                1e-6);
    compare(W("layernorm_residual_forward %s (rstd)", name), rstd, (size_t)rows, FG_F32, 1e-6);
    /* the two ops on each side from the same inputs: b0 += a0, then its norm */
    pair y2 = at(n, dt[0], off, 0, 1), mean2 = pnew((size_t)rows * 4), rstd2 = pnew((size_t)rows * 4);
    BOTH("axpy (against the fused forward)",
         V->axpy(S, Q, dt[0], dt[0], 1.0f, X(a0), X(b0), n, E));
    BOTH("layernorm_forward (against the fused forward)",
         V->layernorm_forward(S, Q, dt[0], dt[1], rms, rows, cols, X(b0), X(g), XN(!rms, be),
                              1e-5f, XN(!rms, mean2), X(rstd2), X(y2), E));
    same_bits(W("layernorm_residual_forward %s = axpy + layernorm_forward (r)", name), r, b0,
              n * es);
    same_bits(W("layernorm_residual_forward %s = axpy + layernorm_forward (y)", name), y, y2,
              n * es);
    same_bits(W("layernorm_residual_forward %s = axpy + layernorm_forward (rstd)", name), rstd,
              rstd2, (size_t)rows * 4);
    release_all();
}

static void backward_case(const uint32_t *dt, int rows, int cols, int rms, int acc, int with_dx,
                          size_t off)
{
    size_t n = (size_t)rows * (size_t)cols, c = (size_t)cols, es = dtype_size(dt[0]);
    size_t gs = dtype_size(dt[2]);
    double tol = tol_of(dt[0]) > tol_of(dt[1]) ? tol_of(dt[0]) : tol_of(dt[1]);
    char name[160];
    snprintf(name, sizeof name, "%d x %d rms=%d acc=%d dx=%d +%zu %s", rows, cols, rms, acc,
             with_dx, off, fg_dtype_name((fg_dtype)dt[0]));
    pair x = at(n, dt[0], off, -2, 3), g = at(c, dt[1], off, 0.5, 1.5);
    pair mean = pnew((size_t)rows * 4), rstd = pnew((size_t)rows * 4), y = at(n, dt[0], off, 0, 1);
    BOTH("layernorm_forward (statistics)",
         V->layernorm_forward(S, Q, dt[0], dt[1], rms, rows, cols, X(x), X(g), NULL, 1e-5f,
                              XN(!rms, mean), X(rstd), X(y), E));
    pmirror(mean); /* the CPU's statistics on both sides */
    pmirror(rstd);
    pair dy = at(n, dt[0], off, -1, 1), dres = at(n, dt[0], off, -1, 1);
    pair dx = at(n, dt[0], off, 0, 1), dg = at(c, dt[2], off, -1, 1), db = at(c, dt[2], off, -1, 1);
    pair dg0 = twin(dg, c, dt[2], off), db0 = twin(db, c, dt[2], off);
    ppoison(dx);
    if (!acc) {
        ppoison(dg);
        ppoison(db);
    }
    const char *what = W("layernorm_residual_backward %s", name);
    BOTH(what, V->layernorm_residual_backward(S, Q, dt[0], dt[1], dt[2], rms, rows, cols, X(x),
                                              X(g), XN(!rms, mean), X(rstd), X(dy), X(dres),
                                              XN(with_dx, dx), X(dg), XN(!rms, db), acc, E));
    if (with_dx)
        compare(W("layernorm_residual_backward %s (dx)", name), dx, n, dt[0], tol);
    compare(W("layernorm_residual_backward %s (dgamma)", name), dg, c, dt[2], 1e-5);
    if (!rms)
        compare(W("layernorm_residual_backward %s (dbeta)", name), db, c, dt[2], 1e-5);
    /* the two ops on each side */
    pair dx2 = at(n, dt[0], off, 0, 1);
    BOTH("layernorm_backward (against the fused backward)",
         V->layernorm_backward(S, Q, dt[0], dt[1], dt[2], rms, rows, cols, X(x), X(g),
                               XN(!rms, mean), X(rstd), X(dy), XN(with_dx, dx2), X(dg0),
                               XN(!rms, db0), acc, E));
    if (with_dx) {
        BOTH("axpy (against the fused backward)",
             V->axpy(S, Q, dt[0], dt[0], 1.0f, X(dres), X(dx2), n, E));
        same_bits(W("layernorm_residual_backward %s = layernorm_backward + axpy (dx)", name), dx,
                  dx2, n * es);
    }
    same_bits(W("layernorm_residual_backward %s = layernorm_backward (dgamma)", name), dg, dg0,
              c * gs);
    if (!rms)
        same_bits(W("layernorm_residual_backward %s = layernorm_backward (dbeta)", name), db,
                  db0, c * gs);
    release_all();
}

/* The argument checks the shared header adds: dres is needed with dx and must be another
 * buffer. */
static void refusals(void)
{
    pair x = prandom(12, FG_F32, -1, 1), g = prandom(4, FG_F32, 0.5, 1.5);
    pair st = pnew(12), dx = pnew(48);
    static const char *const wants[2] = { "dres is NULL", "dx and dres are the same buffer" };
    for (int k = 0; k < 2; k++) {
        fg_error e = {0};
        fg_status s = P.dut->layernorm_residual_backward(
            P.ds, P.dq, FG_F32, FG_F32, FG_F32, 0, 3, 4, x.g, g.g, st.g, st.g, x.g,
            k ? dx.g : NULL, dx.g, NULL, NULL, 0, &e);
        checks++;
        if (s != FG_INVALID_ARGUMENT || !strstr(e.message, "layernorm_residual_backward") ||
            !strstr(e.message, wants[k]))
            fail("layernorm_residual_backward refusal %d: %s '%s'", k, fg_status_name(s),
                 e.message);
    }
    release_all();
}

void test_ln_residual(void)
{
    static const int shapes[][2] = { { 1, 1 }, { 3, 7 }, { 5, 33 }, { 7, 769 }, { 65, 64 },
                                     { 301, 48 }, { 3, 3100 } };
    for (int m = 0; m < 3; m++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t off = 0; off < 2; off++) {
                int rows = shapes[s][0], cols = shapes[s][1], rms = (int)(s % 3 == 2);
                forward_case(res_mixes[m], rows, cols, rms, (int)((s + off) % 3), off);
                backward_case(res_mixes[m], rows, cols, rms, (int)((s + off) % 2), 1, off);
                if (s % 3 == 0)
                    backward_case(res_mixes[m], rows, cols, rms, 1, 0, off);
            }
    refusals();
}
