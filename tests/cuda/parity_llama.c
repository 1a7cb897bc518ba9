/* Parity groups of the Llama-family ops (ABI 1.6) against the CPU backend: rope_forward and
 * rope_backward, and their ABI 1.9 forms with a table of inverse frequencies
 * (rope_freq_forward/backward: a scaled table, and the unscaled one equal to rope_forward
 * bitwise) (odd head sizes and row counts, positions past the sequence start, a fused
 * qkv row whose v columns must stay untouched, layouts that take the 128-bit path and ones
 * that do not), swiglu_forward and swiglu_backward (odd lengths, misaligned buffers, dgate
 * aliasing dy), grouped-query attention (kv_heads < heads, multi-query included: forward,
 * backward, decode, dropout), each in f32, bf16 and f16; and, for the CUDA backend, the
 * attention paths that refuse grouped-query attention with a message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

static const uint32_t llama_dts[] = { FG_F32, FG_BF16, FG_F16 };

/* n values of dtype t starting `skip` elements into a fresh buffer (a misaligned view). */
static pair at(size_t n, uint32_t t, size_t skip, double lo, double hi)
{
    pair p = prandom(n + skip, t, lo, hi);
    size_t b = skip * dtype_size(t);
    pair v = { (char *)p.c + b, (char *)p.g + b, p.bytes - b };
    return v;
}

/* ---- rope --------------------------------------------------------------------------------- */

static void rope_case(uint32_t dt, int rows, int seq, int pos0, int heads, int head_dim, int ld,
                      size_t skip)
{
    size_t n = (size_t)rows * (size_t)ld;
    char name[160];
    snprintf(name, sizeof name, "rows=%d seq=%d pos0=%d heads=%d D=%d ld=%d +%zu %s", rows, seq,
             pos0, heads, head_dim, ld, skip, fg_dtype_name((fg_dtype)dt));
    pair x = at(n, dt, skip, -2, 2);
    const char *what = W("rope_forward %s", name);
    BOTH(what, V->rope_forward(S, Q, dt, rows, seq, pos0, heads, head_dim, ld, 10000.0f, X(x),
                               E));
    /* the whole rows: columns past heads * head_dim must be left as they were */
    compare(what, x, n, dt, tol_of(dt));
    pmirror(x);
    what = W("rope_backward %s", name);
    BOTH(what, V->rope_backward(S, Q, dt, rows, seq, pos0, heads, head_dim, ld, 10000.0f, X(x),
                                E));
    compare(what, x, n, dt, tol_of(dt));
}

/* A table as Llama 3's scaling makes one: pairs kept, divided by 8, and blended. */
static void scaled_table(int head_dim, double *inv_freq)
{
    for (int i = 0; i < head_dim / 2; i++)
        inv_freq[i] = pow(10000.0, -2.0 * i / head_dim) / (i % 3 == 0 ? 1 : i % 3 == 1 ? 8 : 2.5);
}

static void rope_freq_case(uint32_t dt, int rows, int seq, int pos0, int heads, int head_dim,
                           int ld, size_t skip)
{
    size_t n = (size_t)rows * (size_t)ld;
    double inv_freq[256];
    scaled_table(head_dim, inv_freq);
    char name[160];
    snprintf(name, sizeof name, "rows=%d seq=%d pos0=%d heads=%d D=%d ld=%d +%zu %s", rows, seq,
             pos0, heads, head_dim, ld, skip, fg_dtype_name((fg_dtype)dt));
    pair x = at(n, dt, skip, -2, 2);
    const char *what = W("rope_freq_forward %s", name);
    BOTH(what, V->rope_freq_forward(S, Q, dt, rows, seq, pos0, heads, head_dim, ld, inv_freq,
                                    X(x), E));
    compare(what, x, n, dt, tol_of(dt));
    pmirror(x);
    what = W("rope_freq_backward %s", name);
    BOTH(what, V->rope_freq_backward(S, Q, dt, rows, seq, pos0, heads, head_dim, ld, inv_freq,
                                     X(x), E));
    compare(what, x, n, dt, tol_of(dt));
}

/* On the tested backend: the table theta^(-2i/D) turns exactly as rope_forward with theta
 * (the same angles), and a scaled table does not. */
