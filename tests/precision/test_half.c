/* f32 <-> f16 and f32 <-> bf16 conversions of kernels/cpu/half.h: every one of the 65536
 * half values both ways, rounding to nearest even at every midpoint, specials, and f32 ->
 * f16 against the compiler's _Float16 over a sweep of f32 bit patterns; and the array
 * conversions (fg_cpu_convert on a pool, the vectorised and vcvtneps2bf16 paths) against
 * the scalar functions on every half and a sweep of f32 bit patterns. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "half.h"
#include "precision_tests.h"

static int is_f16_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }
static int is_bf16_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu); }

/* f16 -> f32 is exact: against the value computed from the fields in double. */
static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000u ? -v : v;
}

static void exhaustive_f16(void)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = fg_f16_to_f32(h);
        double want = f16_value(h);
        if (is_f16_nan(h)) {
            CHECK(isnan(f) && !!signbit(f) == !!(h & 0x8000u), "f16 %04x: got %g, want NaN", i, f);
            uint16_t back = fg_f32_to_f16(f);
            CHECK(is_f16_nan(back) && (back & 0x8000u) == (h & 0x8000u) &&
                      (back & 0x1ffu) == (h & 0x1ffu),
                  "f16 NaN %04x came back as %04x", i, back);
            continue;
        }
        CHECK((double)f == want && !!signbit(f) == !!(h & 0x8000u), "f16 %04x -> %.9g, want %.9g",
              i, f, want);
        CHECK(fg_f32_to_f16(f) == h, "f16 %04x -> %.9g -> %04x", i, f, fg_f32_to_f16(f));
    }
}

static void exhaustive_bf16(void)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t b = (uint16_t)i;
        float f = fg_bf16_to_f32(b);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        CHECK(bits == i << 16, "bf16 %04x -> bits %08x", i, bits);
        uint16_t back = fg_f32_to_bf16(f);
        if (is_bf16_nan(b))
            CHECK(is_bf16_nan(back) && (back & 0x803fu) == (b & 0x803fu),
                  "bf16 NaN %04x came back as %04x", i, back);
        else
            CHECK(back == b, "bf16 %04x came back as %04x", i, back);
    }
}

/* Between two neighbours a < b (positive finite halves): the midpoint goes to the one with
 * the even mantissa, a hair either side to the nearer one. */
static void midpoints(void)
{
    for (uint32_t i = 0; i < 0x7bff; i++) {
        float a = fg_f16_to_f32((uint16_t)i), b = fg_f16_to_f32((uint16_t)(i + 1));
        float mid = (float)(((double)a + (double)b) / 2); /* exact: 12 significant bits */
        uint16_t even = (i & 1) ? (uint16_t)(i + 1) : (uint16_t)i;
        CHECK(fg_f32_to_f16(mid) == even, "f16 midpoint of %04x/%04x -> %04x", i, i + 1,
              fg_f32_to_f16(mid));
        CHECK(fg_f32_to_f16(nextafterf(mid, 0)) == i, "below the midpoint of %04x", i);
        CHECK(fg_f32_to_f16(nextafterf(mid, INFINITY)) == i + 1, "above the midpoint of %04x", i);
        CHECK(fg_f32_to_f16(-mid) == (even | 0x8000u), "negative midpoint of %04x", i);
    }
    for (uint32_t i = 0; i < 0x7f7f; i++) {
        uint32_t lo = i << 16, mid_bits = lo + 0x8000u;
        float mid;
        memcpy(&mid, &mid_bits, 4);
        uint16_t even = (i & 1) ? (uint16_t)(i + 1) : (uint16_t)i;
        CHECK(fg_f32_to_bf16(mid) == even, "bf16 midpoint above %04x -> %04x", i,
              fg_f32_to_bf16(mid));
        CHECK(fg_f32_to_bf16(nextafterf(mid, 0)) == i, "below the bf16 midpoint above %04x", i);
    }
}

