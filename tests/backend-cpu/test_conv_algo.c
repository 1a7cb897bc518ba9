/* [backend] conv_algorithm: validated; oneDNN's convolutions (when the plugin has them)
 * against im2col + gemm on random shapes, f32 and bf16; the fixed choice honoured and
 * logged; auto's timed choice logged; oneDNN's results the same bit for bit with 1 and 2
 * threads. Without oneDNN, `onednn` is refused with a message saying so. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* f32 oneDNN against f32 im2col: |a - b| <= F32_TOL * max(1, |b|). Both sum the same
 * products in different orders; inputs are uniform in [-1, 1], sums of up to ~2000 terms. */
#define F32_TOL 1e-4
/* bf16 storage: both round an f32 sum once; different summation orders may round to
 * neighbouring bf16 values (2^-8 relative apart), and inputs were rounded the same way. */
#define BF16_TOL 1.6e-2

static int random_int(int lo, int hi)
{
    return lo + (int)floor(test_uniform(0, 1) * (hi - lo + 1 - 1e-9));
}

static fg_conv2d_desc random_desc(void)
{
    for (;;) {
        fg_conv2d_desc d = { sizeof d, random_int(1, 9), random_int(1, 8), random_int(3, 15),
                             random_int(3, 15), random_int(1, 9), random_int(1, 4),
                             random_int(1, 4), random_int(0, 2), random_int(0, 2),
                             random_int(1, 3), random_int(1, 3), 0, 0, FG_LAYOUT_NCHW };
        int eh = d.h + 2 * d.pad_h - d.r, ew = d.w + 2 * d.pad_w - d.s;
        if (eh < 0 || ew < 0 || d.pad_h >= d.r || d.pad_w >= d.s)
            continue;
        d.out_h = eh / d.stride_h + 1;
        d.out_w = ew / d.stride_w + 1;
        return d;
    }
}

/* One conv's tensors, in f32 (and their bf16 copies). */
typedef struct conv_io {
    size_t xs, ws, ys;
    float *x, *w, *b, *dy;
    float *y, *dx, *dw, *db;
} conv_io;

static void io_make(conv_io *io, const fg_conv2d_desc *d)
{
    io->xs = (size_t)d->n * d->c * d->h * d->w;
    io->ws = (size_t)d->k * d->c * d->r * d->s;
    io->ys = (size_t)d->n * d->k * d->out_h * d->out_w;
    io->x = test_alloc(io->xs * 4);
    io->w = test_alloc(io->ws * 4);
    io->b = test_alloc((size_t)d->k * 4);
    io->dy = test_alloc(io->ys * 4);
    test_fill_uniform(io->x, io->xs, -1, 1);
    test_fill_uniform(io->w, io->ws, -1, 1);
    test_fill_uniform(io->b, (size_t)d->k, -1, 1);
    test_fill_uniform(io->dy, io->ys, -1, 1);
}

static void io_free(conv_io *io)
{
    free(io->x); free(io->w); free(io->b); free(io->dy);
}

/* Outputs of one backend: y, then dx (unless NULL), dw and db, then dw and db again with
 * accumulate. */
typedef struct conv_out {
    float *y, *dx, *dw, *db, *dw2, *db2;
} conv_out;

static void out_free(conv_out *o)
{
    free(o->y); free(o->dx); free(o->dw); free(o->db); free(o->dw2); free(o->db2);
}

static void run_f32(test_backend *tb, const fg_conv2d_desc *d, const conv_io *io, int bias,
                    int with_dx, conv_out *o)
{
    void *work = test_alloc(tb->vt->conv2d_workspace(tb->state, d));
    o->y = test_alloc(io->ys * 4);
    o->dx = with_dx ? test_alloc(io->xs * 4) : NULL;
    o->dw = test_alloc(io->ws * 4);
    o->db = test_alloc((size_t)d->k * 4);
    o->dw2 = test_alloc(io->ws * 4);
    o->db2 = test_alloc((size_t)d->k * 4);
    CHECK_OK(tb->vt->conv2d_forward(tb->state, tb->queue, FG_F32, FG_F32, d, io->x, io->w,
                                    bias ? io->b : NULL, o->y, work, &test_err));
    CHECK_OK(tb->vt->conv2d_backward(tb->state, tb->queue, FG_F32, FG_F32, FG_F32, d, io->x,
                                     io->w, io->dy, o->dx, o->dw, o->db, 0, work, &test_err));
    memcpy(o->dw2, o->dw, io->ws * 4);
    memcpy(o->db2, o->db, (size_t)d->k * 4);
    CHECK_OK(tb->vt->conv2d_backward(tb->state, tb->queue, FG_F32, FG_F32, FG_F32, d, io->x,
                                     io->w, io->dy, NULL, o->dw2, o->db2, 1, work, &test_err));
    free(work);
}

