/* gemm_fp8 (ABI 1.9) of the backend under test against a CPU reference of the same
 * roundings, written here from the formats' definitions (the CPU backend has no fp8 op):
 * each operand's scale from its amax history (fp8_max / amax / 2^margin in f32, kept when
 * amax is 0 or not finite), x * scale rounded to E4M3 / E5M2 (nearest even, saturated to
 * 448 / 57344, NaN kept), the history shifted and the tensor's amax pushed, the product of
 * the fp8 values summed in f32 in k order, times 1/scale_b then 1/scale_a, plus beta C,
 * rounded into C's dtype.
 *   edges: every rounding edge (ties, subnormals, the largest finite values, saturation,
 *     infinities, NaN, -0) through the op at scale 1, C = the quantized a, bitwise;
 *   random: the four transposes, bf16 operands, bf16 and f32 C, beta 0 and 1, both
 *     formats, amax max / most_recent, margins 0 and 1, three calls in a row: the scale
 *     pairs and histories bitwise, C within 1e-6 (f32) or 4e-3 (bf16) of the reference;
 *     a call without the update flags leaves the state alone and reuses the scale;
 *   refusal: m = 24 is FG_UNAVAILABLE naming the multiple of 16. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"

static double fp8_max(uint32_t f)
{
    return f == FG_F8E4M3 ? 448.0 : 57344.0;
}

/* the formats' definition: nearest even on the grid of x's binade, saturating */
static float ref_fp8(float x, uint32_t f)
{
    int mbits = f == FG_F8E4M3 ? 3 : 2, bias = f == FG_F8E4M3 ? 7 : 15;
    if (isnan(x))
        return NAN;
    double a = fabs((double)x), max = fp8_max(f);
    if (isinf(x) || a > max)
        return (float)copysign(max, x);
    if (a == 0.0)
        return x;
    int e;
    frexp(a, &e);
    e -= 1;
    if (e < 1 - bias)
        e = 1 - bias;
    double q = ldexp(1.0, e - mbits), v = nearbyint(a / q) * q;
    return (float)copysign(v > max ? max : v, x);
}

static float round_to(float v, uint32_t dt)
{
    if (dt == FG_F32 || isnan(v))
        return v;
    uint32_t u;
    memcpy(&u, &v, 4);
    if (dt == FG_BF16) {
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&v, &u, 4);
        return v;
    }
    return v; /* f16 is not used here */
}

static void store(void *base, uint32_t dt, size_t i, float v)
{
    if (dt == FG_F32) {
        ((float *)base)[i] = v;
        return;
    }
    uint32_t u;
    v = round_to(v, FG_BF16);
    memcpy(&u, &v, 4);
    ((uint16_t *)base)[i] = (uint16_t)(u >> 16);
}

/* One operand's reference state: {scale, 1/scale} and the history. */
typedef struct ref_state {
    float scale[2];
    float hist[8];
} ref_state;

static void ref_update(ref_state *s, int len, int algo, float margin, uint32_t f)
{
    float amax = s->hist[0];
    for (int i = 1; algo == FG_FP8_AMAX_MAX && i < len; i++)
        amax = s->hist[i] > amax ? s->hist[i] : amax;
    if (amax > 0.0f && isfinite(amax))
        s->scale[0] = (float)fp8_max(f) / amax / exp2f(margin);
    s->scale[1] = 1.0f / s->scale[0];
    memmove(s->hist + 1, s->hist, (size_t)(len - 1) * sizeof(float));
    s->hist[0] = 0.0f;
}

/* x (rows, k) as the gemm reads it (op applied), quantized; amax (max |x|, NaN wins) */
static float *ref_quantize(const float *x, int rows, int k, int trans, int ld, float scale,
                           uint32_t f, float *amax)
{
    float *q = malloc((size_t)rows * (size_t)k * sizeof *q), m = 0.0f;
    for (int r = 0; r < rows; r++)
        for (int p = 0; p < k; p++) {
            float v = trans ? x[(size_t)p * (size_t)ld + (size_t)r] : x[(size_t)r * (size_t)ld + (size_t)p];
            q[(size_t)r * (size_t)k + (size_t)p] = ref_fp8(v * scale, f);
            float a = fabsf(v);
            m = isnan(a) || isnan(m) ? NAN : a > m ? a : m;
        }
    *amax = m;
    return q;
}

typedef struct fp8_case {
    uint32_t ab, c, fa, fb;
    int trans_a, trans_b, m, n, k, len, algo, update;
    float margin, beta;
} fp8_case;

/* Runs the op on the backend under test and the reference; compares. a and b are the
 * operands' values as stored (already rounded to ab), cold C's start. */
