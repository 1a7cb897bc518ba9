/* The optim_fused group (ABI 1.5): grad_clip_coef and the fused sgd/adamw updates, every
 * mix of f32, bf16 and f16 parameters, gradients and working copy, odd sizes, with and
 * without a device gradient scale and a working copy. Each is compared with the CPU
 * backend (the harness's tolerance, bitwise for the CPU itself) and, on each backend, with
 * the unfused sequence it replaces (scale, sgd_update/adamw_update, cast): bitwise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"

static const uint32_t dtypes[] = { FG_F32, FG_BF16, FG_F16 };
/* every mix at the small sizes; the large one (many blocks) with one dtype throughout */
static const size_t sizes[] = { 1, 999, 65537 };

/* A second pair holding a's bytes on both sides (the tested side downloaded). */
static pair pcopy(pair a)
{
    pair b = pnew(a.bytes);
    void *h = malloc(a.bytes ? a.bytes : 1);
    download(a, h);
    memcpy(b.c, a.c, a.bytes);
    fg_error e = { 0 };
    if (P.dut->copy(P.ds, P.dq, b.g, 0, h, -1, a.bytes, &e) != FG_OK)
        fail("uploading a copy: %s", e.message);
    free(h);
    return b;
}

/* The fused result x and the unfused one y hold the same bytes, on each backend. */
static void same_bytes(const char *what, pair x, pair y)
{
    void *hx = malloc(x.bytes ? x.bytes : 1), *hy = malloc(y.bytes ? y.bytes : 1);
    download(x, hx);
    download(y, hy);
    checks += 2;
    if (memcmp(x.c, y.c, x.bytes) != 0)
        fail("%s: the CPU backend's fused op differs from its unfused sequence", what);
    if (memcmp(hx, hy, x.bytes) != 0)
        fail("%s: %s's fused op differs from its unfused sequence", what, P.dut_name);
    free(hx);
    free(hy);
}

typedef struct optim_case {
    int adamw;
    uint32_t pt, gt, wt;
    size_t n;
    int scaled, with_work;
    float scale;
} optim_case;

static fg_sgd_args sgd_args(void)
{
    fg_sgd_args a = { sizeof a, 0.05f, 0.9f, 0.0f, 0.01f, 1, 0, NULL, NULL };
    return a;
}

static fg_adamw_args adamw_args(void)
{
    fg_adamw_args a = { sizeof a, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3, NULL, NULL };
    return a;
}

static void optim_case_run(const optim_case *k)
{
    size_t n = k->n;
    char name[160];
    snprintf(name, sizeof name, "%s p=%s g=%s w=%s n=%zu scale=%s work=%s",
             k->adamw ? "adamw" : "sgd", fg_dtype_name((fg_dtype)k->pt),
             fg_dtype_name((fg_dtype)k->gt), fg_dtype_name((fg_dtype)k->wt), n,
             k->scaled ? "device" : "NULL", k->with_work ? "yes" : "NULL");
    pair p = prandom(n, k->pt, -1, 1), g = prandom(n, k->gt, -2, 2);
    pair m = prandom(n, FG_F32, -0.1, 0.1), v = prandom(n, FG_F32, 0, 0.01);
    pair w = pfill(n, k->wt, 0.0f), gs = pfill(1, FG_F32, k->scale);
    pair p2 = pcopy(p), g2 = pcopy(g), m2 = pcopy(m), v2 = pcopy(v), w2 = pcopy(w);
    pair g0 = pcopy(g);
    fg_sgd_args sa = sgd_args();
    fg_adamw_args aa = adamw_args();
    int sc = k->scaled, wk = k->with_work;
    if (k->adamw)
        BOTH(name, V->adamw_fused(S, Q, k->pt, k->gt, k->wt, &aa, X(p), X(g), X(m), X(v),
                                  (const float *)XN(sc, gs), XN(wk, w), n, E));
    else
        BOTH(name, V->sgd_fused(S, Q, k->pt, k->gt, k->wt, &sa, X(p), X(g), X(m),
                                (const float *)XN(sc, gs), XN(wk, w), n, E));
    if (P.skip_outputs)
        return;
    compare(name, p, n, k->pt, tol_of(k->pt) + tol_of(k->gt));
    compare(W("%s (state)", name), m, n, FG_F32, tol_of(k->gt));
    if (wk)
        compare(W("%s (working copy)", name), w, n, k->wt, tol_of(k->wt) + tol_of(k->pt));
    /* the unfused sequence on the copies */
    if (sc)
        BOTH(name, V->scale(S, Q, k->gt, X(g2), k->scale, n, E));
    if (k->adamw)
        BOTH(name, V->adamw_update(S, Q, k->pt, k->gt, &aa, X(p2), X(g2), X(m2), X(v2), n, E));
    else
        BOTH(name, V->sgd_update(S, Q, k->pt, k->gt, &sa, X(p2), X(g2), X(m2), n, E));
    if (wk)
        BOTH(name, V->cast(S, Q, k->wt, k->pt, X(w2), X(p2), n, E));
    same_bytes(W("%s (params)", name), p, p2);
    same_bytes(W("%s (state)", name), m, m2);
    if (k->adamw)
        same_bytes(W("%s (v)", name), v, v2);
    if (wk)
        same_bytes(W("%s (working copy)", name), w, w2);
    same_bytes(W("%s (gradients read, not written)", name), g, g0);
}