static int compare(const char *what, const float *got, const float *want, size_t n, double tol)
{
    int misses = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (!(fabs(g - w) <= tol * fmax(1.0, fabs(w)))) {
            if (misses++ < 3)
                fprintf(stderr, "%s[%zu]: onednn %.9g, im2col %.9g\n", what, i, g, w);
        }
    }
    CHECK(misses == 0, "%s: %d of %zu elements differ beyond %g", what, misses, n, tol);
    return misses;
}

static int differs(const float *a, const float *b, size_t n)
{
    return a && b && memcmp(a, b, n * 4) != 0;
}

/* oneDNN against im2col on random shapes; returns how many cases differed in some bit
 * (proof that another algorithm ran). */
static int test_random_f32(test_backend *dnnl, test_backend *im2col)
{
    int bitwise_different = 0;
    test_seed(1234);
    for (int i = 0; i < 40; i++) {
        fg_conv2d_desc d = random_desc();
        int bias = i % 2, with_dx = i % 3 != 0;
        conv_io io;
        io_make(&io, &d);
        conv_out a, b;
        run_f32(dnnl, &d, &io, bias, with_dx, &a);
        run_f32(im2col, &d, &io, bias, with_dx, &b);
        char what[160];
        snprintf(what, sizeof what, "n%d c%d %dx%d k%d %dx%d pad %d,%d stride %d,%d%s%s", d.n,
                 d.c, d.h, d.w, d.k, d.r, d.s, d.pad_h, d.pad_w, d.stride_h, d.stride_w,
                 bias ? " bias" : "", with_dx ? "" : " dx NULL");
        char part[200];
        snprintf(part, sizeof part, "%s y", what);
        compare(part, a.y, b.y, io.ys, F32_TOL);
        if (with_dx) {
            snprintf(part, sizeof part, "%s dx", what);
            compare(part, a.dx, b.dx, io.xs, F32_TOL);
        }
        snprintf(part, sizeof part, "%s dw", what);
        compare(part, a.dw, b.dw, io.ws, F32_TOL);
        snprintf(part, sizeof part, "%s db", what);
        compare(part, a.db, b.db, (size_t)d.k, F32_TOL);
        snprintf(part, sizeof part, "%s dw accumulated", what);
        compare(part, a.dw2, b.dw2, io.ws, F32_TOL);
        snprintf(part, sizeof part, "%s db accumulated", what);
        compare(part, a.db2, b.db2, (size_t)d.k, F32_TOL);
        bitwise_different += differs(a.y, b.y, io.ys) || differs(a.dx, b.dx, io.xs) ||
                             differs(a.dw, b.dw, io.ws);
        out_free(&a);
        out_free(&b);
        io_free(&io);
    }
    return bitwise_different;
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t *bf16_copy(const float *f, size_t n)
{
    uint16_t *h = test_alloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++)
        h[i] = to_bf16(f[i]);
    return h;
}

static float *f32_copy(const uint16_t *h, size_t n)
{
    float *f = test_alloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++)
        f[i] = from_bf16(h[i]);
    return f;
}

/* bf16 activations and weights, f32 gradients (bf16-mixed's default) */
static void run_bf16(test_backend *tb, const fg_conv2d_desc *d, const conv_io *io, conv_out *o)
{
    void *work = test_alloc(tb->vt->conv2d_workspace(tb->state, d));
    uint16_t *x = bf16_copy(io->x, io->xs), *w = bf16_copy(io->w, io->ws);
    uint16_t *b = bf16_copy(io->b, (size_t)d->k), *dy = bf16_copy(io->dy, io->ys);
    uint16_t *y = test_alloc(io->ys * 2 + 2), *dx = test_alloc(io->xs * 2 + 2);
    memset(o, 0, sizeof *o);
    o->dw = test_alloc(io->ws * 4);
    o->db = test_alloc((size_t)d->k * 4);
    CHECK_OK(tb->vt->conv2d_forward(tb->state, tb->queue, FG_BF16, FG_BF16, d, x, w, b, y, work,
                                    &test_err));
    CHECK_OK(tb->vt->conv2d_backward(tb->state, tb->queue, FG_BF16, FG_BF16, FG_F32, d, x, w, dy,
                                     dx, o->dw, o->db, 0, work, &test_err));
    o->y = f32_copy(y, io->ys);
    o->dx = f32_copy(dx, io->xs);
    free(x); free(w); free(b); free(dy); free(y); free(dx); free(work);
}

