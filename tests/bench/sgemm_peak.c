/* sgemm_peak: OpenBLAS sgemm GFLOP/s at the shapes of one training step of the benchmark's
 * 784-256-256-10 MLP (batch 128), so bench_cpu.sh can say what fraction of the raw matrix
 * multiply rate the whole step reaches. Built and run by bench_cpu.sh:
 *
 *   cc -O2 -o sgemm_peak sgemm_peak.c -lopenblas && ./sgemm_peak [threads] [batch]
 *
 * Prints one line per shape, then "peak GFLOP/s" (the fastest shape) and "step GFLOP/s"
 * (all the step's gemms' FLOPs over their summed best times: the rate a step made only of
 * sgemm calls would reach). Row-major, as fulgur's CPU backend calls cblas_sgemm. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

/* Best seconds per call over several timed blocks of calls (each block at least ~20 ms):
 * the best block is the one least disturbed by whatever else runs on the machine. */
static double best_seconds(const shape *s, const float *a, const float *b, float *c)
{
    int lda = s->trans_a ? s->m : s->k, ldb = s->trans_b ? s->k : s->n;
    int calls = 1;
    double best = 1e30;
    for (int block = 0; block < 25; block++) {
        double t0 = now_seconds();
        for (int i = 0; i < calls; i++)
            cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans,
                        s->trans_b ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f, a, lda,
                        b, ldb, 0.0f, c, s->n);
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
    double peak = 0, flops_sum = 0, secs_sum = 0;
    printf("OpenBLAS sgemm, %d thread(s), batch %d\n", threads, batch);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        double secs = best_seconds(s, a, b, c);
        double flops = 2.0 * s->m * s->n * s->k, gflops = flops / secs * 1e-9;
        printf("  %s  %c%c m=%4d n=%4d k=%4d  %8.1f GFLOP/s\n", s->what, s->trans_a ? 'T' : 'N',
               s->trans_b ? 'T' : 'N', s->m, s->n, s->k, gflops);
        if (gflops > peak) peak = gflops;
        flops_sum += flops;
        secs_sum += secs;
    }
    printf("peak GFLOP/s %.2f\n", peak);
    printf("step GFLOP/s %.2f\n", flops_sum / secs_sum * 1e-9);
    free(a);
    free(b);
    free(c);
    return 0;
}
