/* The loss_scale group (ABI 1.10): the dynamic loss scaler on the device. loss_scale_update
 * through a sequence of steps (clean, inf, NaN, a finite gradient whose square overflows
 * f32, growth, hysteresis, the min_scale floor and the FLT_MAX cap) in f32, bf16 and f16:
 * at every step the gradients are bitwise the scale op's by 1 / (float)scale, the sum of
 * squares bitwise sum_squares', and the state (scale, growth tracker, hysteresis, skipped
 * steps, found_inf) bitwise what precision.fp16-mixed's host scaler (scaler.c, compiled in
 * here) does with the same finiteness; softmax_xent_backward_scaled bitwise
 * softmax_xent_backward with the host's factor; the fused updates with skip_dev set write
 * nothing, and with it clear equal the update without it. On each backend. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "parity_run.h"
#include "scaler.h"

static const uint32_t dtypes[] = { FG_F32, FG_BF16, FG_F16 };

/* What a step's gradients hold besides values in [-1, 1) times the scale. */
typedef enum inject { CLEAN, INF, NAN_AT, HUGE_FINITE } inject;

static void set_value(pair g, uint32_t dt, size_t i, float v)
{
    char *p = (char *)g.c + i * dtype_size(dt);
    if (dt == FG_F32) {
        memcpy(p, &v, 4);
        return;
    }
    uint32_t bits;
    memcpy(&bits, &v, 4);
    uint16_t h;
    if (dt == FG_BF16) {
        h = (uint16_t)(bits >> 16); /* inf and NaN keep their class truncated */
    } else if (isnan(v)) {
        h = 0x7e00;
    } else if (isinf(v)) {
        h = v > 0 ? 0x7c00 : 0xfc00;
    } else {
        h = 0x7bff; /* 65504: the largest f16 */
    }
    memcpy(p, &h, 2);
}

/* The state on both sides, downloaded from the tested one. */
static void read_state(pair st, fg_loss_scale_dev out[2])
{
    memcpy(&out[0], st.c, sizeof out[0]);
    download(st, &out[1]);
}

static void check_state(const char *what, const fg_loss_scale_dev *got, const char *side,
                        const fg_scaler *ref, int found)
{
    checks++;
    if (memcmp(&got->scale, &ref->s.scale, sizeof got->scale) != 0 ||
        got->growth_tracker != ref->s.growth_tracker ||
        got->hysteresis_left != ref->s.hysteresis_left ||
        got->skipped_steps != ref->s.skipped_steps || got->found_inf != found)
        fail("%s: %s: scale %.17g tracker %lld hysteresis %lld skipped %lld found_inf %lld; "
             "the host scaler: %.17g %lld %lld %lld %d", what, side, got->scale,
             (long long)got->growth_tracker, (long long)got->hysteresis_left,
             (long long)got->skipped_steps, (long long)got->found_inf, ref->s.scale,
             (long long)ref->s.growth_tracker, (long long)ref->s.hysteresis_left,
             (long long)ref->s.skipped_steps, found);
}

/* One step: gradients g (n of dt) made for the current scale, updated on both backends and
 * against the unfused sequence (scale, sum_squares) and the host scaler. */
