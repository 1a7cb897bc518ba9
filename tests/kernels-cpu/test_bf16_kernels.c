/* kernels/cpu's bf16-storage kernels (bf16 tensors, f32 math in stack blocks): each is
 * (1) bit for bit the backend's emulation of bf16, which widens whole tensors to f32, runs
 *     the f32 kernel and rounds back (fg_cpu_convert) — so a bf16-mixed run computes what it
 *     computed before these kernels;
 * (2) bit for bit the same on 1 and 2 threads;
 * (3) within half a bf16 ulp of the f32 kernel on the same (bf16-valued) inputs, element by
 *     element: |bf16 - f32| <= 2^-8 |f32|, bf16's unit roundoff (8 significant bits): the
 *     only error the kernels add is the output's rounding to nearest even;
 * (4) within a stated tolerance of the f32 kernel on the unrounded f32 inputs, which is what
 *     bf16 storage costs end to end: the largest error over the tensor relative to the
 *     largest |value| of the f32 result at most 2^-6 (the inputs' roundings, amplified
 *     by layer norm's cancellation where |x| / std is large — up to ~9 here — and by
 *     sigmoid's 1 - y near 1, then the output's rounding). Measured values are printed.
 * And the rounding itself: the CPU's path (AVX-512 BF16 where the CPU has it, else AVX2) and
 * the software one give fg_f32_to_bf16's bits on ties, subnormals, NaN, infinities and overflow.
 * `time` (not a ctest case: a benchmark, run by hand) times each kernel at a GPT's shapes
 * three ways, the best of many runs: f32, bf16 through the staging (whole tensors widened,
 * the f32 kernel, rounded back: what the backend ran before the _bf16 kernels) and the
 * _bf16 kernel.
 * Usage: test_bf16_kernels <case> | time [rows width] */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "cpu_kernels.h"
#include "half.h"

static uint64_t rng_state = 777;

/* The pools the kernels run on: 1 and 2 threads. */
static fg_cpu_pool *pools[2];

static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static float *random_floats(size_t n, double lo, double hi)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * uniform());
    return x;
}

static uint16_t *to_bf16(const float *x, size_t n)
{
    uint16_t *h = malloc(n * sizeof *h + 2);
    fg_cpu_convert(pools[0], h, FG_CPU_BF16, x, FG_CPU_F32, n);
    return h;
}

static float *widen(const uint16_t *h, size_t n)
{
    float *x = malloc(n * sizeof *x + 4);
    fg_cpu_convert(pools[0], x, FG_CPU_F32, h, FG_CPU_BF16, n);
    return x;
}

/* max |bf16 - ref| / max |ref| */
static double scaled_error(const uint16_t *h, const float *ref, size_t n)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)fg_bf16_to_f32(h[i]) - (double)ref[i]);
        worst = e > worst ? e : worst;
        scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    }
    return scale > 0.0 ? worst / scale : worst;
}

static double scaled_error_f32(const float *a, const float *ref, size_t n)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)ref[i]);
        worst = e > worst ? e : worst;
        scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    }
    return scale > 0.0 ? worst / scale : worst;
}

#define TOLERANCE 0x1.0p-6

/* max over n of |bf16 - ref| / |ref| (0 where both are 0): at most 2^-8 when h is ref
 * rounded to nearest even (ref normal in bf16's range) */
static double rounding_error(const uint16_t *h, const float *ref, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)fg_bf16_to_f32(h[i]) - (double)ref[i]);
        double e = d == 0.0 ? 0.0 : d / fabs((double)ref[i]);
        worst = e > worst ? e : worst;
    }
    return worst;
}

#define HALF_ULP 0x1.0p-8


static void open_pools(void)
{
    CHECK(fg_cpu_pool_create(1, &pools[0]) == 0 && fg_cpu_pool_create(2, &pools[1]) == 0,
          "pools");
    fg_cpu_pool_set_stream_grain(pools[1], 1024); /* the test's sizes split across threads */
}

