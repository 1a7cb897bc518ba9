/* sgemm_peak: OpenBLAS sgemm GFLOP/s at the shapes of one training step of the benchmark's
 * 784-256-256-10 MLP (batch 128), so bench_cpu.sh can say what fraction of the raw matrix
 * multiply rate the whole step reaches; built with -DSGEMM_PEAK_DNNL (and -ldnnl), oneDNN's
 * sgemm at the same shapes too (fulgur's [backend] gemm picks between the two per shape).
 * Built and run by bench_cpu.sh and bench_lm.sh:
 *
 *   cc -O2 -o sgemm_peak sgemm_peak.c -lopenblas && ./sgemm_peak [threads] [batch]
 *   cc -O2 -DSGEMM_PEAK_DNNL -o sgemm_peak sgemm_peak.c -lopenblas -ldnnl
 *
 * Prints one line per shape and library, then "peak GFLOP/s" (OpenBLAS's fastest shape),
 * "step GFLOP/s" (all the step's gemms' FLOPs over their summed best times: the rate a step
 * made only of sgemm calls would reach) and, with oneDNN, "onednn peak GFLOP/s", "onednn
 * step GFLOP/s", then "best peak GFLOP/s" and "best step GFLOP/s" (per shape the faster
 * library, as gemm = auto would pick). Row-major, as fulgur's CPU backend calls them. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef SGEMM_PEAK_DNNL
#include <dnnl.h>
#include <omp.h>
#endif

/* Not declared by every cblas.h (netlib's has none); OpenBLAS always exports it. */
void openblas_set_num_threads(int num_threads);

typedef struct {
    const char *what;
    int trans_a, trans_b, m, n, k;
} shape;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float *filled(size_t n)
{
    float *p = malloc(n * sizeof *p);
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 7919u) % 1000u) * 1e-3f - 0.5f;
    return p;
}

enum { LIB_OPENBLAS, LIB_ONEDNN };

static void one_call(int lib, const shape *s, const float *a, const float *b, float *c)
{
    int lda = s->trans_a ? s->m : s->k, ldb = s->trans_b ? s->k : s->n;
#ifdef SGEMM_PEAK_DNNL
    if (lib == LIB_ONEDNN) {
        dnnl_sgemm(s->trans_a ? 'T' : 'N', s->trans_b ? 'T' : 'N', s->m, s->n, s->k, 1.0f, a, lda,
                   b, ldb, 0.0f, c, s->n);
        return;
    }
#endif
    (void)lib;
    cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans,
                s->trans_b ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f, a, lda, b, ldb,
                0.0f, c, s->n);
}

/* Best seconds per call over several timed blocks of calls (each block at least ~20 ms):
 * the best block is the one least disturbed by whatever else runs on the machine. */
static double best_seconds(int lib, const shape *s, const float *a, const float *b, float *c)
{
    int calls = 1;
    double best = 1e30;
    for (int block = 0; block < 25; block++) {
        double t0 = now_seconds();
        for (int i = 0; i < calls; i++)
            one_call(lib, s, a, b, c);
        double per_call = (now_seconds() - t0) / calls;
        if (block > 0 && per_call < best) best = per_call; /* block 0 warms caches and threads */
        if (per_call * calls < 0.02) calls *= 2;
    }
    return best;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    int batch = argc > 2 ? atoi(argv[2]) : 128;
    if (threads < 1 || batch < 1) {
        fprintf(stderr, "usage: sgemm_peak [threads >= 1] [batch >= 1]\n");
        return 2;
    }
    openblas_set_num_threads(threads);
    /* y = x W^T forward; dX = dY W and dW = dY^T X backward, for each linear layer */
    const shape shapes[] = {
        {"fc1 forward  y = x.W^T ", 0, 1, batch, 256, 784},
        {"fc1 backward dW = dy^T.x", 1, 0, 256, 784, batch},
        {"fc2 forward  y = x.W^T ", 0, 1, batch, 256, 256},
        {"fc2 backward dx = dy.W  ", 0, 0, batch, 256, 256},
        {"fc2 backward dW = dy^T.x", 1, 0, 256, 256, batch},
        {"fc3 forward  y = x.W^T ", 0, 1, batch, 10, 256},
        {"fc3 backward dx = dy.W  ", 0, 0, batch, 256, 10},
        {"fc3 backward dW = dy^T.x", 1, 0, 10, 256, batch},
    };
    size_t max_elems = (size_t)(batch > 256 ? batch : 256) * 784;
    float *a = filled(max_elems), *b = filled(max_elems), *c = filled(max_elems);
    if (!a || !b || !c) {
        fprintf(stderr, "sgemm_peak: out of memory\n");
        return 1;
    }
#ifdef SGEMM_PEAK_DNNL
    omp_set_num_threads(threads);
    const int libs = 2;
#else
    const int libs = 1;
#endif
    static const char *const names[] = {"OpenBLAS", "onednn"};
    enum { SHAPES = sizeof shapes / sizeof shapes[0] };
    double peak[2] = {0, 0}, secs_sum[2] = {0, 0}, secs[2][SHAPES];
    printf("sgemm, %d thread(s), batch %d\n", threads, batch);
    /* one library at a time: OpenBLAS's idle threads spin for a while after its calls
     * and would take the cores from oneDNN's (so it drops to one thread before oneDNN) */
    for (int lib = 0; lib < libs; lib++) {
        if (lib == LIB_ONEDNN) openblas_set_num_threads(1);
        for (size_t i = 0; i < SHAPES; i++) {
            const shape *s = &shapes[i];
            double flops = 2.0 * s->m * s->n * s->k;
            secs[lib][i] = best_seconds(lib, s, a, b, c);
            double gflops = flops / secs[lib][i] * 1e-9;
            printf("  %-8s %s  %c%c m=%4d n=%4d k=%4d  %8.1f GFLOP/s\n", names[lib], s->what,
                   s->trans_a ? 'T' : 'N', s->trans_b ? 'T' : 'N', s->m, s->n, s->k, gflops);
            if (gflops > peak[lib]) peak[lib] = gflops;
            secs_sum[lib] += secs[lib][i];
        }
    }
    double best_peak = 0, best_secs = 0, flops_sum = 0;
    for (size_t i = 0; i < SHAPES; i++) {
        double flops = 2.0 * shapes[i].m * shapes[i].n * shapes[i].k;
        double fastest = libs == 2 && secs[1][i] < secs[0][i] ? secs[1][i] : secs[0][i];
        if (flops / fastest * 1e-9 > best_peak) best_peak = flops / fastest * 1e-9;
        best_secs += fastest;
        flops_sum += flops;
    }
    printf("peak GFLOP/s %.2f\n", peak[0]);
    printf("step GFLOP/s %.2f\n", flops_sum / secs_sum[0] * 1e-9);
    if (libs == 2) {
        printf("onednn peak GFLOP/s %.2f\n", peak[1]);
        printf("onednn step GFLOP/s %.2f\n", flops_sum / secs_sum[1] * 1e-9);
    }
    printf("best peak GFLOP/s %.2f\n", best_peak);
    printf("best step GFLOP/s %.2f\n", flops_sum / best_secs * 1e-9);
    free(a);
    free(b);
    free(c);
    return 0;
}
