/* The gemm_epilogue group (ABI 1.5): every epilogue against the CPU backend, f32 / bf16 / f16
 * and the transformer's mixes, odd sizes (m, n, k not multiples of 8), padded leading
 * dimensions, aux leading dimensions that cuBLASLt takes (a multiple of 8) and ones it does
 * not (the CUDA backend's own kernels then), accumulating bias gradients. The CPU backend's
 * op is also checked bit for bit against the separate ops the model ran before it (gemm_bias,
 * activation_forward/backward, gemm, bias_grad), so a model that switches to it keeps its
 * digests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

typedef struct epi_case {
    int epi, m, n, k, ta, tb, pad, aux_pad, accumulate;
    uint32_t ab, c, bias;
} epi_case;

static const char *epi_name(int e)
{
    return e == FG_EPI_BIAS ? "bias" : e == FG_EPI_GELU_AUX_BIAS ? "gelu_aux_bias"
         : e == FG_EPI_DGELU_BGRAD ? "dgelu_bgrad" : "bgradb";
}

static double max3(double a, double b, double c)
{
    double m = a > b ? a : b;
    return m > c ? m : c;
}

/* A copy of p's CPU side (its .c only), for the separate ops' results. */
static pair host_copy(pair p)
{
    pair q = pnew(p.bytes);
    memcpy(q.c, p.c, p.bytes);
    return q;
}

/* The tested side's (rows, cols; ld) region poisoned, the gaps of a wider ld kept. */
static void poison_rows(pair p, int rows, int cols, int ld, size_t elem)
{
    unsigned char *h = malloc(p.bytes);
    memcpy(h, p.c, p.bytes);
    for (int r = 0; r < rows; r++)
        memset(h + (size_t)r * (size_t)ld * elem, 0xFF, (size_t)cols * elem);
    pair g = p;
    g.c = h;
    pmirror(g);
    free(h);
}

static void bitwise(const char *what, const char *part, pair fused, pair separate)
{
    checks++;
    if (memcmp(fused.c, separate.c, fused.bytes) != 0)
        fail("%s: the CPU backend's %s differs from the separate ops' bits", what, part);
}

/* The CPU backend's separate ops, as the model ran them (packed rows only). */
static void separate_ops(const epi_case *t, const char *what, pair a, int lda, pair b, int ldb,
                         pair c, pair aux, pair bias)
{
    const fg_backend_vtable *V = P.ref;
    void *S = P.rs, *Q = P.rq;
    fg_error e = { 0 };
    fg_status st = FG_OK;
    size_t mn = (size_t)t->m * (size_t)t->n;
    switch (t->epi) {
    case FG_EPI_BIAS:
    case FG_EPI_GELU_AUX_BIAS: {
        int gelu = t->epi == FG_EPI_GELU_AUX_BIAS;
        st = V->gemm_bias(S, Q, t->ab, t->ab, t->c, t->ta, t->tb, t->m, t->n, t->k, a.c, lda, b.c,
                          ldb, bias.c, gelu ? aux.c : c.c, t->n, &e);
        if (st == FG_OK && gelu)
            st = V->activation_forward(S, Q, t->c, FG_ACT_GELU, aux.c, c.c, mn, &e);
        break;
    }
    case FG_EPI_DGELU_BGRAD:
        st = V->gemm(S, Q, t->ab, t->ab, t->c, t->ta, t->tb, t->m, t->n, t->k, 1.0f, a.c, lda,
                     b.c, ldb, 0.0f, c.c, t->n, &e);
        if (st == FG_OK)
            st = V->activation_backward(S, Q, t->c, FG_ACT_GELU, aux.c, NULL, c.c, c.c, mn, &e);
        if (st == FG_OK)
            st = V->bias_grad(S, Q, t->bias, t->c, bias.c, c.c, t->m, t->n, 1, t->accumulate, &e);
        break;
    default:
        st = V->gemm(S, Q, t->ab, t->ab, t->c, t->ta, t->tb, t->m, t->n, t->k, 1.0f, a.c, lda,
                     b.c, ldb, t->accumulate ? 1.0f : 0.0f, c.c, t->n, &e);
        if (st == FG_OK) /* a linear's dy (k, m): its column sums */
            st = V->bias_grad(S, Q, t->bias, t->ab, bias.c, a.c, t->k, t->m, 1, t->accumulate, &e);
    }
    checks++;
    if (st != FG_OK)
        fail("%s: the separate ops failed: %s", what, e.message);
}

