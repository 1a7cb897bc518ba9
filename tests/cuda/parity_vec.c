/* Parity of the memory-bound kernels at the sizes and addresses that take a backend's
 * vectorised paths (16-byte loads and stores) and its scalar fallbacks: odd sizes (a whole
 * pack, a pack and a tail, only a tail), buffers 16-byte aligned and one element past that
 * (every pointer of the op unaligned), in f32, bf16 and f16, against the CPU backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

static const uint32_t vec_types[] = { FG_F32, FG_BF16, FG_F16 };
#define VEC_TYPES 3

/* The view of p that starts `skip` elements of dtype in: an unaligned address when skip
 * is odd (the allocations are aligned). */
static pair view(pair p, size_t skip, uint32_t dtype)
{
    size_t b = skip * dtype_size(dtype);
    pair v = { (char *)p.c + b, (char *)p.g + b, p.bytes - b };
    return v;
}

/* n random values of dtype `skip` elements into a fresh buffer. */
static pair rnd_at(size_t n, uint32_t dtype, size_t skip, double lo, double hi)
{
    return view(prandom(n + skip, dtype, lo, hi), skip, dtype);
}

static pair out_at(size_t n, uint32_t dtype, size_t skip)
{
    pair p = view(pnew((n + skip) * dtype_size(dtype)), skip, dtype);
    ppoison(p);
    return p;
}

static const size_t flat_n[] = { 1, 7, 33, 769, 4099 };

/* fill, scale, axpy (also f32 into a half), clamp, cast both ways, activations, bias_add,
 * dropout: the same f32 formula per element on both sides, so bitwise except the
 * transcendental activations (the host's and the device's tanhf/expf). */
static void vec_flat(uint32_t t, size_t n, size_t off)
{
    const char *tn = fg_dtype_name((fg_dtype)t);
    pair x = out_at(n, t, off);
    BOTH(W("fill n=%zu +%zu %s", n, off, tn), V->fill(S, Q, t, X(x), -0.375f, n, E));
    compare(W("fill n=%zu +%zu %s", n, off, tn), x, n, t, 0);
    x = rnd_at(n, t, off, -2, 2);
    BOTH(W("scale n=%zu +%zu %s", n, off, tn), V->scale(S, Q, t, X(x), 1.7f, n, E));
    compare(W("scale n=%zu +%zu %s", n, off, tn), x, n, t, 0);
    pair y = rnd_at(n, t, off, -2, 2), x32 = rnd_at(n, FG_F32, off, -1, 1);
    BOTH(W("axpy n=%zu +%zu %s", n, off, tn), V->axpy(S, Q, t, t, 0.3f, X(x), X(y), n, E));
    compare(W("axpy n=%zu +%zu %s", n, off, tn), y, n, t, 0);
    BOTH(W("axpy f32 into n=%zu +%zu %s", n, off, tn),
         V->axpy(S, Q, FG_F32, t, -1.25f, X(x32), X(y), n, E));
    compare(W("axpy f32 into n=%zu +%zu %s", n, off, tn), y, n, t, 0);
    BOTH(W("clamp n=%zu +%zu %s", n, off, tn), V->clamp(S, Q, t, X(y), -0.5f, 0.75f, n, E));
    compare(W("clamp n=%zu +%zu %s", n, off, tn), y, n, t, 0);
    pair c32 = out_at(n, FG_F32, off), ct = out_at(n, t, off);
    BOTH(W("cast to f32 n=%zu +%zu %s", n, off, tn),
         V->cast(S, Q, FG_F32, t, X(c32), X(y), n, E));
    compare(W("cast to f32 n=%zu +%zu %s", n, off, tn), c32, n, FG_F32, 0);
    BOTH(W("cast from f32 n=%zu +%zu %s", n, off, tn),
         V->cast(S, Q, t, FG_F32, X(ct), X(x32), n, E));
    compare(W("cast from f32 n=%zu +%zu %s", n, off, tn), ct, n, t, 0);
    for (int act = FG_ACT_RELU; act <= FG_ACT_SIGMOID; act++) {
        pair a = out_at(n, t, off), dx = out_at(n, t, off);
        BOTH(W("activation %d n=%zu +%zu %s", act, n, off, tn),
             V->activation_forward(S, Q, t, act, X(x), X(a), n, E));
        compare(W("activation %d n=%zu +%zu %s", act, n, off, tn), a, n, t, tol_of(t));
        pmirror(a);
        BOTH(W("activation %d backward n=%zu +%zu %s", act, n, off, tn),
             V->activation_backward(S, Q, t, act, X(x), X(a), X(y), X(dx), n, E));
        compare(W("activation %d backward n=%zu +%zu %s", act, n, off, tn), dx, n, t,
                tol_of(t));
    }
    int cols = (int)(n % 2 ? n : n / 2), rows = (int)(n / (size_t)cols);
    pair b = rnd_at((size_t)cols, t, off, -1, 1);
    BOTH(W("bias_add %d x %d +%zu %s", rows, cols, off, tn),
         V->bias_add(S, Q, t, t, X(y), X(b), rows, cols, 1, E));
    compare(W("bias_add %d x %d +%zu %s", rows, cols, off, tn), y, n, t, 0);
    pair d = out_at(n, t, off), dd = out_at(n, t, off), m0 = pnew(n + off);
    pair mask = { (char *)m0.c + off, (char *)m0.g + off, n };
    ppoison(mask);
    BOTH(W("dropout_forward n=%zu +%zu %s", n, off, tn),
         V->dropout_forward(S, Q, t, 0.25f, 77, 5, X(x), X(d), X(mask), n, E));
    compare(W("dropout_forward n=%zu +%zu %s", n, off, tn), d, n, t, 0);
    compare_exact(W("dropout_forward n=%zu +%zu %s (mask)", n, off, tn), mask, n);
    BOTH(W("dropout_backward n=%zu +%zu %s", n, off, tn),
         V->dropout_backward(S, Q, t, 0.25f, X(mask), X(y), X(dd), n, E));
    compare(W("dropout_backward n=%zu +%zu %s", n, off, tn), dd, n, t, 0);
    release_all();
}

