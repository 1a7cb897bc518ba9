/* Parity groups over flat buffers: devices and memory, elementwise helpers, casts, gemm
 * and the fused optimizer updates. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

/* A copy queue and events, as the core's batch copier uses them: the copy on the copy
 * queue, the compute queue waits for its event on the device, the host for the event; ops
 * refuse the copy queue. a: values (CPU side), b: a device buffer, h: page-locked memory. */
static void test_copy_queue(pair a, pair b, void *h)
{
    fg_error e = {0};
    void *cq = NULL, *ev = NULL;
    fg_status st = P.dut->copy_queue_create(P.ds, 0, &cq, &e);
    if (st == FG_OK)
        st = P.dut->event_create(P.ds, 0, &ev, &e);
    memcpy(h, a.c, 4000);
    ppoison(b);
    if (st == FG_OK)
        st = P.dut->copy(P.ds, cq, b.g, 0, h, -1, 4000, &e);
    if (st == FG_OK)
        st = P.dut->event_record(P.ds, cq, ev, &e);
    if (st == FG_OK)
        st = P.dut->queue_wait_event(P.ds, P.dq, ev, &e);
    if (st == FG_OK)
        st = P.dut->event_sync(P.ds, ev, &e);
    memset(h, 0, 4000); /* the event completed: the buffer is the caller's again */
    checks++;
    if (st != FG_OK)
        fail("copy on a copy queue, fenced by an event: %s", e.message);
    compare_exact("copy on a copy queue, fenced by an event", b, 4000);
    if (cq) {
        st = P.dut->fill(P.ds, cq, FG_F32, b.g, 0.0f, 1, &e);
        checks++;
        if (st != FG_INVALID_ARGUMENT || !strstr(e.message, "copy queue"))
            fail("an op on a copy queue: %s: %s", fg_status_name(st), e.message);
    }
    P.dut->event_destroy(P.ds, ev);
    if (cq)
        P.dut->queue_destroy(P.ds, cq);
}

void test_device(void)
{
    fg_error e = {0};
    int count = 0;
    fg_status st = P.dut->device_count(P.ds, &count, &e);
    checks++;
    if (st != FG_OK || count < 1)
        fail("device_count: %s, count %d", e.message, count);
    fg_device_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    st = P.dut->device_info(P.ds, 0, &info, &e);
    checks++;
    if (st != FG_OK || !info.name[0] || info.total_memory == 0)
        fail("device_info: %s, name '%s', total %llu", e.message, info.name,
             (unsigned long long)info.total_memory);
    else
        printf("device 0: %s, %.1f GiB, %.1f GiB free\n", info.name,
               (double)info.total_memory / 1073741824.0, (double)info.free_memory / 1073741824.0);
    /* out of memory names the bytes and what to change */
    void *p = NULL;
    st = P.dut->alloc(P.ds, 0, (size_t)1 << 52, &p, &e);
    checks++;
    if (st != FG_OUT_OF_MEMORY || !strstr(e.message, "4503599627370496 bytes") ||
        !strstr(e.message, "batch_size"))
        fail("alloc of 2^52 bytes: %s: %s", fg_status_name(st), e.message);
    /* the device still works after a refused allocation: a copy round trip */
    pair a = prandom(1000, FG_F32, -1, 1), b = pnew(4000);
    ppoison(b);
    st = P.dut->copy(P.ds, P.dq, b.g, 0, a.g, 0, 4000, &e);
    memcpy(b.c, a.c, 4000);
    checks++;
    if (st != FG_OK)
        fail("copy device to device: %s", e.message);
    compare_exact("copy device to device", b, 4000);
    /* the refused allocation's error is not reported against the next op's launch */
    st = P.dut->fill(P.ds, P.dq, FG_F32, b.g, 0.5f, 1000, &e);
    checks++;
    if (st != FG_OK)
        fail("fill after a refused allocation (a CUDA error left pending?): %s", e.message);
    /* page-locked staging, used for a host-to-device copy */
    void *h = NULL;
    st = P.dut->host_alloc(P.ds, 1 << 20, &h, &e);
    checks++;
    if (st != FG_OK || !h) {
        fail("host_alloc: %s", e.message);
        return;
    }
    memcpy(h, a.c, 4000);
    ppoison(b);
    st = P.dut->copy(P.ds, P.dq, b.g, 0, h, -1, 4000, &e);
    /* asynchronous: the buffer is the caller's again once the queue is synchronised */
    if (st == FG_OK)
        st = P.dut->queue_sync(P.ds, P.dq, &e);
    memset(h, 0, 4000);
    checks++;
    if (st != FG_OK)
        fail("copy from page-locked memory: %s", e.message);
    compare_exact("copy from page-locked memory", b, 4000);
    if (FG_BACKEND_HAS_EVENTS(P.dut) && P.dut->copy_queue_create)
        test_copy_queue(a, b, h);
    P.dut->host_free(P.ds, h);
}