/* grad_clip_coef: the sum of squares as sum_squares', the factor the host formula gives
 * from that sum, bitwise; 1 when the norm is below max_norm; NaN gradients give 1 (the
 * host's "c < 1" is false for NaN). */
static void clip_case(uint32_t gt, size_t n, double max_norm, int nan_at)
{
    char name[160];
    snprintf(name, sizeof name, "grad_clip_coef %s n=%zu max_norm=%g%s",
             fg_dtype_name((fg_dtype)gt), n, max_norm, nan_at >= 0 ? " with a NaN" : "");
    pair g = prandom(n, gt, -1, 1), out = pfill(2, FG_F32, 0.0f), ref = pfill(1, FG_F32, 0.0f);
    if (nan_at >= 0) {
        memset((char *)g.c + (size_t)nan_at * dtype_size(gt), 0xff, dtype_size(gt));
        pmirror(g);
    }
    BOTH(name, V->grad_clip_coef(S, Q, gt, X(g), n, max_norm, (float *)X(out),
                                 (float *)X(out) + 1, E));
    BOTH(name, V->sum_squares(S, Q, gt, X(g), n, (float *)X(ref), E));
    if (P.skip_outputs)
        return;
    float h[2], r;
    download(out, h);
    download(ref, &r);
    const float *c = out.c;
    for (int side = 0; side < 2; side++) {
        const float *o = side ? h : c;
        float sq_ref = side ? r : *(const float *)ref.c;
        double cc = max_norm / (sqrt((double)o[0]) + 1e-6);
        float want = cc < 1.0 ? (float)cc : 1.0f;
        checks += 2;
        if (memcmp(&o[0], &sq_ref, sizeof sq_ref) != 0)
            fail("%s: %s: sum of squares %.9g, sum_squares gives %.9g", name,
                 side ? P.dut_name : "cpu", (double)o[0], (double)sq_ref);
        if (memcmp(&o[1], &want, sizeof want) != 0)
            fail("%s: %s: factor %.9g, the host formula gives %.9g from its sum", name,
                 side ? P.dut_name : "cpu", (double)o[1], (double)want);
        if (nan_at >= 0 && o[1] != 1.0f)
            fail("%s: %s: factor %.9g with a NaN gradient, want 1", name,
                 side ? P.dut_name : "cpu", (double)o[1]);
    }
    compare(name, out, 2, FG_F32, 1e-5);
}

void test_optim_fused(void)
{
    for (size_t d = 0; d < 3; d++) {
        clip_case(dtypes[d], 999, 0.5, -1);    /* clipped */
        clip_case(dtypes[d], 65537, 1e6, -1);  /* below max_norm: 1 */
        clip_case(dtypes[d], 17, 1.0, 5);      /* NaN */
        clip_case(dtypes[d], 0, 1.0, -1);      /* nothing: sum 0, factor 1 */
        release_all();
    }
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int mix = 0; mix < 27; mix++) {
            if (sizes[si] > 999 && mix % 13 != 0)
                continue; /* 0, 13, 26: f32, bf16, f16 throughout */
            for (int adamw = 0; adamw < 2; adamw++)
                for (int var = 0; var < 3; var++) {
                    optim_case k = { adamw, dtypes[mix % 3], dtypes[mix / 3 % 3],
                                     dtypes[mix / 9], sizes[si], var != 0, var != 1,
                                     var == 2 ? 1.0f : 0.37f };
                    optim_case_run(&k);
                    release_all();
                }
        }
}