static void rope_freq_unscaled(void)
{
    int rows = 12, seq = 6, heads = 3, d = 16, ld = 50;
    size_t n = (size_t)rows * ld;
    double plain[8], scaled[8];
    for (int i = 0; i < d / 2; i++)
        plain[i] = pow(500.0, -2.0 * i / d);
    scaled_table(d, scaled);
    pair a = prandom(n, FG_F32, -2, 2), b = prandom(n, FG_F32, -2, 2);
    float *ha = malloc(n * sizeof *ha), *hb = malloc(n * sizeof *hb);
    pput(b, a.c);
    fg_error e = {0};
    fg_status st = P.dut->rope_forward(P.ds, P.dq, FG_F32, rows, seq, 3, heads, d, ld, 500.0f,
                                       a.g, &e);
    for (int k = 0; k < 2 && st == FG_OK; k++) {
        st = P.dut->rope_freq_forward(P.ds, P.dq, FG_F32, rows, seq, 3, heads, d, ld,
                                      k ? scaled : plain, b.g, &e);
        if (st == FG_OK && !k) {
            download(a, ha);
            download(b, hb);
            checks++;
            if (memcmp(ha, hb, n * sizeof *ha) != 0)
                fail("rope_freq_forward with theta's table differs from rope_forward");
            pput(b, a.c);
        }
    }
    checks++;
    if (st != FG_OK) {
        fail("rope_freq: %s", e.message);
    } else {
        download(b, hb);
        if (memcmp(ha, hb, n * sizeof *ha) == 0)
            fail("rope_freq_forward with a scaled table equals rope_forward");
    }
    free(ha);
    free(hb);
}

/* rope_backward undoes rope_forward (a rotation's transpose): on the tested backend alone. */
static void rope_roundtrip(void)
{
    int rows = 12, seq = 6, heads = 3, d = 10, ld = 34;
    size_t n = (size_t)rows * ld;
    pair x = prandom(n, FG_F32, -2, 2);
    float *before = malloc(n * sizeof *before), *after = malloc(n * sizeof *after);
    memcpy(before, x.c, n * sizeof *before);
    fg_error e = {0};
    fg_status st = P.dut->rope_forward(P.ds, P.dq, FG_F32, rows, seq, 3, heads, d, ld, 500.0f,
                                       x.g, &e);
    if (st == FG_OK)
        st = P.dut->rope_backward(P.ds, P.dq, FG_F32, rows, seq, 3, heads, d, ld, 500.0f, x.g,
                                  &e);
    checks++;
    if (st != FG_OK) {
        fail("rope round trip: %s", e.message);
    } else {
        download(x, after);
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            worst = fmax(worst, fabs((double)after[i] - before[i]));
        if (!(worst <= 1e-5))
            fail("rope round trip: rope_backward(rope_forward(x)) is %g from x", worst);
    }
    free(before);
    free(after);
}

void test_rope(void)
{
    /* rows, seq, pos0, heads, head_dim, ld, skip: one pair; odd half sizes; a fused qkv row
     * (ld > heads * D: q and k rotated, v not); several sequences in the rows; a start
     * position (the KV cache's); half a multiple of 8 and ld of 8 (the 128-bit path); the
     * same misaligned (the scalar one) */
    static const int shapes[][7] = { { 1, 1, 0, 1, 2, 2, 0 },     { 7, 7, 0, 3, 6, 18, 0 },
                                     { 10, 5, 0, 2, 10, 50, 1 },  { 9, 3, 17, 5, 14, 77, 0 },
                                     { 24, 8, 0, 4, 16, 96, 0 },  { 24, 8, 2, 4, 16, 96, 3 },
                                     { 33, 11, 0, 2, 128, 384, 0 } };
    for (int x = 0; x < 3; x++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int *c = shapes[s];
            rope_case(llama_dts[x], c[0], c[1], c[2], c[3], c[4], c[5], (size_t)c[6]);
            rope_freq_case(llama_dts[x], c[0], c[1], c[2], c[3], c[4], c[5], (size_t)c[6]);
            release_all();
        }
    rope_roundtrip();
    rope_freq_unscaled();
    release_all();
}

/* ---- swiglu ------------------------------------------------------------------------------- */