static const size_t flat_sizes[] = { 1, 17, 1000, (1u << 20) + 3 };

void test_flat(void)
{
    for (size_t si = 0; si < sizeof flat_sizes / sizeof flat_sizes[0]; si++) {
        size_t n = flat_sizes[si];
        pair x = pnew(n * 4);
        ppoison(x);
        BOTH(W("fill n=%zu", n), V->fill(S, Q, FG_F32, X(x), 0.25f, n, E));
        compare(W("fill n=%zu", n), x, n, FG_F32, 0);

        x = prandom(n, FG_F32, -2, 2);
        BOTH(W("scale n=%zu", n), V->scale(S, Q, FG_F32, X(x), -1.5f, n, E));
        compare(W("scale n=%zu", n), x, n, FG_F32, 0);

        pair y = prandom(n, FG_F32, -2, 2);
        BOTH(W("axpy n=%zu", n), V->axpy(S, Q, FG_F32, FG_F32, 0.3f, X(x), X(y), n, E));
        compare(W("axpy n=%zu", n), y, n, FG_F32, 0);

        ((float *)y.c)[0] = NAN; /* NaN stays NaN */
        pmirror(y);
        BOTH(W("clamp n=%zu", n), V->clamp(S, Q, FG_F32, X(y), -0.5f, 0.75f, n, E));
        compare(W("clamp n=%zu", n), y, n, FG_F32, 0);

        pair out = pnew(4);
        ppoison(out);
        BOTH(W("sum_squares n=%zu", n), V->sum_squares(S, Q, FG_F32, X(x), n, X(out), E));
        compare(W("sum_squares n=%zu", n), out, 1, FG_F32, 1e-6);
    }
    pair out = pnew(4), x = prandom(4, FG_F32, -1, 1);
    ppoison(out);
    BOTH("sum_squares n=0", V->sum_squares(S, Q, FG_F32, X(x), 0, X(out), E));
    compare("sum_squares n=0", out, 1, FG_F32, 0);
    /* fixed-order reductions: the same bits twice */
    x = prandom((3u << 20) + 5, FG_F32, -1, 1);
    pair r1 = pnew(4), r2 = pnew(4);
    fg_error e = {0};
    P.dut->sum_squares(P.ds, P.dq, FG_F32, x.g, (3u << 20) + 5, r1.g, &e);
    P.dut->sum_squares(P.ds, P.dq, FG_F32, x.g, (3u << 20) + 5, r2.g, &e);
    download(r1, r2.c); /* the first result where the second is compared */
    compare_exact("sum_squares twice gives the same bits", r2, 4);
    release_all();
}