/* Layer and RMS norm rows of odd widths (one pack, a pack and a tail, wider than the fused
 * backward's shared sums), aligned and not. */
static void vec_layernorm(uint32_t t, int rows, int cols, int rms, size_t off)
{
    const char *tn = fg_dtype_name((fg_dtype)t);
    size_t n = (size_t)rows * (size_t)cols, c = (size_t)cols;
    double tol = tol_of(t);
    pair x = rnd_at(n, t, off, -2, 3), g = rnd_at(c, t, off, 0.5, 1.5), b = rnd_at(c, t, off, -1, 1);
    pair y = out_at(n, t, off), mean = out_at((size_t)rows, FG_F32, 0);
    pair rstd = out_at((size_t)rows, FG_F32, 0);
    const char *what = W("layernorm_forward %d x %d rms=%d +%zu %s", rows, cols, rms, off, tn);
    BOTH(what, V->layernorm_forward(S, Q, t, t, rms, rows, cols, X(x), X(g), XN(!rms, b), 1e-5f,
                                    X(mean), X(rstd), X(y), E));
    compare(what, y, n, t, tol);
    compare(W("layernorm_forward %d x %d rms=%d +%zu %s (rstd)", rows, cols, rms, off, tn), rstd,
            (size_t)rows, FG_F32, 1e-6);
    pmirror(mean);
    pmirror(rstd);
    pair dy = rnd_at(n, t, off, -1, 1), dx = out_at(n, t, off);
    pair dg = out_at(c, FG_F32, off), db = out_at(c, FG_F32, off);
    what = W("layernorm_backward %d x %d rms=%d +%zu %s", rows, cols, rms, off, tn);
    BOTH(what, V->layernorm_backward(S, Q, t, t, FG_F32, rms, rows, cols, X(x), X(g), X(mean),
                                     X(rstd), X(dy), X(dx), X(dg), XN(!rms, db), 0, E));
    compare(W("layernorm_backward %d x %d rms=%d +%zu %s (dx)", rows, cols, rms, off, tn), dx,
            n, t, tol);
    compare(W("layernorm_backward %d x %d rms=%d +%zu %s (dgamma)", rows, cols, rms, off, tn),
            dg, c, FG_F32, 1e-5);
    if (!rms)
        compare(W("layernorm_backward %d x %d +%zu %s (dbeta)", rows, cols, off, tn), db, c,
                FG_F32, 1e-5);
    release_all();
}