static void close_pools(void)
{
    fg_cpu_pool_destroy(pools[0]);
    fg_cpu_pool_destroy(pools[1]);
}

static void same_bits(const char *what, const void *a, const void *b, size_t bytes)
{
    CHECK(memcmp(a, b, bytes) == 0, "%s differs", what);
}

/* ---- rounding -------------------------------------------------------------------------- */

/* fg_cpu_bf16_round_rows over padded rows of src's values (specials and subnormals among
 * them): each row as fg_f32_to_bf16 rounds it, the padding of dst untouched. */
static void case_round_rows(const float *src, size_t n)
{
    static const size_t widths[] = {1, 15, 16, 17, 32, 33, 64};
    enum { ROWS = 5, PAD = 3, CANARY = 0xabcd };
    uint16_t dst[ROWS * (64 + PAD)];
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        size_t cols = widths[w], ld_src = cols + 2, ld = cols + PAD;
        if (ROWS * ld_src > n)
            continue;
        for (size_t i = 0; i < ROWS * ld; i++)
            dst[i] = CANARY;
        fg_cpu_bf16_round_rows(dst, ld, src, ld_src, ROWS, cols);
        for (size_t r = 0; r < ROWS; r++)
            for (size_t c = 0; c < ld; c++) {
                uint16_t want = c < cols ? fg_f32_to_bf16(src[r * ld_src + c]) : CANARY;
                CHECK(dst[r * ld + c] == want,
                      "round_rows: %zu columns, [%zu][%zu] %04x, want %04x", cols, r, c,
                      dst[r * ld + c], want);
            }
    }
    printf("round_rows: widths 1 to 64 on padded rows equal the software rounding\n");
}

static void case_round(void)
{
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00400000u, 0x00018000u,
        0x00008000u, 0x00800000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu,
        0x7f7f8000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xff812345u,
        0x3f800000u, 0xbf7fffffu, 0x00ffffffu};
    enum { N = 1003 }; /* the specials, then random bits, a tail that is no multiple of 16 */
    float src[N];
    uint16_t want[N], soft[N], native[N], picked[N];
    size_t ns = sizeof special / sizeof special[0];
    for (size_t i = 0; i < N; i++) {
        uint32_t u = i < ns ? special[i] : (uint32_t)(uniform() * 4294967296.0);
        if (i >= ns && i % 7 == 0)
            u &= 0x807fffffu; /* subnormals among the random ones */
        memcpy(&src[i], &u, sizeof u);
        want[i] = fg_f32_to_bf16(src[i]);
    }
    CHECK(want[8] == 0x3f80 && want[9] == 0x3f82 && want[10] == 0x3f81 && want[16] == 0x7fc0,
          "fg_f32_to_bf16: ties to even, NaN quietened (%04x %04x %04x %04x)", want[8],
          want[9], want[10], want[16]);
    fg_cpu_bf16_round_software(soft, src, N);
    same_bits("the software rounding", soft, want, sizeof want);
    fg_cpu_bf16_round(picked, src, N);
    same_bits("fg_cpu_bf16_round", picked, want, sizeof want);
    int isa = fg_cpu_bf16_round_isa();
    const char *path = isa == FG_CPU_BF16_ROUND_AVX512BF16 ? "AVX-512 BF16"
                       : isa == FG_CPU_BF16_ROUND_AVX2     ? "AVX2"
                                                           : "software";
    if (fg_cpu_bf16_round_native(native, src, N) == 0) {
        CHECK(isa != FG_CPU_BF16_ROUND_SOFTWARE, "a native path ran on isa %d", isa);
        same_bits("the CPU's own rounding", native, want, sizeof want);
        printf("round: the %s path ran and equals the software rounding\n", path);
    } else {
        CHECK(isa == FG_CPU_BF16_ROUND_SOFTWARE, "no native path, but isa %d", isa);
        printf("round: no vector path on this CPU: the software rounding only\n");
    }
    if (isa != FG_CPU_BF16_ROUND_AVX512BF16)
        printf("round: this CPU has no avx512_bf16: vcvtneps2bf16's path did not run\n");
    case_round_rows(src, N);
}