void test_cast(void)
{
    static const float specials[] = { 0.0f, -0.0f, 1.0f, -2.5f, 1e-8f, 6.0e-5f, 3.0e-7f,
                                      65504.0f, 65519.0f, 65520.0f, 1e30f, -1e30f, 3.4e38f,
                                      INFINITY, -INFINITY, NAN, 1.00390625f, 1.01171875f,
                                      0.333333343f, 1e-40f };
    size_t ns = sizeof specials / sizeof specials[0], n = 4099;
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = i < ns ? specials[i] : (float)rng_uniform(-1e3, 1e3);
    static const uint32_t types[] = { FG_F32, FG_F16, FG_BF16 };
    for (int s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) {
            pair src = pnew(n * dtype_size(types[s]));
            /* the source: the f32 values rounded by the CPU cast, mirrored */
            pair f = pnew(n * 4);
            pput(f, v);
            fg_error e = {0};
            P.ref->cast(P.rs, P.rq, types[s], FG_F32, src.c, f.c, n, &e);
            pmirror(src);
            pair dst = pnew(n * dtype_size(types[d]));
            ppoison(dst);
            const char *what = W("cast %s -> %s", fg_dtype_name((fg_dtype)types[s]),
                                 fg_dtype_name((fg_dtype)types[d]));
            BOTH(what, V->cast(S, Q, types[d], types[s], X(dst), X(src), n, E));
            compare(what, dst, n, types[d], 0);
        }
    free(v);
    fg_error e = {0};
    pair a = pnew(8);
    checks++;
    if (P.dut->cast(P.ds, P.dq, FG_F64, FG_F32, a.g, a.g, 1, &e) != FG_UNAVAILABLE)
        fail("cast to f64 must answer unavailable: %s", e.message);
    release_all();
}

/* ---- gemm ------------------------------------------------------------------------------ */

static const int gemm_shapes[][3] = { { 1, 1, 1 },     { 7, 13, 5 },     { 64, 10, 784 },
                                      { 33, 65, 129 }, { 128, 256, 784 } };

/* C's data region on the tested side poisoned, the gaps of a wider ldc kept. */
static void poison_matrix(pair c, int rows, int cols, int ld, size_t elem)
{
    unsigned char *h = malloc(c.bytes);
    memcpy(h, c.c, c.bytes);
    for (int r = 0; r < rows; r++)
        memset(h + (size_t)r * (size_t)ld * elem, 0xFF, (size_t)cols * elem);
    pair g = c;
    g.c = h;
    pmirror(g);
    free(h);
}

static void gemm_case(int m, int n, int k, int ta, int tb, float alpha, float beta, int pad,
                      uint32_t at, uint32_t bt, uint32_t ct)
{
    int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
    int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
    pair a = prandom((size_t)a_rows * (size_t)lda, at, -1, 1);
    pair b = prandom((size_t)b_rows * (size_t)ldb, bt, -1, 1);
    pair c = prandom((size_t)m * (size_t)ldc, ct, -1, 1);
    if (beta == 0.0f)
        poison_matrix(c, m, n, ldc, dtype_size(ct));
    const char *what = W("gemm m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g pad=%d %s.%s->%s", m, n,
                         k, ta, tb, (double)alpha, (double)beta, pad, fg_dtype_name((fg_dtype)at),
                         fg_dtype_name((fg_dtype)bt), fg_dtype_name((fg_dtype)ct));
    BOTH(what, V->gemm(S, Q, at, bt, ct, ta, tb, m, n, k, alpha, X(a), lda, X(b), ldb, beta, X(c),
                       ldc, E));
    double tol = tol_of(at) > tol_of(bt) ? tol_of(at) : tol_of(bt);
    if (tol_of(ct) > tol)
        tol = tol_of(ct);
    compare(what, c, (size_t)m * (size_t)ldc, ct, tol);
}