static void step_case(const char *seq, int k, uint32_t dt, size_t n, inject what, pair st,
                      fg_scaler *ref, const fg_loss_scale_rule *rule)
{
    char name[200];
    snprintf(name, sizeof name, "loss_scale_update %s %s n=%zu step %d (%s)", seq,
             fg_dtype_name((fg_dtype)dt), n, k,
             what == CLEAN ? "clean" : what == INF ? "inf" : what == NAN_AT ? "NaN" : "huge");
    double s = ref->s.scale, lim = dt == FG_F16 && s > 1000.0 ? 1000.0 : s; /* f16's range */
    pair g = prandom(n, dt, -lim, lim);
    if (what != CLEAN && n) {
        float v = what == INF ? INFINITY : what == NAN_AT ? NAN : 3e38f;
        set_value(g, dt, n / 2, v);
        pmirror(g);
    }
    pair ref_g = pnew(g.bytes ? g.bytes : 1), sq = pfill(1, FG_F32, 0.0f),
         ref_sq = pfill(1, FG_F32, 0.0f);
    memcpy(ref_g.c, g.c, g.bytes);
    pmirror(ref_g);
    float inv = 1.0f / (float)s;
    BOTH(name, V->loss_scale_update(S, Q, dt, X(g), n, rule, (float *)X(sq),
                                    (fg_loss_scale_dev *)X(st), E));
    if (inv != 1.0f)
        BOTH(name, V->scale(S, Q, dt, X(ref_g), inv, n, E));
    BOTH(name, V->sum_squares(S, Q, dt, X(ref_g), n, (float *)X(ref_sq), E));
    if (P.skip_outputs)
        return;
    float host_sq = *(const float *)ref_sq.c;
    int found = !isfinite(host_sq);
    fg_scaler_update(ref, found);
    compare(W("%s: gradients", name), g, n, dt, tol_of(dt)); /* NaN payloads may differ */
    void *a = malloc(g.bytes ? g.bytes : 1), *b = malloc(g.bytes ? g.bytes : 1);
    download(g, a);
    download(ref_g, b);
    checks += 2;
    if (memcmp(g.c, ref_g.c, g.bytes) != 0)
        fail("%s: cpu: the gradients differ from the scale op's", name);
    if (memcmp(a, b, g.bytes) != 0)
        fail("%s: %s: the gradients differ from its scale op's", name, P.dut_name);
    free(a);
    free(b);
    float dsq, dref;
    download(sq, &dsq);
    download(ref_sq, &dref);
    checks += 2;
    if (memcmp(sq.c, ref_sq.c, 4) != 0 || memcmp(&dsq, &dref, 4) != 0)
        fail("%s: sum of squares cpu %.9g / %s %.9g, sum_squares gives %.9g / %.9g", name,
             (double)*(const float *)sq.c, P.dut_name, (double)dsq, (double)host_sq,
             (double)dref);
    fg_loss_scale_dev got[2];
    read_state(st, got);
    check_state(name, &got[0], "cpu", ref, found);
    check_state(name, &got[1], P.dut_name, ref, found);
    if (what == CLEAN && found)
        fail("%s: clean gradients reported as overflowing", name);
    /* f16 holds no value whose unscaled square overflows f32: its "huge" is 65504 */
    int must_find = what == INF || what == NAN_AT || (what == HUGE_FINITE && dt != FG_F16);
    if (must_find && n && !found)
        fail("%s: the overflow was not found", name);
}

/* A sequence from `init` under rule, with the host scaler as the reference. */
static void sequence(const char *seq, uint32_t dt, size_t n, double init,
                     const fg_loss_scale_rule *rule, const inject *steps, int count)
{
    fg_scaler_config cfg = { init, rule->growth_factor, rule->backoff_factor, rule->min_scale,
                             rule->growth_interval, rule->hysteresis };
    fg_scaler ref;
    fg_error e = { 0 };
    if (fg_scaler_init(&ref, &cfg, &e) != FG_OK)
        fail("%s: the host scaler refuses the rule: %s", seq, e.message);
    fg_loss_scale_dev d0 = { init, 0, rule->hysteresis, 0, 0 };
    pair st = pnew(sizeof d0);
    pput(st, &d0);
    for (int k = 0; k < count; k++)
        step_case(seq, k, dt, n, steps[k], st, &ref, rule);
}

static void scaler_sequences(void)
{
    static const inject mixed[] = { CLEAN, CLEAN, CLEAN, INF, CLEAN, NAN_AT, NAN_AT, CLEAN,
                                    HUGE_FINITE, CLEAN, CLEAN, CLEAN, CLEAN };
    static const inject floor_steps[] = { INF, INF, INF, CLEAN };
    static const inject cap_steps[] = { CLEAN, CLEAN, CLEAN };
    fg_loss_scale_rule rule = { sizeof rule, 2.0, 0.5, 1.0, 3, 2 };
    fg_loss_scale_rule floor_rule = { sizeof rule, 2.0, 0.25, 1.0, 2000, 1 };
    fg_loss_scale_rule cap_rule = { sizeof rule, 3.0, 0.5, 1.0, 1, 1 };
    for (size_t d = 0; d < 3; d++) {
        uint32_t dt = dtypes[d];
        sequence("mixed", dt, 999, 65536.0, &rule, mixed, 13);
        sequence("mixed large", dt, 65537, 1024.0, &rule, mixed, 6);
        sequence("min_scale floor", dt, 17, 3.0, &floor_rule, floor_steps, 4);
        sequence("scale 1", dt, 33, 1.0, &cap_rule, cap_steps, 1); /* factor 1: untouched */
        release_all();
    }
    sequence("FLT_MAX cap", FG_F32, 7, 1e38, &cap_rule, cap_steps, 3);
    sequence("empty", FG_F32, 0, 8.0, &rule, cap_steps, 3);
    release_all();
}