static void swiglu_case(uint32_t dt, size_t n, size_t skip, int alias)
{
    char name[160];
    snprintf(name, sizeof name, "n=%zu +%zu%s %s", n, skip, alias ? " dgate=dy" : "",
             fg_dtype_name((fg_dtype)dt));
    pair g = at(n, dt, skip, -6, 6), u = at(n, dt, skip, -2, 2), y = at(n, dt, skip, 0, 1);
    ppoison(y);
    const char *what = W("swiglu_forward %s", name);
    BOTH(what, V->swiglu_forward(S, Q, dt, X(g), X(u), X(y), n, E));
    compare(what, y, n, dt, tol_of(dt));
    pair dy = at(n, dt, skip, -1, 1), dup = at(n, dt, skip, 0, 1);
    pair dg = alias ? dy : at(n, dt, skip, 0, 1);
    ppoison(dup);
    if (!alias)
        ppoison(dg);
    what = W("swiglu_backward %s", name);
    BOTH(what, V->swiglu_backward(S, Q, dt, X(g), X(u), X(dy), X(dg), X(dup), n, E));
    compare(W("swiglu_backward %s (dgate)", name), dg, n, dt, tol_of(dt));
    compare(W("swiglu_backward %s (dup)", name), dup, n, dt, tol_of(dt));
    release_all();
}

void test_swiglu(void)
{
    static const size_t sizes[] = { 1, 7, 33, 1000, 4099, 65536 };
    for (int x = 0; x < 3; x++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            swiglu_case(llama_dts[x], sizes[s], 0, 0);
            swiglu_case(llama_dts[x], sizes[s], 1, s % 2);
            swiglu_case(llama_dts[x], sizes[s], 0, 1);
        }
}

/* ---- grouped-query attention -------------------------------------------------------------- */

void test_gqa(void)
{
    /* B, T, H, KV, D: two query heads a key/value head; three (odd D); multi-query (KV = 1);
     * T past a key tile; cuDNN-shaped heads (D = 16, 64), the largest head size */
    static const int shapes[][5] = { { 2, 7, 4, 2, 5 },   { 1, 37, 6, 2, 17 },
                                     { 2, 40, 4, 1, 16 }, { 1, 33, 8, 2, 64 },
                                     { 1, 19, 2, 1, 128 } };
    for (int x = 0; x < 3; x++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int causal = 0; causal < 2; causal++) {
                const int *c = shapes[s];
                attention_case_kv(llama_dts[x], c[0], c[1], c[2], c[3], c[4], causal, 0.0f);
            }
    /* attention dropout: query head h's draws, as the CPU's */
    attention_case_kv(FG_F32, 2, 37, 4, 2, 9, 1, 0.2f);
    attention_case_kv(FG_BF16, 1, 33, 6, 3, 16, 0, 0.1f);
}

/* The attention paths that do not run grouped-query attention, on the tested backend alone:
 * the call fails with FG_UNAVAILABLE and says why (run with --set attention=cudnn for the
 * bf16 case, attention=gemm for the f32 one; under attention=auto both run in the kernels). */
static void gqa_refused(uint32_t dt, int head_dim)
{
    fg_attention_desc d = { sizeof d, 1, 8, 4, head_dim, 1, 0.0f, 1, 0, 2 };
    size_t rows = 8, cqkv = (size_t)(4 + 2 * 2) * head_dim, c = (size_t)4 * head_dim;
    pair ws = pnew(P.dut->attention_workspace(P.ds, &d) + 64);
    pair qkv = prandom(rows * cqkv, dt, -1, 1), y = pnew(rows * c * dtype_size(dt));
    pair lse = pnew(4 * 8 * 4);
    fg_error e = {0};
    fg_status st = P.dut->attention_forward(P.ds, P.dq, dt, &d, qkv.g, y.g, (float *)lse.g,
                                            ws.g, &e);
    checks++;
    if (st != FG_UNAVAILABLE || !strstr(e.message, "grouped-query attention"))
        fail("grouped-query attention %s: expected FG_UNAVAILABLE naming it, got %s: %s",
             fg_dtype_name((fg_dtype)dt), fg_status_name(st), e.message);
    release_all();
}

void test_gqa_refused_cudnn(void)
{
    gqa_refused(FG_BF16, 16);
}

void test_gqa_refused_gemm(void)
{
    gqa_refused(FG_F32, 8);
}