void test_gemm(void)
{
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int ab = 0; ab < 2; ab++)
                for (int pad = 0; pad <= 3; pad += 3) {
                    gemm_case(gemm_shapes[s][0], gemm_shapes[s][1], gemm_shapes[s][2], t & 1,
                              t >> 1, ab ? 0.5f : 1.0f, ab ? 0.75f : 0.0f, pad, FG_F32, FG_F32,
                              FG_F32);
                    release_all();
                }
    static const uint32_t mixes[][3] = { { FG_BF16, FG_BF16, FG_BF16 }, { FG_BF16, FG_BF16, FG_F32 },
                                         { FG_F16, FG_F16, FG_F16 },    { FG_F16, FG_F16, FG_F32 },
                                         { FG_F32, FG_BF16, FG_F32 },   { FG_F32, FG_F32, FG_BF16 },
                                         { FG_F32, FG_F32, FG_F32 } };
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++)
        for (size_t x = 0; x < sizeof mixes / sizeof mixes[0]; x++)
            for (int t = 0; t < 4; t++) {
                int ab = (int)((s + x + (size_t)t) & 1);
                gemm_case(gemm_shapes[s][0], gemm_shapes[s][1], gemm_shapes[s][2], t & 1,
                          t >> 1, ab ? 0.5f : 1.0f, ab ? 0.75f : 0.0f, x == 6 ? 1 : 0,
                          mixes[x][0], mixes[x][1], mixes[x][2]);
                release_all();
            }
    /* k = 0: C = beta C */
    pair a = prandom(4, FG_F32, -1, 1), c = prandom(12, FG_F32, -1, 1);
    BOTH("gemm k=0", V->gemm(S, Q, FG_F32, FG_F32, FG_F32, 0, 0, 3, 4, 0, 1.0f, X(a), 1, X(a), 4,
                             0.5f, X(c), 4, E));
    compare("gemm k=0", c, 12, FG_F32, 0);
    /* the same bits twice (the algorithm is picked once per shape) */
    pair ga = prandom(64 * 96, FG_F32, -1, 1), gb = prandom(96 * 80, FG_F32, -1, 1);
    pair c1 = pnew(64 * 80 * 4), c2 = pnew(64 * 80 * 4);
    fg_error e = {0};
    P.dut->gemm(P.ds, P.dq, FG_F32, FG_F32, FG_F32, 0, 0, 64, 80, 96, 1.0f, ga.g, 96, gb.g, 80,
                0.0f, c1.g, 80, &e);
    P.dut->gemm(P.ds, P.dq, FG_F32, FG_F32, FG_F32, 0, 0, 64, 80, 96, 1.0f, ga.g, 96, gb.g, 80,
                0.0f, c2.g, 80, &e);
    download(c1, c2.c);
    compare_exact("gemm twice gives the same bits", c2, 64 * 80 * 4);
    release_all();
}

/* gemm_bias (ABI 1.2): the bias in the product's f32 epilogue, one rounding into C */
static void gemm_bias_case(int m, int n, int k, int ta, int tb, int pad, int with_bias,
                           uint32_t at, uint32_t bt, uint32_t ct)
{
    int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
    int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
    pair a = prandom((size_t)a_rows * (size_t)lda, at, -1, 1);
    pair b = prandom((size_t)b_rows * (size_t)ldb, bt, -1, 1);
    pair bias = prandom((size_t)n, bt, -2, 2);
    pair c = prandom((size_t)m * (size_t)ldc, ct, -1, 1);
    poison_matrix(c, m, n, ldc, dtype_size(ct));
    const char *what = W("gemm_bias m=%d n=%d k=%d ta=%d tb=%d pad=%d bias=%d %s.%s->%s", m, n,
                         k, ta, tb, pad, with_bias, fg_dtype_name((fg_dtype)at),
                         fg_dtype_name((fg_dtype)bt), fg_dtype_name((fg_dtype)ct));
    BOTH(what, V->gemm_bias(S, Q, at, bt, ct, ta, tb, m, n, k, X(a), lda, X(b), ldb,
                            XN(with_bias, bias), X(c), ldc, E));
    double tol = tol_of(at) > tol_of(bt) ? tol_of(at) : tol_of(bt);
    if (tol_of(ct) > tol)
        tol = tol_of(ct);
    compare(what, c, (size_t)m * (size_t)ldc, ct, tol);
}