/* ---- elementwise ----------------------------------------------------------------------- */

static void case_axpy(void)
{
    enum { N = 40009 };
    float *x = random_floats(N, -3, 3), *y = random_floats(N, -3, 3);
    uint16_t *xh = to_bf16(x, N), *yh[2] = {to_bf16(y, N), to_bf16(y, N)};
    /* the emulation: widen, the f32 kernel, round */
    float *xw = widen(xh, N), *yw = widen(yh[0], N);
    fg_cpu_axpy(pools[0], 0.7f, xw, yw, N);
    uint16_t *emu = to_bf16(yw, N);
    for (int p = 0; p < 2; p++)
        fg_cpu_axpy_bf16(pools[p], 0.7f, xh, yh[p], N);
    same_bits("axpy vs the emulation", yh[0], emu, N * 2);
    same_bits("axpy on 1 and 2 threads", yh[0], yh[1], N * 2);
    CHECK(rounding_error(yh[0], yw, N) <= HALF_ULP, "axpy: more than half an ulp");
    fg_cpu_axpy(pools[0], 0.7f, x, y, N);
    double e = scaled_error(yh[0], y, N);
    printf("axpy: %.3g of max |y| from the f32 axpy (allowed %.3g)\n", e, TOLERANCE);
    CHECK(e <= TOLERANCE, "axpy error %g", e);
    free(x), free(y), free(xh), free(yh[0]), free(yh[1]), free(xw), free(yw), free(emu);
}

/* act: 2 gelu, 3 tanh, 4 sigmoid (the fg_activation values) */
static void activation(int act, const char *name)
{
    enum { N = 30011 };
    float *x = random_floats(N, -5, 5), *dy = random_floats(N, -1, 1);
    float *y = malloc(N * sizeof *y), *dx = malloc(N * sizeof *dx);
    uint16_t *xh = to_bf16(x, N), *dyh = to_bf16(dy, N);
    uint16_t *yh[2] = {malloc(N * 2), malloc(N * 2)}, *dxh[2] = {malloc(N * 2), malloc(N * 2)};
    for (int p = 0; p < 2; p++) {
        fg_cpu_activation_forward_bf16(pools[p], act, xh, yh[p], N);
        fg_cpu_activation_backward_bf16(pools[p], act, xh, yh[p], dyh, dxh[p], N);
    }
    float *xw = widen(xh, N), *dyw = widen(dyh, N), *yw = malloc(N * 4), *dxw = malloc(N * 4);
    fg_cpu_activation_forward(pools[0], act, xw, yw, N);
    uint16_t *yemu = to_bf16(yw, N);
    float *yrw = widen(yemu, N); /* backward reads the rounded y, as the model stores it */
    fg_cpu_activation_backward(pools[0], act, xw, yrw, dyw, dxw, N);
    uint16_t *dxemu = to_bf16(dxw, N);
    char what[64];
    snprintf(what, sizeof what, "%s forward vs the emulation", name);
    same_bits(what, yh[0], yemu, N * 2);
    snprintf(what, sizeof what, "%s backward vs the emulation", name);
    same_bits(what, dxh[0], dxemu, N * 2);
    snprintf(what, sizeof what, "%s on 1 and 2 threads", name);
    same_bits(what, yh[0], yh[1], N * 2);
    same_bits(what, dxh[0], dxh[1], N * 2);
    CHECK(rounding_error(yh[0], yw, N) <= HALF_ULP && rounding_error(dxh[0], dxw, N) <= HALF_ULP,
          "%s: more than half an ulp from f32 on the same inputs", name);
    fg_cpu_activation_forward(pools[0], act, x, y, N);
    fg_cpu_activation_backward(pools[0], act, x, y, dy, dx, N);
    double ey = scaled_error(yh[0], y, N), ed = scaled_error(dxh[0], dx, N);
    printf("%s: forward %.3g, backward %.3g of the f32 kernel's max (allowed %.3g)\n", name,
           ey, ed, TOLERANCE);
    CHECK(ey <= TOLERANCE && ed <= TOLERANCE, "%s errors %g %g", name, ey, ed);
    free(x), free(dy), free(y), free(dx), free(xh), free(dyh), free(xw), free(dyw), free(yw);
    free(dxw), free(yemu), free(yrw), free(dxemu);
    for (int p = 0; p < 2; p++)
        free(yh[p]), free(dxh[p]);
}