static void run_case(const fp8_case *t, const float *a, const float *b, const float *cold,
                     ref_state *ra, ref_state *rb, double tol, const char *what)
{
    int lda = t->trans_a ? t->m : t->k, ldb = t->trans_b ? t->k : t->n;
    size_t an = (size_t)t->m * (size_t)t->k, bn = (size_t)t->n * (size_t)t->k;
    size_t cn = (size_t)t->m * (size_t)t->n, es = dtype_size(t->ab), cs = dtype_size(t->c);
    char *ha = malloc(an * es), *hb = malloc(bn * es), *hc = malloc(cn * cs), *got = malloc(cn * cs);
    for (size_t i = 0; i < an; i++)
        store(ha, t->ab, i, a[i]);
    for (size_t i = 0; i < bn; i++)
        store(hb, t->ab, i, b[i]);
    for (size_t i = 0; i < cn; i++)
        store(hc, t->c, i, cold[i]);
    pair pa = pnew(an * es), pb = pnew(bn * es), pc = pnew(cn * cs), st = pnew(4 * 20);
    pput(pa, ha), pput(pb, hb), pput(pc, hc);
    float state[20];
    memcpy(state, ra->scale, 8), memcpy(state + 2, ra->hist, 32);
    memcpy(state + 10, rb->scale, 8), memcpy(state + 12, rb->hist, 32);
    pput(st, state);
    float *sg = st.g;
    fg_fp8_gemm_args f = { sizeof f, t->fa, t->fb, t->len, t->algo, t->margin, sg, sg + 2,
                           sg + 10, sg + 12, t->update, t->update };
    fg_error e = {0};
    fg_status s = P.dut->gemm_fp8(P.ds, P.dq, t->ab, t->c, t->trans_a, t->trans_b, t->m, t->n,
                                  t->k, pa.g, lda, pb.g, ldb, t->beta, pc.g, t->n, &f, &e);
    checks++;
    if (s != FG_OK) {
        fail("%s: gemm_fp8 failed: %s", what, e.message);
        goto out;
    }
    /* the reference */
    if (t->update) {
        ref_update(ra, t->len, t->algo, t->margin, t->fa);
        ref_update(rb, t->len, t->algo, t->margin, t->fb);
    }
    float amax_a, amax_b;
    float *qa = ref_quantize(a, t->m, t->k, t->trans_a, lda, ra->scale[0], t->fa, &amax_a);
    float *qb = ref_quantize(b, t->n, t->k, !t->trans_b, ldb, rb->scale[0], t->fb, &amax_b);
    if (t->update)
        ra->hist[0] = amax_a, rb->hist[0] = amax_b;
    float *want = malloc(cn * sizeof *want), *have = malloc(cn * sizeof *have);
    for (int i = 0; i < t->m; i++)
        for (int j = 0; j < t->n; j++) {
            float acc = 0.0f;
            for (int p = 0; p < t->k; p++)
                acc += qb[(size_t)j * (size_t)t->k + (size_t)p] * qa[(size_t)i * (size_t)t->k + (size_t)p];
            float v = 1.0f * acc;
            v = v * rb->scale[1] * ra->scale[1];
            if (t->beta != 0.0f)
                v += t->beta * (float)to_double(hc, t->c, (size_t)i * (size_t)t->n + (size_t)j);
            want[(size_t)i * (size_t)t->n + (size_t)j] = round_to(v, t->c);
        }
    download(pc, got);
    double num = 0, den = 0;
    int nan_mismatch = 0;
    for (size_t i = 0; i < cn; i++) {
        have[i] = (float)to_double(got, t->c, i);
        if (isnan(want[i]) != isnan(have[i]))
            nan_mismatch++;
        else if (!isnan(want[i])) {
            num += (have[i] - want[i]) * (double)(have[i] - want[i]);
            den += (double)want[i] * want[i];
        }
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    checks++;
    if (nan_mismatch || rel > tol)
        fail("%s: C differs from the reference: relative %.3g (tolerance %.3g), %d NaN "
             "mismatches", what, rel, tol, nan_mismatch);
    float back[20];
    download(st, back);
    checks++;
    if (memcmp(back, ra->scale, 8) || memcmp(back + 2, ra->hist, 4 * (size_t)t->len) ||
        memcmp(back + 10, rb->scale, 8) || memcmp(back + 12, rb->hist, 4 * (size_t)t->len))
        fail("%s: scales or histories differ: a {%a, %a} [%a %a], want {%a, %a} [%a %a]; b {%a, "
             "%a} [%a], want {%a, %a} [%a]", what, back[0], back[1], back[2], back[3],
             ra->scale[0], ra->scale[1], ra->hist[0], ra->hist[1], back[10], back[11], back[12],
             rb->scale[0], rb->scale[1], rb->hist[0]);
    free(qa), free(qb), free(want), free(have);
out:
    free(ha), free(hb), free(hc), free(got);
    release_all();
}

/* Every rounding edge of format fa in a (16 x 16, f32), b the E4M3 identity; scale 1. */
static void edges(uint32_t fa)
{
    static const float e4m3_vals[] = { 448, 460, 464, 1e6f, -1e6f, 1.0625f, 1.1875f, 0.001953125f,
                                       0.0009765625f, -0.0009765625f, 0.0029296875f,
                                       0.0048828125f, 0.0068359375f, 0.0146484375f, -0.0f, 3.0f };
    static const float e5m2_vals[] = { 57344, 61439, 61440, 1e9f, -1e9f, 1.125f, 1.375f,
                                       1.52587890625e-05f, 7.62939453125e-06f, 2.288818359375e-05f,
                                       6.103515625e-05f, -7.62939453125e-06f, 0.1f, -0.0f, 3.0f, 5.0f };
    const float *v = fa == FG_F8E4M3 ? e4m3_vals : e5m2_vals;
    float a[256], b[256], c[256] = {0};
    for (int i = 0; i < 256; i++) {
        a[i] = v[(i + i / 16) % 16] * (i / 16 % 2 ? 1.0f : -1.0f);
        b[i] = i / 16 == i % 16 ? 1.0f : 0.0f;
    }
    fp8_case t = { FG_F32, FG_F32, fa, FG_F8E4M3, 0, 1, 16, 16, 16, 2, FG_FP8_AMAX_MAX, 1, 0, 0 };
    ref_state ra = { { 1, 1 }, { (float)fp8_max(fa), 0 } }, rb = { { 1, 1 }, { 448, 0 } };
    char what[64];
    snprintf(what, sizeof what, "fp8 edges %s", fa == FG_F8E4M3 ? "e4m3" : "e5m2");
    run_case(&t, a, b, c, &ra, &rb, 0.0, what);
    /* infinities and NaN, each in its own row (a NaN product spreads over its row) */
    for (int i = 0; i < 256; i++)
        a[i] = i / 16 == 0 ? INFINITY : i / 16 == 1 ? -INFINITY : i / 16 == 2 && i % 16 == 5 ? NAN : 1.0f;
    t.update = 0; /* the scale stays 1 */
    snprintf(what, sizeof what, "fp8 inf/nan %s", fa == FG_F8E4M3 ? "e4m3" : "e5m2");
    run_case(&t, a, b, c, &ra, &rb, 0.0, what);
    t.update = 1;
    snprintf(what, sizeof what, "fp8 nan amax %s", fa == FG_F8E4M3 ? "e4m3" : "e5m2");
    run_case(&t, a, b, c, &ra, &rb, 0.0, what); /* amax NaN: the next scale is kept */
    run_case(&t, a, b, c, &ra, &rb, 0.0, what);
}

static float *random_vals(size_t n, double lo, double hi, uint32_t dt)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = round_to((float)rng_uniform(lo, hi), dt);
    return x;
}