void test_gemm_bias(void)
{
    static const uint32_t mixes[][3] = { { FG_F32, FG_F32, FG_F32 },   { FG_BF16, FG_BF16, FG_BF16 },
                                         { FG_F16, FG_F16, FG_F16 },   { FG_BF16, FG_BF16, FG_F32 },
                                         { FG_F32, FG_BF16, FG_F32 } };
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++)
        for (size_t x = 0; x < sizeof mixes / sizeof mixes[0]; x++)
            for (int t = 0; t < 4; t++) {
                gemm_bias_case(gemm_shapes[s][0], gemm_shapes[s][1], gemm_shapes[s][2], t & 1,
                               t >> 1, (int)((s + (size_t)t) % 2) * 3, t != 3, mixes[x][0],
                               mixes[x][1], mixes[x][2]);
                release_all();
            }
    /* k = 0: C is the bias on every row */
    pair a = prandom(4, FG_F32, -1, 1), bias = prandom(4, FG_F32, -1, 1);
    pair c = prandom(12, FG_F32, -1, 1);
    BOTH("gemm_bias k=0", V->gemm_bias(S, Q, FG_F32, FG_F32, FG_F32, 0, 0, 3, 4, 0, X(a), 1, X(a),
                                       4, X(bias), X(c), 4, E));
    compare("gemm_bias k=0", c, 12, FG_F32, 0);
    release_all();
}

/* ---- optimizers -------------------------------------------------------------------------- */

static const size_t optim_sizes[] = { 1, 1000, 262147 };

void test_optim(void)
{
    static const fg_sgd_args sgd[] = {
        { sizeof(fg_sgd_args), 0.1f, 0.0f, 0.0f, 0.0f, 0, 0, NULL, NULL },
        { sizeof(fg_sgd_args), 0.05f, 0.9f, 0.0f, 0.01f, 0, 1, NULL, NULL },
        { sizeof(fg_sgd_args), 0.05f, 0.9f, 0.1f, 0.01f, 0, 0, NULL, NULL },
        { sizeof(fg_sgd_args), 0.05f, 0.9f, 0.0f, 0.0f, 1, 0, NULL, NULL },
        { sizeof(fg_sgd_args), 0.05f, 0.9f, 0.0f, 0.001f, 1, 1, NULL, NULL },
    };
    for (size_t si = 0; si < sizeof optim_sizes / sizeof optim_sizes[0]; si++) {
        size_t n = optim_sizes[si];
        for (size_t i = 0; i < sizeof sgd / sizeof sgd[0]; i++) {
            pair p = prandom(n, FG_F32, -1, 1), g = prandom(n, FG_F32, -1, 1);
            pair b = prandom(n, FG_F32, -1, 1);
            const char *what = W("sgd case %zu n=%zu", i, n);
            BOTH(what, V->sgd_update(S, Q, FG_F32, FG_F32, &sgd[i], X(p), X(g), X(b), n, E));
            compare(what, p, n, FG_F32, 1e-6);
            if (sgd[i].momentum != 0.0f)
                compare(W("sgd case %zu n=%zu (momentum buffer)", i, n), b, n, FG_F32, 1e-6);
        }
        for (int64_t step = 1; step <= 10; step += 9) {
            fg_adamw_args a = { sizeof a, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step, NULL, NULL };
            pair p = prandom(n, FG_F32, -1, 1), g = prandom(n, FG_F32, -1, 1);
            pair m = prandom(n, FG_F32, -0.1, 0.1), v = prandom(n, FG_F32, 0, 0.01);
            const char *what = W("adamw step=%lld n=%zu", (long long)step, n);
            BOTH(what, V->adamw_update(S, Q, FG_F32, FG_F32, &a, X(p), X(g), X(m), X(v), n, E));
            compare(what, p, n, FG_F32, 1e-6);
            compare(W("adamw step=%lld n=%zu (m)", (long long)step, n), m, n, FG_F32, 1e-6);
            compare(W("adamw step=%lld n=%zu (v)", (long long)step, n), v, n, FG_F32, 1e-6);
        }
        release_all();
    }
}
