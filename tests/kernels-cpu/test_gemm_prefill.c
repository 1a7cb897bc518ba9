/* kernels/cpu/gemm.c's fg_cpu_gemm_bias where k fits in one OpenBLAS k panel (C = bias, then
 * C += op(A) op(B) with beta 1) has the bits of fg_cpu_gemm then fg_cpu_bias_add on the same
 * pool (1 and 2 threads: OpenBLAS's edge tiles round some rows differently from full ones, so
 * a product's bits follow the pool's blocks, with or without this), split by rows (m > n) and by columns, every transpose, C with gaps between rows
 * (ldc > n: the gaps keep their values), at k = 1, the probed panel depth and above it (the
 * two-pass form there). The probe: a depth > 0 on OpenBLAS, and where it is below the probe's
 * cap, the one-panel form differs from gemm + bias one k further (the boundary is real).
 * Usage: test_gemm_prefill bits | probe */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu_kernels.h"

static fg_cpu_pool *pools[2];
static uint64_t rng_state = 99;

static float *random_floats(size_t n, float lo, float hi)
{
    float *x = malloc(n * sizeof *x + 4);
    for (size_t i = 0; i < n; i++) {
        rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = lo + (hi - lo) * (float)((double)(rng_state >> 11) * 0x1.0p-53);
    }
    return x;
}

static void check_shape(int ta, int tb, int m, int n, int k, int gap)
{
    int lda = ta ? m : k, ldb = tb ? k : n, ldc = n + gap;
    size_t nc = (size_t)m * (size_t)ldc;
    float *a = random_floats((size_t)m * (size_t)k, -1.0f, 1.0f);
    float *b = random_floats((size_t)n * (size_t)k, -1.0f, 1.0f);
    float *bias = random_floats((size_t)n, 10.0f, 100.0f), *c0 = random_floats(nc, -5.0f, 5.0f);
    float *ref = malloc(nc * sizeof *ref + 4), *c = malloc(nc * sizeof *c + 4);
    for (int t = 0; t < 2; t++) {
        memcpy(ref, c0, nc * sizeof *ref);
        fg_cpu_gemm(pools[t], ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, ref, ldc);
        for (int i = 0; i < m; i++)
            fg_cpu_bias_add(pools[t], ref + (size_t)i * (size_t)ldc, bias, 1, n, 1);
        memcpy(c, c0, nc * sizeof *c);
        fg_cpu_gemm_bias(pools[t], ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc);
        CHECK(memcmp(c, ref, nc * sizeof *c) == 0,
              "gemm_bias %c%c m %d n %d k %d ldc %d on %d thread(s) differs from gemm + bias_add",
              ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, ldc, t + 1);
    }
    free(a), free(b), free(bias), free(c0), free(ref), free(c);
}

static void case_bits(void)
{
    int panel = fg_cpu_gemm_bias_panel_k();
    CHECK(panel > 0, "no one-panel depth was probed (%d)", panel);
    const int ks[] = {1, 64, panel, panel + 1, 2 * panel + 3};
    const int mn[][2] = {{300, 70}, {70, 300}, {1, 33}, {257, 1}};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        for (size_t s = 0; s < sizeof mn / sizeof *mn; s++)
            for (int t = 0; t < 4; t++)
                check_shape(t & 1, t >> 1, mn[s][0], mn[s][1], ks[i], s == 0 ? 5 : 0);
}

/* one k past the probed depth, the one-panel form is not gemm + bias_add's bits */
static void case_probe(void)
{
    int panel = fg_cpu_gemm_bias_panel_k();
    CHECK(panel > 0 && panel <= FG_CPU_GEMM_PROBE_MAX_K, "probed depth %d", panel);
    CHECK(fg_cpu_gemm_probe_panel(FG_CPU_GEMM_PROBE_MAX_K) == panel, "the probe is not stable");
    if (panel < FG_CPU_GEMM_PROBE_MAX_K)
        CHECK(fg_cpu_gemm_probe_panel(panel + 1) == panel,
              "k %d agreed too: the boundary at %d is not where the forms part", panel + 1,
              panel);
    printf("OpenBLAS %s: one k panel up to k = %d\n", fg_cpu_openblas_corename(), panel);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {{"bits", case_bits}, {"probe", case_probe}};
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof *cases; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            fg_cpu_gemm_init();
            CHECK(fg_cpu_pool_create(1, &pools[0]) == 0 && fg_cpu_pool_create(2, &pools[1]) == 0,
                  "pools");
            cases[i].run();
            fg_cpu_pool_destroy(pools[0]);
            fg_cpu_pool_destroy(pools[1]);
            return fg_test_report(argv[1]);
        }
    fprintf(stderr, "usage: %s bits|probe\n", argv[0]);
    return 2;
}