static void case_activations(void)
{
    activation(2, "gelu");
    activation(3, "tanh");
    activation(4, "sigmoid");
}

/* ---- layer norm ------------------------------------------------------------------------ */

static void layernorm(int rms, int rows, int cols, int with_params, int accumulate)
{
    size_t n = (size_t)rows * (size_t)cols, c = (size_t)cols;
    /* an offset and a spread per row, so the mean's cancellation is exercised */
    float *x = random_floats(n, -2, 2), *dy = random_floats(n, -1, 1);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < cols; i++)
            x[(size_t)r * c + i] = x[(size_t)r * c + i] * (float)(1 + r % 3) + (float)(r % 5);
    float *g = with_params ? random_floats(c, 0.5, 1.5) : NULL;
    float *b = with_params ? random_floats(c, -0.5, 0.5) : NULL;
    uint16_t *xh = to_bf16(x, n), *dyh = to_bf16(dy, n);
    uint16_t *yh[2] = {malloc(n * 2), malloc(n * 2)}, *dxh[2] = {malloc(n * 2), malloc(n * 2)};
    float *mean[2] = {malloc(rows * 4), malloc(rows * 4)};
    float *rstd[2] = {malloc(rows * 4), malloc(rows * 4)};
    float *dg[2] = {random_floats(c, -1, 1), NULL}, *db[2] = {random_floats(c, -1, 1), NULL};
    dg[1] = malloc(c * 4), db[1] = malloc(c * 4);
    memcpy(dg[1], dg[0], c * 4), memcpy(db[1], db[0], c * 4);
    float *dg0 = malloc(c * 4), *db0 = malloc(c * 4);
    memcpy(dg0, dg[0], c * 4), memcpy(db0, db[0], c * 4);
    for (int p = 0; p < 2; p++) {
        fg_cpu_layernorm_forward_bf16(pools[p], rms, rows, cols, xh, g, b, 1e-5f, mean[p],
                                      rstd[p], yh[p]);
        fg_cpu_layernorm_backward_bf16(pools[p], rms, rows, cols, xh, g, mean[p], rstd[p], dyh,
                                       dxh[p], dg[p], db[p], accumulate);
    }
    /* the emulation */
    float *xw = widen(xh, n), *dyw = widen(dyh, n), *yw = malloc(n * 4), *dxw = malloc(n * 4);
    float *me = malloc(rows * 4), *re = malloc(rows * 4);
    float *dge = malloc(c * 4), *dbe = malloc(c * 4);
    memcpy(dge, dg0, c * 4), memcpy(dbe, db0, c * 4);
    fg_cpu_layernorm_forward(pools[0], rms, rows, cols, xw, g, b, 1e-5f, me, re, yw);
    fg_cpu_layernorm_backward(pools[0], rms, rows, cols, xw, g, me, re, dyw, dxw, dge, dbe,
                              accumulate);
    uint16_t *yemu = to_bf16(yw, n), *dxemu = to_bf16(dxw, n);
    char tag[96];
    snprintf(tag, sizeof tag, "%s %dx%d%s%s", rms ? "rmsnorm" : "layernorm", rows, cols,
             with_params ? " gamma/beta" : "", accumulate ? " accumulate" : "");
    CHECK(memcmp(yh[0], yemu, n * 2) == 0 && memcmp(rstd[0], re, rows * 4) == 0 &&
              (rms || memcmp(mean[0], me, rows * 4) == 0),
          "%s: forward differs from the emulation", tag);
    CHECK(memcmp(dxh[0], dxemu, n * 2) == 0, "%s: dx differs from the emulation", tag);
    CHECK(memcmp(dg[0], dge, c * 4) == 0 && (rms || memcmp(db[0], dbe, c * 4) == 0),
          "%s: dgamma/dbeta differ from the emulation", tag);
    CHECK(memcmp(yh[0], yh[1], n * 2) == 0 && memcmp(dxh[0], dxh[1], n * 2) == 0 &&
              memcmp(dg[0], dg[1], c * 4) == 0 && memcmp(db[0], db[1], c * 4) == 0,
          "%s: 1 and 2 threads differ", tag);
    CHECK(rounding_error(yh[0], yw, n) <= HALF_ULP && rounding_error(dxh[0], dxw, n) <= HALF_ULP,
          "%s: more than half an ulp from f32 on the same inputs", tag);
    /* against f32 on the unrounded inputs */
    float *y = malloc(n * 4), *dx = malloc(n * 4), *mf = malloc(rows * 4), *rf = malloc(rows * 4);
    fg_cpu_layernorm_forward(pools[0], rms, rows, cols, x, g, b, 1e-5f, mf, rf, y);
    memcpy(dge, dg0, c * 4), memcpy(dbe, db0, c * 4);
    fg_cpu_layernorm_backward(pools[0], rms, rows, cols, x, g, mf, rf, dy, dx, dge, dbe,
                              accumulate);
    double ey = scaled_error(yh[0], y, n), ed = scaled_error(dxh[0], dx, n);
    double eg = scaled_error_f32(dg[0], dge, c);
    printf("%s: y %.3g, dx %.3g, dgamma %.3g of the f32 kernel's max (allowed %.3g)\n", tag,
           ey, ed, eg, TOLERANCE);
    CHECK(ey <= TOLERANCE && ed <= TOLERANCE && eg <= TOLERANCE, "%s errors %g %g %g", tag, ey,
          ed, eg);
    free(x), free(dy), free(g), free(b), free(xh), free(dyh), free(xw), free(dyw), free(yw);
    free(dxw), free(me), free(re), free(dge), free(dbe), free(yemu), free(dxemu), free(y);
    free(dx), free(mf), free(rf), free(dg0), free(db0);
    for (int p = 0; p < 2; p++)
        free(yh[p]), free(dxh[p]), free(mean[p]), free(rstd[p]), free(dg[p]), free(db[p]);
}