static void epi_run(const epi_case *t)
{
    int a_rows = t->ta ? t->k : t->m, a_cols = t->ta ? t->m : t->k;
    int b_rows = t->tb ? t->n : t->k, b_cols = t->tb ? t->k : t->n;
    /* an untransposed A of bgradb keeps lda == k (the CUDA fallback sums packed rows) */
    int lda = a_cols + (t->epi == FG_EPI_BGRADB && !t->ta ? 0 : t->pad);
    int ldb = b_cols + t->pad, ldc = t->n + t->pad;
    int ldaux = t->n + t->aux_pad;
    int gelu = t->epi == FG_EPI_GELU_AUX_BIAS || t->epi == FG_EPI_DGELU_BGRAD;
    int bias_len = t->epi == FG_EPI_BGRADB ? t->m : t->n;
    pair a = prandom((size_t)a_rows * (size_t)lda, t->ab, -1, 1);
    pair b = prandom((size_t)b_rows * (size_t)ldb, t->ab, -1, 1);
    pair c = prandom((size_t)t->m * (size_t)ldc, t->c, -1, 1);
    pair aux = prandom((size_t)t->m * (size_t)ldaux, t->c, -3, 3);
    pair bias = prandom((size_t)bias_len, t->bias, -2, 2);
    pair c0 = host_copy(c), aux0 = host_copy(aux), bias0 = host_copy(bias);
    if (!t->accumulate)
        poison_rows(c, t->m, t->n, ldc, dtype_size(t->c));
    if (t->epi == FG_EPI_GELU_AUX_BIAS)
        poison_rows(aux, t->m, t->n, ldaux, dtype_size(t->c));
    if (t->epi != FG_EPI_BIAS && t->epi != FG_EPI_GELU_AUX_BIAS && !t->accumulate)
        ppoison(bias);
    const char *what = W("gemm_epilogue %s m=%d n=%d k=%d ta=%d tb=%d pad=%d ldaux=%d acc=%d "
                         "%s->%s bias %s", epi_name(t->epi), t->m, t->n, t->k, t->ta, t->tb,
                         t->pad, gelu ? ldaux : 0, t->accumulate, fg_dtype_name((fg_dtype)t->ab),
                         fg_dtype_name((fg_dtype)t->c), fg_dtype_name((fg_dtype)t->bias));
    BOTH(what, V->gemm_epilogue(S, Q, t->ab, t->c, t->bias, t->epi, t->ta, t->tb, t->m, t->n,
                                t->k, X(a), lda, X(b), ldb, X(c), ldc, XN(gelu, aux), ldaux,
                                X(bias), t->accumulate, E));
    if (P.skip_outputs)
        return;
    char name[200];
    snprintf(name, sizeof name, "%.190s", what);
    double tol = max3(tol_of(t->ab), tol_of(t->c), tol_of(t->bias));
    /* sums of k products: a few times a single output's error */
    compare(name, c, (size_t)t->m * (size_t)ldc, t->c, tol);
    if (t->epi == FG_EPI_GELU_AUX_BIAS)
        compare(W("%.200s (aux)", name), aux, (size_t)t->m * (size_t)ldaux, t->c, tol);
    if (t->epi == FG_EPI_DGELU_BGRAD || t->epi == FG_EPI_BGRADB)
        compare(W("%.200s (bias gradient)", name), bias, (size_t)bias_len, t->bias, tol);
    /* the CPU backend's op against its separate ops, where the model used them: packed
     * rows, and for bgradb a linear's dy (transposed, packed) */
    int packed = t->pad == 0 && (!gelu || t->aux_pad == 0);
    if (!packed || (t->epi == FG_EPI_BGRADB && !t->ta) ||
        (t->epi <= FG_EPI_GELU_AUX_BIAS && t->bias != t->ab))
        return;
    separate_ops(t, name, a, lda, b, ldb, c0, aux0, bias0);
    bitwise(name, "C", c, c0);
    if (t->epi == FG_EPI_GELU_AUX_BIAS)
        bitwise(name, "aux", aux, aux0);
    if (t->epi == FG_EPI_DGELU_BGRAD || t->epi == FG_EPI_BGRADB)
        bitwise(name, "bias gradient", bias, bias0);
}

void test_gemm_epilogue(void)
{
    /* odd, and n a multiple of 8 (an aux cuBLASLt takes without padding) */
    static const int shapes[][3] = { { 5, 7, 3 }, { 13, 17, 19 }, { 33, 24, 40 }, { 64, 48, 72 } };
    /* ab, c, bias: the plain types, then the mixed precisions' (bias gradients in f32) */
    static const uint32_t fwd[][3] = { { FG_F32, FG_F32, FG_F32 }, { FG_BF16, FG_BF16, FG_BF16 },
                                       { FG_F16, FG_F16, FG_F16 }, { FG_BF16, FG_F32, FG_BF16 } };
    static const uint32_t bwd[][3] = { { FG_F32, FG_F32, FG_F32 }, { FG_BF16, FG_BF16, FG_BF16 },
                                       { FG_F16, FG_F16, FG_F16 }, { FG_BF16, FG_BF16, FG_F32 },
                                       { FG_BF16, FG_F32, FG_F32 }, { FG_F16, FG_F16, FG_F32 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        int aux8 = (n + 7) / 8 * 8 - n; /* to the next multiple of 8 */
        for (int v = 0; v < 4; v++) {
            int pad = v & 1 ? 3 : 0, aux_pad = v & 2 ? aux8 + 8 : aux8;
            for (size_t x = 0; x < sizeof fwd / sizeof fwd[0]; x++) {
                /* the model's fc (x W^T) and a plain A B */
                for (int tb = 0; tb < 2; tb++) {
                    epi_case b = { FG_EPI_BIAS, m, n, k, 0, !tb, pad, 0, 0, fwd[x][0],
                                   fwd[x][1], fwd[x][2] };
                    epi_run(&b);
                    epi_case g = { FG_EPI_GELU_AUX_BIAS, m, n, k, 0, !tb, pad,
                                   v == 0 && tb ? 0 : aux_pad, 0, fwd[x][0], fwd[x][1],
                                   fwd[x][2] };
                    epi_run(&g);
                    release_all();
                }
            }
            for (size_t x = 0; x < sizeof bwd / sizeof bwd[0]; x++)
                for (int acc = 0; acc < 2; acc++) {
                    /* the MLP's df = (dy W) * gelu'(f); a transposed A too */
                    epi_case d = { FG_EPI_DGELU_BGRAD, m, n, k, v == 3, 0, pad,
                                   v == 0 ? 0 : aux_pad, acc, bwd[x][0], bwd[x][1], bwd[x][2] };
                    epi_run(&d);
                    /* dW = dy^T x with db (the model's), and an untransposed A */
                    epi_case w = { FG_EPI_BGRADB, m, n, k, v != 3, v == 2, pad, 0, acc,
                                   bwd[x][0], bwd[x][1], bwd[x][2] };
                    epi_run(&w);
                    release_all();
                }
        }
    }
}
