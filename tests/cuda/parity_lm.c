/* Parity groups of the transformer ops: layer and RMS norm, embedding, attention (causal
 * or not, odd sequence lengths and head sizes, attention dropout), in fp32 and in the
 * half-precision mixes the precision plugins use. Backward steps start from the CPU's
 * saved statistics (mean, rstd, lse) and outputs on both sides, so each op is checked on
 * its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

/* activations, parameters, gradients: fp32, bf16-mixed, fp16-mixed */
static const uint32_t lm_mixes[][3] = {
    {FG_F32, FG_F32, FG_F32},
    {FG_BF16, FG_BF16, FG_F32},
    {FG_F16, FG_F16, FG_F32},
};

static const char *lm_mix_name(const uint32_t *dt)
{
    static char buf[32];
    snprintf(buf, sizeof buf, "%s/%s/%s", fg_dtype_name((fg_dtype)dt[0]),
             fg_dtype_name((fg_dtype)dt[1]), fg_dtype_name((fg_dtype)dt[2]));
    return buf;
}

/* ---- layer and RMS norm --------------------------------------------------------------- */

static void layernorm_case(const uint32_t *dt, int rows, int cols, int rms, int affine, int acc)
{
    size_t n = (size_t)rows * (size_t)cols, c = (size_t)cols;
    double tol = tol_of(dt[0]) > tol_of(dt[1]) ? tol_of(dt[0]) : tol_of(dt[1]);
    pair x = prandom(n, dt[0], -2, 3), g = prandom(c, dt[1], 0.5, 1.5);
    pair b = prandom(c, dt[1], -1, 1), y = pnew(n * dtype_size(dt[0]));
    pair mean = pnew((size_t)rows * 4), rstd = pnew((size_t)rows * 4);
    ppoison(y);
    ppoison(mean);
    ppoison(rstd);
    char name[160];
    snprintf(name, sizeof name, "%d x %d rms=%d affine=%d acc=%d %s", rows, cols, rms, affine,
             acc, lm_mix_name(dt));
    const char *what = W("layernorm_forward %s", name);
    BOTH(what, V->layernorm_forward(S, Q, dt[0], dt[1], rms, rows, cols, X(x), XN(affine, g),
                                    XN(affine && !rms, b), 1e-5f, XN(!rms, mean), X(rstd),
                                    X(y), E));
    compare(what, y, n, dt[0], tol);
    if (!rms)
        compare(W("layernorm_forward %s (mean)", name), mean, (size_t)rows, FG_F32, 1e-6);
    compare(W("layernorm_forward %s (rstd)", name), rstd, (size_t)rows, FG_F32, 1e-6);
    pmirror(mean);
    pmirror(rstd);
    pair dy = prandom(n, dt[0], -1, 1), dx = pnew(n * dtype_size(dt[0]));
    pair dg = prandom(c, dt[2], -1, 1), db = prandom(c, dt[2], -1, 1);
    ppoison(dx);
    if (!acc) {
        ppoison(dg);
        ppoison(db);
    }
    what = W("layernorm_backward %s", name);
    BOTH(what, V->layernorm_backward(S, Q, dt[0], dt[1], dt[2], rms, rows, cols, X(x),
                                     XN(affine, g), XN(!rms, mean), X(rstd), X(dy), X(dx),
                                     X(dg), XN(!rms, db), acc, E));
    compare(W("layernorm_backward %s (dx)", name), dx, n, dt[0], tol);
    compare(W("layernorm_backward %s (dgamma)", name), dg, c, dt[2], 1e-5);
    if (!rms)
        compare(W("layernorm_backward %s (dbeta)", name), db, c, dt[2], 1e-5);
    release_all();
}

void test_layernorm(void)
{
    /* several column tiles (769), several row chunks of the parameter gradients (300, 1000) */
    static const int shapes[][2] = { { 1, 1 }, { 7, 13 }, { 64, 128 }, { 33, 769 },
                                     { 300, 64 }, { 1000, 5 } };
    for (int x = 0; x < 3; x++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int rms = 0; rms < 2; rms++)
                layernorm_case(lm_mixes[x], shapes[s][0], shapes[s][1], rms, (int)(s % 3 != 1),
                               (int)(s % 2));
    /* without dx (only the parameter gradients), in place of y */
    int rows = 20, cols = 48;
    size_t n = (size_t)rows * cols;
    pair x = prandom(n, FG_F32, -1, 1), g = prandom(48, FG_F32, 0.5, 1.5);
    pair mean = pnew(80), rstd = pnew(80), dy = prandom(n, FG_F32, -1, 1);
    BOTH("layernorm_forward in place",
         V->layernorm_forward(S, Q, FG_F32, FG_F32, 0, rows, cols, X(x), X(g), NULL, 1e-5f,
                              X(mean), X(rstd), X(x), E));
    compare("layernorm_forward in place", x, n, FG_F32, 1e-5);
    pmirror(x);
    pmirror(mean);
    pmirror(rstd);
    pair dg = pnew(48 * 4);
    ppoison(dg);
    BOTH("layernorm_backward without dx",
         V->layernorm_backward(S, Q, FG_F32, FG_F32, FG_F32, 0, rows, cols, X(x), X(g), X(mean),
                               X(rstd), X(dy), NULL, X(dg), NULL, 0, E));
    compare("layernorm_backward without dx (dgamma)", dg, 48, FG_F32, 1e-5);
    release_all();
}