static void test_random_bf16(test_backend *dnnl, test_backend *im2col)
{
    test_seed(99);
    for (int i = 0; i < 12; i++) {
        fg_conv2d_desc d = random_desc();
        conv_io io;
        io_make(&io, &d);
        conv_out a, b;
        run_bf16(dnnl, &d, &io, &a);
        run_bf16(im2col, &d, &io, &b);
        compare("bf16 y", a.y, b.y, io.ys, BF16_TOL);
        compare("bf16 dx", a.dx, b.dx, io.xs, BF16_TOL);
        compare("bf16 dw (f32)", a.dw, b.dw, io.ws, F32_TOL);
        compare("bf16 db (f32)", a.db, b.db, (size_t)d.k, F32_TOL);
        out_free(&a);
        out_free(&b);
        io_free(&io);
    }
}

/* oneDNN's pieces are fixed by the batch: threads = 1 and 2 give the same bits. */
static void test_threads(void)
{
    fg_conv2d_desc d = { sizeof d, 37, 8, 13, 13, 16, 3, 3, 1, 1, 1, 1, 13, 13, FG_LAYOUT_NCHW };
    conv_io io;
    test_seed(5);
    io_make(&io, &d);
    conv_out o[2];
    for (int t = 0; t < 2; t++) {
        test_backend tb;
        test_backend_open_with(&tb, 1, t + 1, 0, "conv_algorithm = onednn");
        run_f32(&tb, &d, &io, 1, 1, &o[t]);
        test_backend_close(&tb);
    }
    CHECK(!differs(o[0].y, o[1].y, io.ys), "onednn y differs between threads = 1 and 2");
    CHECK(!differs(o[0].dx, o[1].dx, io.xs), "onednn dx differs between threads = 1 and 2");
    CHECK(!differs(o[0].dw, o[1].dw, io.ws), "onednn dw differs between threads = 1 and 2");
    CHECK(!differs(o[0].db, o[1].db, (size_t)d.k), "onednn db differs between threads = 1 and 2");
    out_free(&o[0]);
    out_free(&o[1]);
    io_free(&io);
}

/* A model sizes the workspace once at its largest batch and runs a smaller last batch in
 * it: oneDNN's pieces for the smaller batch fit, and agree with im2col. */
static void test_smaller_batch(test_backend *dnnl, test_backend *im2col)
{
    fg_conv2d_desc big = { sizeof big, 29, 6, 11, 11, 12, 3, 3, 1, 1, 1, 1, 11, 11,
                           FG_LAYOUT_NCHW };
    fg_conv2d_desc small = big;
    small.n = 11;
    conv_io io;
    test_seed(8);
    io_make(&io, &big);
    io.xs = (size_t)small.n * small.c * small.h * small.w;
    io.ys = (size_t)small.n * small.k * small.out_h * small.out_w;
    conv_out o[2];
    test_backend *tbs[2] = { dnnl, im2col };
    for (int t = 0; t < 2; t++) {
        test_backend *tb = tbs[t];
        size_t bytes = tb->vt->conv2d_workspace(tb->state, &big);
        char *work = test_alloc(bytes + 64);
        memset(work + bytes, 0x5a, 64); /* a guard: nothing is written past the workspace */
        o[t].y = test_alloc(io.ys * 4);
        o[t].dx = test_alloc(io.xs * 4);
        o[t].dw = test_alloc(io.ws * 4);
        o[t].db = test_alloc((size_t)small.k * 4);
        o[t].dw2 = o[t].db2 = NULL;
        CHECK_OK(tb->vt->conv2d_forward(tb->state, tb->queue, FG_F32, FG_F32, &small, io.x, io.w,
                                        io.b, o[t].y, work, &test_err));
        CHECK_OK(tb->vt->conv2d_backward(tb->state, tb->queue, FG_F32, FG_F32, FG_F32, &small,
                                         io.x, io.w, io.dy, o[t].dx, o[t].dw, o[t].db, 0, work,
                                         &test_err));
        for (int i = 0; i < 64; i++)
            CHECK(work[bytes + i] == 0x5a, "byte %d past the workspace was written", i);
        free(work);
    }
    compare("smaller batch y", o[0].y, o[1].y, io.ys, F32_TOL);
    compare("smaller batch dx", o[0].dx, o[1].dx, io.xs, F32_TOL);
    compare("smaller batch dw", o[0].dw, o[1].dw, io.ws, F32_TOL);
    compare("smaller batch db", o[0].db, o[1].db, (size_t)small.k, F32_TOL);
    out_free(&o[0]);
    out_free(&o[1]);
    io_free(&io);
}

/* A workspace conv2d_workspace never sized for oneDNN (the caller asked another backend):
 * conv_algorithm = onednn runs im2col there, bit for bit, and warns once saying why. */