static void case_layernorm(void)
{
    layernorm(0, 37, 200, 1, 0);
    layernorm(0, 64, 384, 1, 1);
    layernorm(0, 5, 4096, 0, 0); /* the widest row the kernels take */
    layernorm(1, 41, 130, 1, 0);
    layernorm(1, 3, 17, 0, 1);
}

/* ---- embedding ------------------------------------------------------------------------- */

static void case_embedding(void)
{
    enum { ROWS = 97, DIM = 300, N = 211 };
    int32_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 31 + i / 7) % ROWS; /* repeats, out of order */
    float *table = random_floats((size_t)ROWS * DIM, -1, 1);
    float *base = random_floats((size_t)N * DIM, -1, 1);
    float *dout = random_floats((size_t)N * DIM, -1, 1);
    uint16_t *th = to_bf16(table, (size_t)ROWS * DIM), *dh = to_bf16(dout, (size_t)N * DIM);
    for (int acc = 0; acc < 2; acc++) {
        uint16_t *out[2] = {to_bf16(base, (size_t)N * DIM), to_bf16(base, (size_t)N * DIM)};
        float *dt[2] = {random_floats((size_t)ROWS * DIM, -1, 1), NULL};
        dt[1] = malloc((size_t)ROWS * DIM * 4);
        memcpy(dt[1], dt[0], (size_t)ROWS * DIM * 4);
        float *dte = malloc((size_t)ROWS * DIM * 4);
        memcpy(dte, dt[0], (size_t)ROWS * DIM * 4);
        float *outw = widen(out[0], (size_t)N * DIM), *tw = widen(th, (size_t)ROWS * DIM);
        float *dw = widen(dh, (size_t)N * DIM);
        for (int p = 0; p < 2; p++) {
            fg_cpu_embedding_forward_bf16(pools[p], ids, N, DIM, th, out[p], acc);
            fg_cpu_embedding_backward_bf16(pools[p], ids, N, DIM, ROWS, dh, dt[p], acc);
        }
        fg_cpu_embedding_forward(pools[0], ids, N, DIM, tw, outw, acc);
        fg_cpu_embedding_backward(pools[0], ids, N, DIM, ROWS, dw, dte, acc);
        uint16_t *emu = to_bf16(outw, (size_t)N * DIM);
        CHECK(memcmp(out[0], emu, (size_t)N * DIM * 2) == 0,
              "embedding forward (accumulate %d) differs from the emulation", acc);
        CHECK(memcmp(dt[0], dte, (size_t)ROWS * DIM * 4) == 0,
              "embedding backward (accumulate %d) differs from the emulation", acc);
        CHECK(memcmp(out[0], out[1], (size_t)N * DIM * 2) == 0 &&
                  memcmp(dt[0], dt[1], (size_t)ROWS * DIM * 4) == 0,
              "embedding (accumulate %d): 1 and 2 threads differ", acc);
        CHECK(rounding_error(out[0], outw, (size_t)N * DIM) <= HALF_ULP,
              "embedding (accumulate %d): more than half an ulp", acc);
        /* against f32 */
        float *ref = malloc((size_t)N * DIM * 4);
        memcpy(ref, base, (size_t)N * DIM * 4);
        fg_cpu_embedding_forward(pools[0], ids, N, DIM, table, ref, acc);
        double e = scaled_error(out[0], ref, (size_t)N * DIM);
        printf("embedding (accumulate %d): %.3g of the f32 kernel's max (allowed %.3g)\n", acc,
               e, TOLERANCE);
        CHECK(e <= TOLERANCE, "embedding error %g", e);
        free(out[0]), free(out[1]), free(dt[0]), free(dt[1]), free(dte), free(outw), free(tw);
        free(dw), free(emu), free(ref);
    }
    free(table), free(base), free(dout), free(th), free(dh);
}