/* ---- embedding ------------------------------------------------------------------------ */

static pair ids_for(int n, int rows)
{
    pair p = pnew((size_t)(n ? n : 1) * 4);
    int32_t *v = p.c;
    /* ids from a small range too, so that many repeat */
    int range = n % 2 ? rows : (rows < 5 ? rows : 5);
    for (int i = 0; i < n; i++)
        v[i] = (int32_t)rng_uniform(0, range) % range;
    pmirror(p);
    return p;
}

/* The same f32 arithmetic in the same order on both sides: bitwise. */
void test_embedding(void)
{
    static const int shapes[][3] = { { 1, 1, 1 }, { 100, 17, 50 }, { 333, 64, 256 },
                                     { 64, 33, 7 }, { 0, 8, 9 } };
    for (int x = 0; x < 3; x++) {
        const uint32_t *dt = lm_mixes[x];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int n = shapes[s][0], dim = shapes[s][1], rows = shapes[s][2];
            size_t on = (size_t)n * dim, tn = (size_t)rows * dim;
            pair ids = ids_for(n, rows), table = prandom(tn, dt[1], -1, 1);
            for (int acc = 0; acc < 2; acc++) {
                pair out = prandom(on, dt[0], -1, 1);
                if (!acc)
                    ppoison(out);
                const char *what = W("embedding_forward n=%d dim=%d rows=%d acc=%d %s", n, dim,
                                     rows, acc, lm_mix_name(dt));
                BOTH(what, V->embedding_forward(S, Q, dt[1], dt[0], X(ids), n, dim, rows,
                                                X(table), X(out), acc, E));
                compare_exact(what, out, on * dtype_size(dt[0]));
                pair dout = prandom(on, dt[0], -1, 1), dtab = prandom(tn, dt[2], -1, 1);
                if (!acc)
                    ppoison(dtab);
                what = W("embedding_backward n=%d dim=%d rows=%d acc=%d %s", n, dim, rows, acc,
                         lm_mix_name(dt));
                BOTH(what, V->embedding_backward(S, Q, dt[0], dt[2], X(ids), n, dim, rows,
                                                 X(dout), X(dtab), acc, E));
                compare_exact(what, dtab, tn * dtype_size(dt[2]));
            }
            release_all();
        }
    }
    /* an id outside the table: refused by the op, or (a device backend) at the next
     * queue_sync */
    pair ids = ids_for(16, 10), table = prandom(40, FG_F32, -1, 1), out = pnew(16 * 4 * 4);
    ((int32_t *)ids.c)[5] = 10;
    pmirror(ids);
    fg_error e = {0};
    fg_status st = P.dut->embedding_forward(P.ds, P.dq, FG_F32, FG_F32, ids.g, 16, 4, 10,
                                            table.g, out.g, 0, &e);
    if (st == FG_OK)
        st = P.dut->queue_sync(P.ds, P.dq, &e);
    checks++;
    if (st != FG_INVALID_ARGUMENT || !strstr(e.message, "id 10 at position 5"))
        fail("a bad id: embedding_forward answered %s: %s", fg_status_name(st), e.message);
    checks++;
    if ((st = P.dut->queue_sync(P.ds, P.dq, &e)) != FG_OK)
        fail("queue_sync after a reported bad id: %s", e.message);
    release_all();
}

/* ---- attention ------------------------------------------------------------------------ */

/* One query row against the cache (generate's KV cache): the first, a middle and the last
 * row; dropout is not read. */
static void decode_case(uint32_t dt, const fg_attention_desc *d, pair qkv, pair ws,
                        const char *name)
{
    size_t c = (size_t)d->heads * d->head_dim, n = (size_t)d->batch * c;
    int rows[] = { 0, d->seq / 2, d->seq - 1 };
    for (int r = 0; r < 3; r++) {
        pair y = pnew(n * dtype_size(dt));
        ppoison(y);
        const char *what = W("attention_decode pos=%d %s", rows[r], name);
        BOTH(what, V->attention_decode(S, Q, dt, d, rows[r], X(qkv), X(y), X(ws), E));
        compare(what, y, n, dt, tol_of(dt));
    }
}