/* softmax_xent_backward_scaled against softmax_xent_backward given the host's factor. */
static void xent_case(uint32_t dt, int rows, int classes, float mean, double scale,
                      int64_t counted)
{
    char name[160];
    snprintf(name, sizeof name, "softmax_xent_backward_scaled %s %dx%d scale %g counted %lld",
             fg_dtype_name((fg_dtype)dt), rows, classes, scale, (long long)counted);
    pair probs = prandom((size_t)rows * (size_t)classes, FG_F32, 0, 1);
    pair labels = pnew((size_t)rows * sizeof(int32_t));
    for (int r = 0; r < rows; r++)
        ((int32_t *)labels.c)[r] = r % 5 == 4 ? FG_IGNORED_LABEL : (r * 7) % classes;
    pmirror(labels);
    fg_loss_scale_dev d = { scale, 0, 1, 0, 0 };
    pair st = pnew(sizeof d);
    pput(st, &d);
    size_t n = (size_t)rows * (size_t)classes;
    pair got = pfill(n, dt, 0.0f), want = pfill(n, dt, 0.0f);
    float host = counted ? (mean * (float)scale) / (float)counted : 0.0f;
    BOTH(name, V->softmax_xent_backward_scaled(S, Q, dt, (const float *)X(probs),
                                               (const int32_t *)X(labels), rows, classes, mean,
                                               (float)counted,
                                               (const fg_loss_scale_dev *)X(st), X(got), E));
    BOTH(name, V->softmax_xent_backward(S, Q, dt, (const float *)X(probs),
                                        (const int32_t *)X(labels), rows, classes, host,
                                        X(want), E));
    if (P.skip_outputs)
        return;
    void *a = malloc(got.bytes), *b = malloc(got.bytes);
    download(got, a);
    download(want, b);
    checks += 2;
    if (memcmp(got.c, want.c, got.bytes) != 0)
        fail("%s: cpu: differs from softmax_xent_backward with the host's factor", name);
    if (memcmp(a, b, got.bytes) != 0)
        fail("%s: %s: differs from its softmax_xent_backward with the host's factor", name,
             P.dut_name);
    free(a);
    free(b);
    compare(name, got, n, dt, tol_of(dt));
}

/* The fused updates with skip_dev pointing at a clear flag: bitwise the update without
 * it (the pair ending in 2 runs with skip_dev NULL). */
static void skip_clear_case(int adamw, uint32_t dt, size_t n)
{
    char name[160];
    snprintf(name, sizeof name, "%s_fused %s n=%zu skip_dev clear", adamw ? "adamw" : "sgd",
             fg_dtype_name((fg_dtype)dt), n);
    int64_t flag = 0;
    pair p = prandom(n, FG_F32, -1, 1), g = prandom(n, dt, -1, 1),
         m = prandom(n, FG_F32, -0.1, 0.1), v = prandom(n, FG_F32, 0, 0.1),
         w = pfill(n, dt, 0.0f), f = pnew(sizeof flag);
    pput(f, &flag);
    pair live[4] = { p, m, v, w }, twin[4];
    for (int i = 0; i < 4; i++) {
        twin[i] = pnew(live[i].bytes);
        memcpy(twin[i].c, live[i].c, live[i].bytes);
        pmirror(twin[i]);
    }
    for (int with = 0; with < 2; with++) {
        const pair *b = with ? live : twin;
        if (adamw)
            BOTH(name, V->adamw_fused(S, Q, FG_F32, dt, dt,
                                      &(fg_adamw_args){ sizeof(fg_adamw_args), 1e-3f, 0.9f,
                                                        0.999f, 1e-8f, 0.01f, 3, NULL,
                                                        with ? (const int64_t *)X(f) : NULL },
                                      X(b[0]), X(g), (float *)X(b[1]), (float *)X(b[2]), NULL,
                                      X(b[3]), n, E));
        else
            BOTH(name, V->sgd_fused(S, Q, FG_F32, dt, dt,
                                    &(fg_sgd_args){ sizeof(fg_sgd_args), 0.05f, 0.9f, 0.0f,
                                                    0.01f, 0, 0, NULL,
                                                    with ? (const int64_t *)X(f) : NULL },
                                    X(b[0]), X(g), (float *)X(b[1]), NULL, X(b[3]), n, E));
    }
    if (P.skip_outputs)
        return;
    for (int i = 0; i < 4; i++) {
        if (!adamw && i == 2)
            continue; /* sgd has no v */
        void *a = malloc(live[i].bytes), *b = malloc(live[i].bytes);
        download(live[i], a);
        download(twin[i], b);
        checks += 2;
        if (memcmp(live[i].c, twin[i].c, live[i].bytes) != 0)
            fail("%s: cpu: buffer %d differs from the update without skip_dev", name, i);
        if (memcmp(a, b, live[i].bytes) != 0)
            fail("%s: %s: buffer %d differs from the update without skip_dev", name,
                 P.dut_name, i);
        free(a);
        free(b);
    }
}