/* ---- time --------------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum { TIME_RUNS = 60 };

typedef struct timing_set {
    size_t rows, width, n, hidden;
    float *xf, *yf, *hf, *gf, *dhf, *mean, *rstd, *gamma, *beta, *dg, *db, *table;
    uint16_t *xh, *yh, *hh, *gh, *dhh, *tableh;
    int32_t *ids;
} timing_set;

/* Which op a timing runs, and how (0 f32, 1 staged bf16, 2 the _bf16 kernel). */
static void run_op(timing_set *t, int op, int how)
{
    fg_cpu_pool *p = pools[1];
    size_t n = t->n, h = t->hidden;
    int rows = (int)t->rows, w = (int)t->width;
    switch (op) {
    case 0: /* axpy: the residual add */
        if (how == 0)
            fg_cpu_axpy(p, 1.0f, t->xf, t->yf, n);
        else if (how == 1) {
            fg_cpu_convert(p, t->xf, FG_CPU_F32, t->xh, FG_CPU_BF16, n);
            fg_cpu_convert(p, t->yf, FG_CPU_F32, t->yh, FG_CPU_BF16, n);
            fg_cpu_axpy(p, 1.0f, t->xf, t->yf, n);
            fg_cpu_convert(p, t->yh, FG_CPU_BF16, t->yf, FG_CPU_F32, n);
        } else
            fg_cpu_axpy_bf16(p, 1.0f, t->xh, t->yh, n);
        break;
    case 1: /* gelu forward over the MLP's hidden */
        if (how == 0)
            fg_cpu_activation_forward(p, 2, t->hf, t->gf, h);
        else if (how == 1) {
            fg_cpu_convert(p, t->hf, FG_CPU_F32, t->hh, FG_CPU_BF16, h);
            fg_cpu_activation_forward(p, 2, t->hf, t->gf, h);
            fg_cpu_convert(p, t->gh, FG_CPU_BF16, t->gf, FG_CPU_F32, h);
        } else
            fg_cpu_activation_forward_bf16(p, 2, t->hh, t->gh, h);
        break;
    case 2: /* gelu backward */
        if (how == 0)
            fg_cpu_activation_backward(p, 2, t->hf, NULL, t->dhf, t->gf, h);
        else if (how == 1) {
            fg_cpu_convert(p, t->hf, FG_CPU_F32, t->hh, FG_CPU_BF16, h);
            fg_cpu_convert(p, t->dhf, FG_CPU_F32, t->dhh, FG_CPU_BF16, h);
            fg_cpu_activation_backward(p, 2, t->hf, NULL, t->dhf, t->gf, h);
            fg_cpu_convert(p, t->gh, FG_CPU_BF16, t->gf, FG_CPU_F32, h);
        } else
            fg_cpu_activation_backward_bf16(p, 2, t->hh, NULL, t->dhh, t->gh, h);
        break;
    case 3: /* layernorm forward */
        if (how == 0)
            fg_cpu_layernorm_forward(p, 0, rows, w, t->xf, t->gamma, t->beta, 1e-5f, t->mean,
                                     t->rstd, t->yf);
        else if (how == 1) {
            fg_cpu_convert(p, t->xf, FG_CPU_F32, t->xh, FG_CPU_BF16, n);
            fg_cpu_layernorm_forward(p, 0, rows, w, t->xf, t->gamma, t->beta, 1e-5f, t->mean,
                                     t->rstd, t->yf);
            fg_cpu_convert(p, t->yh, FG_CPU_BF16, t->yf, FG_CPU_F32, n);
        } else
            fg_cpu_layernorm_forward_bf16(p, 0, rows, w, t->xh, t->gamma, t->beta, 1e-5f,
                                          t->mean, t->rstd, t->yh);
        break;
    case 4: /* layernorm backward, dgamma and dbeta accumulated (f32 grads) */
        if (how == 0)
            fg_cpu_layernorm_backward(p, 0, rows, w, t->xf, t->gamma, t->mean, t->rstd, t->yf,
                                      t->hf, t->dg, t->db, 1);
        else if (how == 1) {
            fg_cpu_convert(p, t->xf, FG_CPU_F32, t->xh, FG_CPU_BF16, n);
            fg_cpu_convert(p, t->yf, FG_CPU_F32, t->yh, FG_CPU_BF16, n);
            fg_cpu_layernorm_backward(p, 0, rows, w, t->xf, t->gamma, t->mean, t->rstd, t->yf,
                                      t->hf, t->dg, t->db, 1);
            fg_cpu_convert(p, t->hh, FG_CPU_BF16, t->hf, FG_CPU_F32, n);
        } else
            fg_cpu_layernorm_backward_bf16(p, 0, rows, w, t->xh, t->gamma, t->mean, t->rstd,
                                           t->yh, t->hh, t->dg, t->db, 1);
        break;
    default: /* embedding forward, the position table added (accumulate) */
        if (how == 0)
            fg_cpu_embedding_forward(p, t->ids, rows, w, t->table, t->yf, 1);
        else if (how == 1) {
            fg_cpu_convert(p, t->gf, FG_CPU_F32, t->tableh, FG_CPU_BF16, 256 * t->width);
            fg_cpu_convert(p, t->yf, FG_CPU_F32, t->yh, FG_CPU_BF16, n);
            fg_cpu_embedding_forward(p, t->ids, rows, w, t->gf, t->yf, 1);
            fg_cpu_convert(p, t->yh, FG_CPU_BF16, t->yf, FG_CPU_F32, n);
        } else
            fg_cpu_embedding_forward_bf16(p, t->ids, rows, w, t->tableh, t->yh, 1);
        break;
    }
}