void attention_case_kv(uint32_t dt, int batch, int seq, int heads, int kv_heads, int head_dim,
                       int causal, float dropout)
{
    fg_attention_desc d = { sizeof d, batch, seq, heads, head_dim, causal, dropout,
                            1234 + (uint64_t)seq, 77, kv_heads };
    size_t rows = (size_t)batch * seq, c = (size_t)heads * head_dim;
    size_t cqkv = (size_t)(heads + 2 * kv_heads) * head_dim;
    size_t lse_n = (size_t)batch * heads * seq;
    size_t wc = P.ref->attention_workspace(P.rs, &d), wg = P.dut->attention_workspace(P.ds, &d);
    checks++;
    if (!wg)
        fail("attention_workspace of a valid desc is 0");
    pair ws = pnew(wc > wg ? wc : wg);
    pair qkv = prandom(rows * cqkv, dt, -2, 2), y = pnew(rows * c * dtype_size(dt));
    pair lse = pnew(lse_n * 4);
    ppoison(y);
    ppoison(lse);
    char name[160];
    snprintf(name, sizeof name, "B=%d T=%d H=%d KV=%d D=%d causal=%d dropout=%g %s", batch, seq,
             heads, kv_heads, head_dim, causal, (double)dropout, fg_dtype_name((fg_dtype)dt));
    const char *what = W("attention_forward %s", name);
    BOTH(what, V->attention_forward(S, Q, dt, &d, X(qkv), X(y), X(lse), X(ws), E));
    compare(what, y, rows * c, dt, tol_of(dt));
    compare(W("attention_forward %s (lse)", name), lse, lse_n, FG_F32, 1e-5);
    pmirror(y);
    pmirror(lse);
    pair dy = prandom(rows * c, dt, -1, 1), dqkv = pnew(rows * cqkv * dtype_size(dt));
    ppoison(dqkv);
    what = W("attention_backward %s", name);
    BOTH(what, V->attention_backward(S, Q, dt, &d, X(qkv), X(y), X(lse), X(dy), X(dqkv), X(ws),
                                     E));
    compare(what, dqkv, rows * cqkv, dt, tol_of(dt));
    if (dropout == 0.0f)
        decode_case(dt, &d, qkv, ws, name);
    release_all();
}

static void attention_case(uint32_t dt, int batch, int seq, int heads, int head_dim,
                           int causal, float dropout)
{
    attention_case_kv(dt, batch, seq, heads, heads, head_dim, causal, dropout);
}

void test_attention(void)
{
    /* B, T, H, D: one position; odd T and head sizes; T past one key tile (32) and not a
     * multiple of it; GPT-2's head size; the largest head size */
    static const int shapes[][4] = { { 1, 1, 1, 1 }, { 2, 7, 3, 5 }, { 1, 37, 2, 17 },
                                     { 2, 64, 2, 32 }, { 1, 70, 1, 64 }, { 1, 33, 1, 128 } };
    static const uint32_t dts[] = { FG_F32, FG_BF16, FG_F16 };
    for (int x = 0; x < 3; x++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int causal = 0; causal < 2; causal++)
                attention_case(dts[x], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
                               causal, 0.0f);
    /* attention dropout: the CPU's draws, position by position */
    attention_case(FG_F32, 2, 37, 2, 17, 1, 0.2f);
    attention_case(FG_F32, 1, 40, 3, 8, 0, 0.5f);
    attention_case(FG_BF16, 1, 33, 2, 16, 1, 0.1f);
}

/* f32 attention on batched gemms: the CUDA backend runs this group with --set
 * attention=gemm (cudaemu.parity.attention_gemm, cuda.parity.attention_gemm), where a call
 * the gemms do not run fails instead of falling back to the kernels. One position, odd T
 * and head sizes, several heads per gemm, GPT-2's head size, the largest head size. */
void test_attention_gemm(void)
{
    static const int shapes[][4] = { { 1, 1, 1, 1 },   { 2, 7, 3, 5 },  { 1, 37, 2, 17 },
                                     { 2, 64, 4, 32 }, { 3, 70, 2, 64 }, { 1, 33, 1, 128 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int causal = 0; causal < 2; causal++)
            attention_case(FG_F32, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
                           causal, 0.0f);
}

/* The shapes cuDNN's fused attention (SDPA) takes: head sizes multiples of 8 up to 128, f16
 * and bf16, odd and even T, one query row, causal or not. The CUDA backend runs this group
 * with --set attention=cudnn (cudaemu.parity.attention_fused, cuda.parity.attention_fused):
 * a call cuDNN does not run fails instead of falling back to the kernels. */
void test_attention_fused(void)
{
    static const int shapes[][4] = { { 2, 7, 3, 8 },   { 1, 33, 2, 16 }, { 1, 1, 2, 16 },
                                     { 2, 64, 2, 64 }, { 1, 37, 1, 128 }, { 2, 40, 1, 128 } };
    static const uint32_t dts[] = { FG_BF16, FG_F16 };
    for (int x = 0; x < 2; x++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int causal = 0; causal < 2; causal++)
                attention_case(dts[x], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
                               causal, 0.0f);
}
