/* kernels/cpu/gemm_bf16_tile.c, the small bf16 products of bf16 attention: on a CPU with
 * avx512_bf16, every transpose pair, odd and even k (an odd k's last pair padded with 0),
 * m and n off the 8 x 32 tile, padded leading dimensions, alpha, beta 0 (C not read: NaN
 * there stays out of the result) and beta 1, against a float64 product of the same bf16
 * values: within f32 accumulation of the exact products (a few ulps of the sum of |terms|),
 * C's padding untouched; and the shapes whose packing would pass FG_CPU_BF16_TILE_WORDS
 * declined with nothing written. On a CPU without it, every call is declined and writes
 * nothing (the backend then runs oneDNN's matmul or widens).
 * Usage: test_gemm_bf16_tile */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu_kernels.h"
#include "half.h"

static uint64_t rng_state = 4242;

static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static int cpu_bf16(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__SANITIZE_ADDRESS__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
#else
    return 0;
#endif
}

/* One product; returns the worst |C - ref| / (sum |alpha a b| + |beta c| + tiny) */
static double check_one(int ta, int tb, int m, int n, int k, float alpha, float beta, int runs)
{
    int pad = 3, lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    size_t as = (size_t)(ta ? k : m) * lda, bs = (size_t)(tb ? n : k) * ldb;
    size_t cs = (size_t)m * ldc;
    uint16_t *a = malloc(as * 2), *b = malloc(bs * 2);
    float *c = malloc(cs * 4), *c0 = malloc(cs * 4);
    for (size_t i = 0; i < as; i++)
        a[i] = fg_f32_to_bf16((float)(uniform() * 4 - 2));
    for (size_t i = 0; i < bs; i++)
        b[i] = fg_f32_to_bf16((float)(uniform() * 2 - 1));
    for (size_t i = 0; i < cs; i++)
        c0[i] = c[i] = beta != 0.0f || (i % ldc) >= (size_t)n ? (float)uniform() : NAN;
    int ran = fg_cpu_gemm_bf16_tile(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    double worst = 0;
    if (!runs) {
        CHECK(!ran && memcmp(c, c0, cs * 4) == 0, "tile %dx%dx%d ta=%d tb=%d: ran %d where "
              "it should decline, or wrote C", m, n, k, ta, tb, ran);
    } else {
        CHECK(ran, "tile %dx%dx%d ta=%d tb=%d declined", m, n, k, ta, tb);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < ldc; j++) {
                size_t at = (size_t)i * ldc + j;
                if (j >= n) {
                    CHECK(memcmp(&c[at], &c0[at], 4) == 0, "tile wrote C's padding");
                    continue;
                }
                double s = 0, mag = 0;
                for (int kk = 0; kk < k; kk++) {
                    double x = fg_bf16_to_f32(ta ? a[(size_t)kk * lda + i]
                                                 : a[(size_t)i * lda + kk]);
                    double y = fg_bf16_to_f32(tb ? b[(size_t)j * ldb + kk]
                                                 : b[(size_t)kk * ldb + j]);
                    s += x * y;
                    mag += fabs(x * y);
                }
                double want = alpha * s + (beta != 0.0f ? beta * (double)c0[at] : 0.0);
                mag = fabs(alpha) * mag + (beta != 0.0f ? fabs(beta * (double)c0[at]) : 0) +
                      1e-30;
                double e = fabs((double)c[at] - want) / mag;
                worst = e > worst || isnan(e) ? (isnan(e) ? INFINITY : e) : worst;
            }
    }
    free(a), free(b), free(c), free(c0);
    return worst;
}

int main(void)
{
    int has = cpu_bf16();
    static const int shapes[][3] = {{64, 64, 32}, {64, 32, 64}, {7, 5, 3}, {1, 1, 1},
                                    {19, 47, 33}, {64, 256, 64}, {130, 17, 9}};
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 8; t++) {
            int ta = t & 1, tb = (t >> 1) & 1;
            float beta = t >= 4 ? 1.0f : 0.0f, alpha = t % 3 ? 0.17677669f : 1.0f;
            double e = check_one(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], alpha,
                                 beta, has);
            worst = e > worst ? e : worst;
        }
    /* 8193 words of B (k 2, n 8193 padded to 8208) or of A (m 8193): declined */
    check_one(0, 0, 1, 8193, 2, 1.0f, 0.0f, 0);
    check_one(0, 0, 8193, 1, 2, 1.0f, 0.0f, 0);
    if (has) {
        printf("tile products against float64: worst error %.2e of the sum of |terms|\n",
               worst);
        /* f32 accumulation of k exact products: about k ulps of the sum of |terms| */
        CHECK(worst < 256 * 0x1p-24, "tile products off the float64 reference: %.3e", worst);
    } else {
        printf("this CPU lacks avx512_bf16 (or the build lacks it): every product declined, "
               "nothing written\n");
    }
    return fg_test_report("gemm_bf16_tile");
}