/* With the flag set the skipped update left its inputs: compared with fresh copies. */
static void skip_leaves_inputs(int adamw, uint32_t dt, size_t n)
{
    char name[160];
    snprintf(name, sizeof name, "%s_fused %s n=%zu skipped: inputs kept", adamw ? "adamw" : "sgd",
             fg_dtype_name((fg_dtype)dt), n);
    int64_t flag = 1;
    pair p = prandom(n, FG_F32, -1, 1), g = prandom(n, dt, -1, 1),
         m = prandom(n, FG_F32, -0.1, 0.1), v = prandom(n, FG_F32, 0, 0.1),
         w = pfill(n, dt, 0.25f), f = pnew(sizeof flag);
    pput(f, &flag);
    pair keep[4] = { pnew(p.bytes), pnew(m.bytes), pnew(v.bytes), pnew(w.bytes) };
    pair live[4] = { p, m, v, w };
    for (int i = 0; i < 4; i++) {
        memcpy(keep[i].c, live[i].c, live[i].bytes);
        pmirror(keep[i]);
    }
    if (adamw)
        BOTH(name, V->adamw_fused(S, Q, FG_F32, dt, dt,
                                  &(fg_adamw_args){ sizeof(fg_adamw_args), 1e-3f, 0.9f, 0.999f,
                                                    1e-8f, 0.01f, 3, NULL,
                                                    (const int64_t *)X(f) },
                                  X(p), X(g), (float *)X(m), (float *)X(v), NULL, X(w), n, E));
    else
        BOTH(name, V->sgd_fused(S, Q, FG_F32, dt, dt,
                                &(fg_sgd_args){ sizeof(fg_sgd_args), 0.05f, 0.9f, 0.0f, 0.01f,
                                                0, 0, NULL, (const int64_t *)X(f) },
                                X(p), X(g), (float *)X(m), NULL, X(w), n, E));
    if (P.skip_outputs)
        return;
    for (int i = 0; i < 4; i++) {
        void *a = malloc(live[i].bytes), *b = malloc(live[i].bytes);
        download(live[i], a);
        download(keep[i], b);
        checks += 2;
        if (memcmp(live[i].c, keep[i].c, live[i].bytes) != 0)
            fail("%s: cpu: buffer %d was written", name, i);
        if (memcmp(a, b, live[i].bytes) != 0)
            fail("%s: %s: buffer %d was written", name, P.dut_name, i);
        free(a);
        free(b);
    }
}

void test_loss_scale(void)
{
    scaler_sequences();
    for (size_t d = 0; d < 3; d++) {
        xent_case(dtypes[d], 37, 11, 1.0f, 65536.0, 30);
        xent_case(dtypes[d], 37, 11, 0.25f, 3.0, 30);  /* a scale not a power of two */
        xent_case(dtypes[d], 5, 11, 1.0f, 1e30, 4);    /* f16 overflows: inf, as the host's */
        xent_case(dtypes[d], 5, 11, 1.0f, 65536.0, 0); /* nothing counted: zeros */
        release_all();
    }
    for (size_t d = 0; d < 3; d++)
        for (int adamw = 0; adamw < 2; adamw++) {
            skip_clear_case(adamw, dtypes[d], 999);
            skip_leaves_inputs(adamw, dtypes[d], 999);
            release_all();
        }
}