static void random_cases(void)
{
    int variant = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int ci = 0; ci < 2; ci++, variant++) {
                uint32_t cdt = ci ? FG_F32 : FG_BF16;
                fp8_case t = { FG_BF16, cdt, variant % 2 ? FG_F8E5M2 : FG_F8E4M3, FG_F8E4M3, ta,
                               tb, 32, 48, 64, 3, variant % 3 ? FG_FP8_AMAX_MAX
                                                              : FG_FP8_AMAX_MOST_RECENT,
                               1, (float)(variant % 2), variant % 4 == 1 ? 1.0f : 0.0f };
                ref_state ra = { { 1, 1 }, { 0 } }, rb = { { 1, 1 }, { 0 } };
                for (int call = 0; call < 4; call++) {
                    double range = call == 1 ? 1e-3 : call == 2 ? 40.0 : 2.0;
                    float *a = random_vals((size_t)t.m * t.k, -range, range, FG_BF16);
                    float *b = random_vals((size_t)t.n * t.k, -1.5, 1.5, FG_BF16);
                    float *c = random_vals((size_t)t.m * t.n, -1, 1, cdt);
                    t.update = call != 3; /* the last reuses the scales */
                    char what[96];
                    snprintf(what, sizeof what, "fp8 trans %d/%d c %s call %d", ta, tb,
                             cdt == FG_F32 ? "f32" : "bf16", call);
                    run_case(&t, a, b, c, &ra, &rb, cdt == FG_F32 ? 1e-6 : 4e-3, what);
                    free(a), free(b), free(c);
                }
            }
}

static void refusal(void)
{
    pair pa = pnew(24 * 16 * 2), pb = pnew(16 * 16 * 2), pc = pnew(24 * 16 * 2), st = pnew(80);
    float *sg = st.g;
    fg_fp8_gemm_args f = { sizeof f, FG_F8E4M3, FG_F8E4M3, 1, 0, 0, sg, sg + 2, sg + 4, sg + 6,
                           1, 1 };
    fg_error e = {0};
    fg_status s = P.dut->gemm_fp8(P.ds, P.dq, FG_BF16, FG_BF16, 0, 1, 24, 16, 16, pa.g, 16,
                                  pb.g, 16, 0.0f, pc.g, 16, &f, &e);
    checks++;
    if (s != FG_UNAVAILABLE || !strstr(e.message, "multiple of 16"))
        fail("fp8 m = 24: status %d, \"%s\"; want FG_UNAVAILABLE naming the multiple of 16", s,
             e.message);
    release_all();
}

void test_fp8(void)
{
    if (!fg_backend_can(P.dut, P.ds, FG_OP_GEMM_FP8, (const uint32_t[]){FG_BF16, FG_BF16})) {
        printf("fp8: backend.%s has no gemm_fp8: skipped\n", P.dut_name);
        return;
    }
    rng_seed(8);
    edges(FG_F8E4M3);
    edges(FG_F8E5M2);
    random_cases();
    refusal();
}
