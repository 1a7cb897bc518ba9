/* The machine's FMA peak: a loop of independent fused multiply-adds on registers only (no
 * memory traffic), per vector width the CPU has, on all the pool's threads at once. It is
 * the hardware's limit that a gemm's rate is a fraction of (a library's own best shape is
 * not: a library running generic kernels has a low "peak" too). Each width's loop is
 * compiled with a target attribute, so the binary still runs on any x86-64. */
#define _GNU_SOURCE
#include <time.h>

#include "cpu_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FG_FMA_X86 1
#endif

/* Twelve chains: enough to cover an FMA's latency (4 cycles) on two FMA ports. */
#define FG_FMA_CHAINS 12
/* Iterations per thread and run: ~0.3 ms at 16 flops per cycle and 3 GHz. Many short runs,
 * the best kept: on a shared machine a long run always includes time the thread was
 * descheduled (10-20 ms runs read a third of the 2 ms runs' best here), a short one often
 * does not. Runs stop after FG_FMA_RUNS or FG_FMA_SECONDS per width. */
#define FG_FMA_ITERS (1L << 16)
#define FG_FMA_RUNS 400
#define FG_FMA_SECONDS 0.25

static volatile float fg_fma_sink;

#ifdef FG_FMA_X86
__attribute__((target("avx2,fma"))) static void fma_loop_256(long iters)
{
    __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(0.001f), acc[FG_FMA_CHAINS];
    for (int j = 0; j < FG_FMA_CHAINS; j++)
        acc[j] = _mm256_set1_ps((float)j);
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < FG_FMA_CHAINS; j++)
            acc[j] = _mm256_fmadd_ps(acc[j], x, y);
    __m256 s = acc[0];
    for (int j = 1; j < FG_FMA_CHAINS; j++)
        s = _mm256_add_ps(s, acc[j]);
    fg_fma_sink = _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) static void fma_loop_512(long iters)
{
    __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.001f), acc[FG_FMA_CHAINS];
    for (int j = 0; j < FG_FMA_CHAINS; j++)
        acc[j] = _mm512_set1_ps((float)j);
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < FG_FMA_CHAINS; j++)
            acc[j] = _mm512_fmadd_ps(acc[j], x, y);
    __m512 s = acc[0];
    for (int j = 1; j < FG_FMA_CHAINS; j++)
        s = _mm512_add_ps(s, acc[j]);
    fg_fma_sink = _mm512_reduce_add_ps(s);
}

static void fma_items_256(void *ctx, size_t lo, size_t hi)
{
    (void)ctx;
    for (size_t i = lo; i < hi; i++)
        fma_loop_256(FG_FMA_ITERS);
}

static void fma_items_512(void *ctx, size_t lo, size_t hi)
{
    (void)ctx;
    for (size_t i = lo; i < hi; i++)
        fma_loop_512(FG_FMA_ITERS);
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* GFLOP/s of one loop per pool thread, the best of a few runs (the least disturbed by the
 * machine's other work). */
static double fma_rate(fg_cpu_pool *pool, fg_cpu_range_fn items, int lanes)
{
    int threads = fg_cpu_pool_threads(pool);
    double flops = 2.0 * lanes * FG_FMA_CHAINS * (double)FG_FMA_ITERS * threads, best = 0;
    double start = seconds();
    for (int r = 0; r < FG_FMA_RUNS && seconds() - start < FG_FMA_SECONDS; r++) {
        double t0 = seconds();
        fg_cpu_parallel_for(pool, (size_t)threads, 1, 1, items, NULL);
        double t = seconds() - t0;
        if (t > 0 && flops / t * 1e-9 > best)
            best = flops / t * 1e-9;
    }
    return best;
}
#endif

void fg_cpu_fma_peak(fg_cpu_pool *pool, fg_cpu_fma_peak_result *out)
{
    out->gflops_256 = 0;
    out->gflops_512 = 0;
#ifdef FG_FMA_X86
    int level = fg_cpu_isa_level();
    if (level >= FG_CPU_ISA_AVX2)
        out->gflops_256 = fma_rate(pool, fma_items_256, 8);
    if (level >= FG_CPU_ISA_AVX512)
        out->gflops_512 = fma_rate(pool, fma_items_512, 16);
#else
    (void)pool;
#endif
}