static void time_kernels(size_t rows, size_t width)
{
    timing_set t = {.rows = rows, .width = width, .n = rows * width, .hidden = rows * width * 4};
    size_t n = t.n, h = t.hidden;
    t.xf = random_floats(n, -2, 2), t.yf = random_floats(n, -2, 2);
    t.hf = random_floats(h, -3, 3), t.gf = random_floats(h, -3, 3);
    t.dhf = random_floats(h, -1, 1), t.gamma = random_floats(width, 0.5, 1.5);
    t.beta = random_floats(width, -0.5, 0.5), t.dg = random_floats(width, 0, 0);
    t.db = random_floats(width, 0, 0), t.table = random_floats(256 * width, -1, 1);
    t.mean = random_floats(rows, 0, 0), t.rstd = random_floats(rows, 1, 1);
    t.xh = to_bf16(t.xf, n), t.yh = to_bf16(t.yf, n), t.hh = to_bf16(t.hf, h);
    t.gh = to_bf16(t.gf, h), t.dhh = to_bf16(t.dhf, h), t.tableh = to_bf16(t.table, 256 * width);
    t.ids = malloc(rows * sizeof *t.ids);
    for (size_t i = 0; i < rows; i++)
        t.ids[i] = (int32_t)((i * 37) % 256);
    static const char *names[] = {"axpy (residual add)", "gelu forward (4x width)",
                                  "gelu backward (4x width)", "layernorm forward",
                                  "layernorm backward", "embedding forward (accumulate)"};
    printf("rows %zu, width %zu, 2 threads, bf16 rounding: %s; best of %d runs, us\n", rows,
           width, fg_cpu_bf16_round_isa() == FG_CPU_BF16_ROUND_AVX512BF16 ? "avx512_bf16"
           : fg_cpu_bf16_round_isa() == FG_CPU_BF16_ROUND_AVX2       ? "avx2"
                                                                     : "software",
           TIME_RUNS);
    printf("%-32s %10s %14s %12s %9s %9s\n", "op", "f32", "bf16 staged", "bf16 direct",
           "st/dir", "f32/dir");
    for (int op = 0; op < 6; op++) {
        double best[3] = {1e30, 1e30, 1e30};
        for (int r = 0; r < TIME_RUNS; r++)
            for (int how = 0; how < 3; how++) { /* alternating: drift meets all three */
                double t0 = now_s();
                run_op(&t, op, how);
                double dt = now_s() - t0;
                best[how] = dt < best[how] ? dt : best[how];
            }
        printf("%-32s %10.1f %14.1f %12.1f %8.2fx %8.2fx\n", names[op], best[0] * 1e6,
               best[1] * 1e6, best[2] * 1e6, best[1] / best[2], best[0] / best[2]);
    }
    free(t.xf), free(t.yf), free(t.hf), free(t.gf), free(t.dhf), free(t.gamma), free(t.beta);
    free(t.dg), free(t.db), free(t.table), free(t.mean), free(t.rstd), free(t.xh), free(t.yh);
    free(t.hh), free(t.gh), free(t.dhh), free(t.tableh), free(t.ids);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "time") == 0) {
        open_pools();
        fg_cpu_pool_set_stream_grain(pools[1], FG_CPU_STREAM_GRAIN); /* the backend's */
        size_t rows = argc >= 4 ? (size_t)atol(argv[2]) : 768;
        size_t width = argc >= 4 ? (size_t)atol(argv[3]) : 128;
        time_kernels(rows, width);
        close_pools();
        return 0;
    }
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {
        {"round", case_round},         {"axpy", case_axpy},
        {"activations", case_activations}, {"layernorm", case_layernorm},
        {"embedding", case_embedding},
    };
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof *cases; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            open_pools();
            cases[i].run();
            close_pools();
            return fg_test_report(argv[1]);
        }
    fprintf(stderr, "usage: %s CASE\n", argv[0]);
    return 2;
}