static void specials(void)
{
    CHECK(fg_f32_to_f16(65504.0f) == 0x7bff, "largest half");
    CHECK(fg_f32_to_f16(65519.99f) == 0x7bff, "just below the rounding edge to inf");
    CHECK(fg_f32_to_f16(65520.0f) == 0x7c00, "65520 rounds to inf (even)");
    CHECK(fg_f32_to_f16(1e30f) == 0x7c00 && fg_f32_to_f16(-1e30f) == 0xfc00, "overflow to inf");
    CHECK(fg_f32_to_f16(INFINITY) == 0x7c00 && fg_f32_to_f16(-INFINITY) == 0xfc00, "inf");
    CHECK(is_f16_nan(fg_f32_to_f16(NAN)), "NaN");
    CHECK(fg_f32_to_f16(ldexpf(1, -24)) == 0x0001, "smallest subnormal");
    CHECK(fg_f32_to_f16(ldexpf(1, -25)) == 0x0000, "half the smallest subnormal: to even 0");
    CHECK(fg_f32_to_f16(ldexpf(3, -26)) == 0x0001, "0.75 of the smallest subnormal: up");
    CHECK(fg_f32_to_f16(-0.0f) == 0x8000, "negative zero");
    CHECK(fg_f32_to_bf16(FLT_MAX) == 0x7f80, "FLT_MAX rounds to inf in bf16");
    CHECK(fg_f32_to_bf16(INFINITY) == 0x7f80 && fg_f32_to_bf16(-INFINITY) == 0xff80, "bf16 inf");
    CHECK(is_bf16_nan(fg_f32_to_bf16(NAN)), "bf16 NaN");
    uint32_t snan_bits = 0x7f800001u; /* would round into inf if treated as a number */
    float snan;
    memcpy(&snan, &snan_bits, 4);
    CHECK(is_bf16_nan(fg_f32_to_bf16(snan)), "a NaN with a low payload stays NaN in bf16");
    /* 1e-40 = 0x000116c2: a subnormal bf16 keeps its top bits, 0x0001 */
    CHECK(fg_f32_to_bf16(1e-40f) == 0x0001 && fg_bf16_to_f32(0x0001) == ldexpf(1, -133),
          "bf16 keeps f32 subnormals: 1e-40 -> %04x", fg_f32_to_bf16(1e-40f));
}

/* Against the compiler's conversion (round to nearest even) where it has _Float16. */
static void against_compiler(void)
{
#ifdef __FLT16_MAX__
    unsigned long n = 0;
    for (uint64_t bits = 0; bits < 0x100000000ull; bits += 997) {
        uint32_t u = (uint32_t)bits;
        float f;
        memcpy(&f, &u, 4);
        _Float16 h = (_Float16)f;
        uint16_t want;
        memcpy(&want, &h, 2);
        uint16_t got = fg_f32_to_f16(f);
        if (isnan(f))
            CHECK(is_f16_nan(got), "%08x: NaN -> %04x", u, got);
        else
            CHECK(got == want, "%08x (%.9g): got %04x, _Float16 gives %04x", u, f, got, want);
        n++;
    }
    printf("f32 -> f16 matches _Float16 on %lu bit patterns\n", n);
#else
    printf("no _Float16 in this compiler: comparison skipped\n");
#endif
}

/* fg_cpu_convert on 2 threads, every width: the scalar conversions' bits, specials and
 * subnormals included (the f32 sweep holds every exponent, so vectors mixing subnormals and
 * normals reach vcvtneps2bf16's fix-up). Odd lengths leave tails to the scalar loops. */
static void arrays(void)
{
    enum { N = 65536, SWEEP = 1 << 20 };
    static uint16_t halves[N], back[SWEEP];
    static float wide[SWEEP];
    fg_cpu_pool *pool = NULL;
    CHECK(fg_cpu_pool_create(2, &pool) == 0, "pool");
    if (!pool)
        return;
    for (uint32_t i = 0; i < N; i++)
        halves[i] = (uint16_t)i;
    for (int t = 0; t < 2; t++) {
        int type = t ? FG_CPU_BF16 : FG_CPU_F16;
        const char *name = t ? "bf16" : "f16";
        CHECK(fg_cpu_convert(pool, wide, FG_CPU_F32, halves, type, N - 3) == 0, "%s widen", name);
        for (uint32_t i = 0; i < N - 3; i++) {
            float want = t ? fg_bf16_to_f32(halves[i]) : fg_f16_to_f32(halves[i]);
            CHECK(memcmp(&wide[i], &want, 4) == 0, "%s %04x: array %a, scalar %a", name, i,
                  wide[i], want);
        }
        uint32_t x = 2463534242u;
        for (size_t i = 0; i < SWEEP; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            uint32_t u = i % 4 ? x : (uint32_t)(i * 4099u); /* an even sweep: every exponent */
            memcpy(&wide[i], &u, 4);
        }
        CHECK(fg_cpu_convert(pool, back, type, wide, FG_CPU_F32, SWEEP - 5) == 0, "%s round",
              name);
        size_t bad = 0;
        for (size_t i = 0; i < SWEEP - 5; i++) {
            uint16_t want = t ? fg_f32_to_bf16(wide[i]) : fg_f32_to_f16(wide[i]);
            if (back[i] != want && bad++ < 5)
                CHECK(0, "%s %a: array %04x, scalar %04x", name, wide[i], back[i], want);
        }
        CHECK(bad == 0, "%s: %zu of %d roundings differ from the scalar", name, bad, SWEEP - 5);
    }
    printf("fg_cpu_convert: the scalar bits on %d halves and %d f32 patterns each way (bf16 "
           "rounding path %d)\n", N - 3, SWEEP - 5, fg_cpu_bf16_round_isa());
    fg_cpu_pool_destroy(pool);
}

void test_group_half(void)
{
    arrays();
    exhaustive_f16();
    exhaustive_bf16();
    midpoints();
    specials();
    against_compiler();
}