/* Embedding rows of odd widths, table and output aligned and not. */
static void vec_embedding(uint32_t t, int n, int dim, size_t off)
{
    const char *tn = fg_dtype_name((fg_dtype)t);
    int rows = 11;
    size_t on = (size_t)n * (size_t)dim, tab = (size_t)rows * (size_t)dim;
    pair ids = pnew((size_t)n * 4);
    for (int i = 0; i < n; i++)
        ((int32_t *)ids.c)[i] = (int32_t)((i * 7 + 3) % rows);
    pmirror(ids);
    pair table = rnd_at(tab, t, off, -1, 1);
    for (int acc = 0; acc < 2; acc++) {
        pair out = acc ? rnd_at(on, t, off, -1, 1) : out_at(on, t, off);
        const char *what = W("embedding_forward n=%d dim=%d acc=%d +%zu %s", n, dim, acc, off, tn);
        BOTH(what, V->embedding_forward(S, Q, t, t, X(ids), n, dim, rows, X(table), X(out), acc,
                                        E));
        compare_exact(what, out, on * dtype_size(t));
        pair dout = rnd_at(on, t, off, -1, 1);
        pair dtab = acc ? rnd_at(tab, FG_F32, off, -1, 1) : out_at(tab, FG_F32, off);
        what = W("embedding_backward n=%d dim=%d acc=%d +%zu %s", n, dim, acc, off, tn);
        BOTH(what, V->embedding_backward(S, Q, t, FG_F32, X(ids), n, dim, rows, X(dout),
                                         X(dtab), acc, E));
        compare_exact(what, dtab, tab * 4);
    }
    release_all();
}

/* The loss's rows: logits aligned and not, a row stride of whole packs and not. */
static void vec_classifier(uint32_t t, int rows, int classes, int ld, size_t off)
{
    const char *tn = fg_dtype_name((fg_dtype)t);
    size_t n = (size_t)rows * (size_t)ld;
    pair logits = rnd_at(n, t, off, -6, 6), labels = pnew((size_t)rows * 4);
    for (int i = 0; i < rows; i++)
        ((int32_t *)labels.c)[i] = i % 5 == 4 ? FG_IGNORED_LABEL : (i * 13) % classes;
    pmirror(labels);
    pair sums = pnew(8), dl = out_at(n, t, off);
    float zero[2] = { 0.0f, 0.0f };
    pput(sums, zero);
    const char *what = W("classifier %d x %d (ld %d) +%zu %s", rows, classes, ld, off, tn);
    BOTH(what, V->classifier(S, Q, t, X(logits), ld, X(labels), rows, classes, X(sums),
                             (float *)X(sums) + 1, 0.125f, X(dl), E));
    compare(what, dl, n, t, tol_of(t));
    compare(W("classifier %d x %d (ld %d) +%zu %s (loss, hits)", rows, classes, ld, off, tn),
            sums, 2, FG_F32, 1e-5);
    if (ld == classes) {
        pair probs = out_at(n, FG_F32, 0), two = pnew(8);
        pput(two, zero);
        what = W("softmax_xent_forward %d x %d +%zu %s", rows, classes, off, tn);
        BOTH(what, V->softmax_xent_forward(S, Q, t, X(logits), X(labels), rows, classes,
                                           X(probs), X(two), (float *)X(two) + 1, E));
        compare(what, probs, n, FG_F32, 1e-5);
        compare(W("softmax_xent_forward %d x %d +%zu %s (loss, hits)", rows, classes, off, tn),
                two, 2, FG_F32, 1e-5);
    }
    release_all();
}

void test_vec(void)
{
    static const int ln_shapes[][2] = { { 1, 1 }, { 3, 7 }, { 5, 33 }, { 7, 769 }, { 65, 64 },
                                        { 3, 3100 } };
    static const int emb_dims[] = { 1, 7, 33, 64, 769 };
    for (int ti = 0; ti < VEC_TYPES; ti++) {
        uint32_t t = vec_types[ti];
        for (size_t off = 0; off < 2; off++) {
            for (size_t s = 0; s < sizeof flat_n / sizeof flat_n[0]; s++)
                vec_flat(t, flat_n[s], off);
            for (size_t s = 0; s < sizeof ln_shapes / sizeof ln_shapes[0]; s++)
                vec_layernorm(t, ln_shapes[s][0], ln_shapes[s][1], (int)(s % 2), off);
            for (size_t s = 0; s < sizeof emb_dims / sizeof emb_dims[0]; s++)
                vec_embedding(t, 13, emb_dims[s], off);
            vec_classifier(t, 9, 1000, 1000, off);
            vec_classifier(t, 9, 37, 37, off);
            vec_classifier(t, 7, 1000, 1024, off);
            vec_classifier(t, 7, 1001, 1008, off);
        }
    }
}