static void test_unsized_workspace(test_backend *im2col)
{
    test_backend tb;
    test_backend_open_with(&tb, 1, 2, 0, "conv_algorithm = onednn");
    fg_conv2d_desc d = { sizeof d, 6, 3, 10, 10, 5, 3, 3, 0, 0, 1, 1, 8, 8, FG_LAYOUT_NCHW };
    conv_io io;
    test_seed(10);
    io_make(&io, &d);
    void *work = test_alloc(im2col->vt->conv2d_workspace(im2col->state, &d));
    float *a = test_alloc(io.ys * 4), *b = test_alloc(io.ys * 4);
    for (int i = 0; i < 2; i++)
        CHECK_OK(tb.vt->conv2d_forward(tb.state, tb.queue, FG_F32, FG_F32, &d, io.x, io.w, io.b,
                                       a, work, &test_err));
    CHECK_OK(im2col->vt->conv2d_forward(im2col->state, im2col->queue, FG_F32, FG_F32, &d, io.x,
                                        io.w, io.b, b, work, &test_err));
    CHECK(!differs(a, b, io.ys), "the fallback is not im2col's result");
    const char *warn = strstr(tb.host.log, "runs im2col although conv_algorithm = onednn: its "
                                           "workspace is larger");
    CHECK(warn && !strstr(warn + 1, "runs im2col although"),
          "no single warning for the unsized workspace: %s", tb.host.log);
    free(a); free(b); free(work);
    io_free(&io);
    test_backend_close(&tb);
}

/* auto times both at the first call of a shape and logs the choice with the times. */
static void test_auto_logs(void)
{
    test_backend tb;
    test_backend_open_with(&tb, 1, 2, 0, "conv_algorithm = auto");
    fg_conv2d_desc d = { sizeof d, 8, 4, 12, 12, 8, 3, 3, 1, 1, 1, 1, 12, 12, FG_LAYOUT_NCHW };
    conv_io io;
    test_seed(6);
    io_make(&io, &d);
    conv_out o;
    run_f32(&tb, &d, &io, 1, 1, &o);
    const char *log = tb.host.log;
    CHECK(strstr(log, "conv2d n8 c4 12x12 -> k8 3x3 stride 1,1 pad 1,1 f32 forward: ") &&
              strstr(log, "(timed: onednn "),
          "auto did not log its forward choice: %s", log);
    CHECK(strstr(log, "f32 backward: ") != NULL, "auto did not log its backward choice: %s", log);
    out_free(&o);
    io_free(&io);
    test_backend_close(&tb);
}

void test_group_conv_algo(void)
{
    test_backend tb;
    fg_status st = test_backend_try_open_with(&tb, 1, 2, 0, "conv_algorithm = fastest");
    CHECK(st == FG_INVALID_ARGUMENT && strstr(test_err.message, "conv_algorithm") &&
              strstr(test_err.message, "fastest"),
          "a bad conv_algorithm: status %d, %s", (int)st, test_err.message);
    if (st == FG_OK)
        test_backend_close(&tb);

    st = test_backend_try_open_with(&tb, 1, 2, 0, "conv_algorithm = onednn");
    if (st != FG_OK) {
        CHECK(st == FG_UNAVAILABLE && strstr(test_err.message, "without oneDNN") &&
                  strstr(test_err.message, "conv_algorithm"),
              "onednn refused unclearly: status %d, %s", (int)st, test_err.message);
        printf("conv_algo: this plugin has no oneDNN; onednn refused as it should be\n");
        return;
    }
    CHECK_OK(tb.vt->queue_create(tb.state, 0, &tb.queue, &test_err));
    test_backend im2col;
    test_backend_open_with(&im2col, 1, 2, 0, "conv_algorithm = im2col");
    int different = test_random_f32(&tb, &im2col);
    CHECK(different > 0, "oneDNN and im2col agreed bit for bit on every shape: did oneDNN run?");
    CHECK(strstr(tb.host.log, "forward: onednn (conv_algorithm = onednn") != NULL,
          "the fixed choice was not logged: %s", tb.host.log);
    /* a conv choice names the layer ("conv2d n6 c3 ..."); im2col's own gemms are logged as
     * "conv2d_forward m7 n24 k72 ...", the gemm library's choice */
    CHECK(strstr(im2col.host.log, "conv2d n") == NULL, "im2col logged a conv choice: %s",
          im2col.host.log);
    if (strstr(tb.host.log, "runs im2col although conv_algorithm = onednn"))
        printf("conv_algo: some shapes fell back to im2col (see the log)\n");
    test_random_bf16(&tb, &im2col);
    test_smaller_batch(&tb, &im2col);
    test_unsized_workspace(&im2col);
    test_backend_close(&im2col);
    test_backend_close(&tb);
    test_threads();
    test_auto_logs();
}
