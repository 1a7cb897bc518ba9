/* The emulator's own checks: each must fail the way a GPU would (or better). Kernels here
 * are compiled the way kernels/cuda is (cudaemu.h force-included), launched through
 * FGCU_LAUNCH-style fgemu::launcher calls.
 *   - a barrier one thread skips is a deadlock naming the kernel, never a hang;
 *   - a reduction without its __syncthreads gives a wrong value (poisoned shared memory in
 *     the fixed order; random switching too);
 *   - shuffles (idx, up, down, xor, widths), warp barriers, atomics, dynamic shared memory;
 *   - launch limits, stream/event handles, a wait on an event never recorded;
 *   - cuBLASLt's epilogues with an aux matrix or a bias gradient: values of a small product
 *     worked by hand, and the refusals cublasLt.h documents. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cublasLt.h>

#define LAUNCH(g, b, sh, s, ...) ::fgemu::launcher(#__VA_ARGS__, &__VA_ARGS__, g, b, sh, s)

static int failures;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stdout, "FAIL %s:%d: ", __FILE__, __LINE__);                           \
            fprintf(stdout, __VA_ARGS__);                                                  \
            fprintf(stdout, "\n");                                                         \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

__global__ void skip_barrier_k(int *out)
{
    if (threadIdx.x == 5)
        return; /* the bug: thread 5 never reaches the barrier */
    __syncthreads();
    out[threadIdx.x] = 1;
}

template <int SYNC> __global__ void block_sum_k(const float *x, float *out)
{
    __shared__ float sh[128];
    sh[threadIdx.x] = x[blockIdx.x * 128 + threadIdx.x];
    if (SYNC)
        __syncthreads();
    for (int stride = 64; stride > 0; stride >>= 1) {
        if ((int)threadIdx.x < stride)
            sh[threadIdx.x] += sh[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = sh[0];
}

__global__ void shuffle_k(int *out, int width)
{
    int lane = threadIdx.x % 32, v = 100 + (int)threadIdx.x;
    int *o = out + threadIdx.x * 4;
    o[0] = __shfl_sync(0xffffffffu, v, 3, width);
    o[1] = __shfl_up_sync(0xffffffffu, v, 2, width);
    o[2] = __shfl_down_sync(0xffffffffu, v, 5, width);
    o[3] = __shfl_xor_sync(0xffffffffu, v, 1 + lane % 2, width);
}

__global__ void atomic_dynamic_k(unsigned *count, float *out)
{
    float *dyn = (float *)fgemu_dynamic_shared();
    dyn[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    atomicAdd(count, 1u);
    out[blockIdx.x * blockDim.x + threadIdx.x] = dyn[blockDim.x - 1 - threadIdx.x];
}

__global__ void partial_warp_shuffle_k(int *out)
{
    if (threadIdx.x >= 16)
        return; /* lanes 16-31 exited; a full-mask shuffle reading them is undefined */
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 16);
}

/* Runs f with stderr captured; returns what was written. */
static const char *captured(void (*f)(void))
{
    static char buf[8192];
    fflush(stderr);
    char path[] = "/tmp/cudaemu-selftest.XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    dup2(fd, 2);
    f();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    return buf;
}

static int *g_out;

static void launch_skip(void)
{
    LAUNCH(2, 64, 0, 0, skip_barrier_k)(g_out);
}

static void test_deadlock(void)
{
    cudaMalloc((void **)&g_out, 64 * sizeof(int));
    int before = fgemu_failures();
    const char *msg = captured(launch_skip);
    CHECK(fgemu_failures() == before + 1, "a skipped barrier was not reported");
    CHECK(strstr(msg, "skip_barrier_k") && strstr(msg, "deadlock"),
          "the report does not name the kernel: %s", msg);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure, "no sticky launch failure");
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure, "the error is not sticky");
    fgemu_clear_sticky();
    cudaFree(g_out);
}

static float run_sum(int sync)
{
    float *x, *out;
    cudaMalloc((void **)&x, 4 * 128 * sizeof(float));
    cudaMalloc((void **)&out, 4 * sizeof(float));
    for (int i = 0; i < 4 * 128; i++)
        x[i] = (float)(i % 7);
    if (sync)
        LAUNCH(4, 128, 0, 0, block_sum_k<1>)(x, out);
    else
        LAUNCH(4, 128, 0, 0, block_sum_k<0>)(x, out);
    float total = out[0] + out[1] + out[2] + out[3];
    cudaFree(x);
    cudaFree(out);
    return total;
}

static void test_missing_sync(void)
{
    float want = 0.0f;
    for (int i = 0; i < 4 * 128; i++)
        want += (float)(i % 7);
    CHECK(run_sum(1) == want, "the correct reduction gives %g, want %g", run_sum(1), want);
    float got = run_sum(0);
    CHECK(got != want, "a reduction without __syncthreads gave the right sum (fixed order)");
    fgemu_set_poison(0);
    fgemu_set_random(42);
    got = run_sum(0);
    CHECK(got != want, "without poisoning, random switching did not expose the missing barrier");
    CHECK(run_sum(1) == want, "random switching broke the correct reduction");
    fgemu_set_random(0);
    fgemu_set_poison(1);
}

static int expect_shfl(int kind, int t, int width)
{
    int lane = t % 32, seg = lane & ~(width - 1), warp = t - lane, src = lane;
    if (kind == 0)
        src = seg + 3 % width;
    else if (kind == 1)
        src = lane - 2 >= seg ? lane - 2 : lane;
    else if (kind == 2)
        src = lane + 5 < seg + width ? lane + 5 : lane;
    else
        src = (lane ^ (1 + lane % 2)) < seg + width ? lane ^ (1 + lane % 2) : lane;
    return 100 + warp + src;
}

static void test_shuffles(void)
{
    int *out;
    cudaMalloc((void **)&out, 64 * 4 * sizeof(int));
    const int widths[] = { 32, 16, 8 };
    for (int w = 0; w < 3; w++) {
        LAUNCH(1, 64, 0, 0, shuffle_k)(out, widths[w]);
        CHECK(cudaGetLastError() == cudaSuccess, "shuffle launch failed");
        for (int t = 0; t < 64; t++)
            for (int k = 0; k < 4; k++)
                CHECK(out[t * 4 + k] == expect_shfl(k, t, widths[w]),
                      "shuffle kind %d width %d thread %d: %d, want %d", k, widths[w], t,
                      out[t * 4 + k], expect_shfl(k, t, widths[w]));
    }
    cudaFree(out);
}

static void launch_partial(void)
{
    LAUNCH(1, 32, 0, 0, partial_warp_shuffle_k)(g_out);
}

static void test_exited_lane(void)
{
    cudaMalloc((void **)&g_out, 32 * sizeof(int));
    const char *msg = captured(launch_partial);
    CHECK(strstr(msg, "partial_warp_shuffle_k") != NULL,
          "a shuffle from an exited lane was not reported: %s", msg);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure, "no launch failure");
    fgemu_clear_sticky();
    cudaFree(g_out);
}

static void test_atomics_dynamic(void)
{
    unsigned *count;
    float *out;
    cudaMalloc((void **)&count, sizeof *count);
    cudaMalloc((void **)&out, 3 * 96 * sizeof(float));
    cudaMemset(count, 0, sizeof *count);
    fgemu_set_random(7);
    LAUNCH(3, 96, 96 * sizeof(float), 0, atomic_dynamic_k)(count, out);
    fgemu_set_random(0);
    CHECK(*count == 3 * 96, "atomicAdd counted %u, want %d", *count, 3 * 96);
    for (int i = 0; i < 3 * 96; i++)
        CHECK(out[i] == (float)(95 - i % 96), "dynamic shared: out[%d] = %g", i, out[i]);
    cudaFree(count);
    cudaFree(out);
}

static void launch_too_big(void)
{
    LAUNCH(1, 2048, 0, 0, skip_barrier_k)(g_out);
}

static void test_runtime_rules(void)
{
    const char *msg = captured(launch_too_big);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration && strstr(msg, "1024"),
          "a 2048-thread block was not refused: %s", msg);
    CHECK(cudaGetLastError() == cudaSuccess, "cudaGetLastError does not clear the error");
    cudaStream_t s;
    cudaEvent_t e;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess, "event");
    CHECK(cudaStreamWaitEvent(s, e, 0) == cudaErrorInvalidResourceHandle,
          "a wait on an event never recorded was accepted");
    (void)cudaGetLastError();
    CHECK(cudaEventRecord(e, s) == cudaSuccess && cudaStreamWaitEvent(s, e, 0) == cudaSuccess,
          "a wait on a recorded event failed");
    CHECK(cudaStreamDestroy(s) == cudaSuccess, "stream destroy");
    CHECK(cudaEventRecord(e, s) == cudaErrorInvalidResourceHandle,
          "a record on a destroyed stream was accepted");
    (void)cudaGetLastError();
    cudaEventDestroy(e);
    void *p;
    cudaMalloc(&p, 100);
    char host[200];
    CHECK(cudaMemcpy(host, p, 200, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
          "a copy past the end of an allocation was accepted");
    CHECK(cudaFree(host) == cudaErrorInvalidValue, "cudaFree of a host pointer accepted");
    (void)cudaGetLastError();
    cudaFree(p);
}

/* D (2 x 3, col-major) = A (2 x 2) B (2 x 2 .. 3) with epilogue e; aux (ld 8) and vec on
 * the device; returns the matmul's status (or the heuristic's when that refuses). */
static cublasStatus_t lt_run(uint32_t e, int32_t bias_type, int64_t aux_ld, float *d_host,
                             float *aux_host, float *vec_host, const float *vec_in)
{
    const float a[4] = { 1, 2, 3, 4 }, b[6] = { 1, -1, 0.5f, 2, -2, 0 };
    float *da, *db, *dd, *daux, *dvec;
    cudaMalloc((void **)&da, sizeof a);
    cudaMalloc((void **)&db, sizeof b);
    cudaMalloc((void **)&dd, 6 * 4);
    cudaMalloc((void **)&daux, 3 * 8 * 4);
    cudaMalloc((void **)&dvec, 3 * 4);
    cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice);
    cudaMemcpy(dvec, vec_in, 3 * 4, cudaMemcpyHostToDevice);
    /* aux holds gelu's input for the backward epilogues */
    const float pre[24] = { -1, 0.5f, 0, 0, 0, 0, 0, 0, 2, -0.25f, 0, 0, 0, 0, 0, 0, 1, 3 };
    cudaMemcpy(daux, pre, sizeof pre, cudaMemcpyHostToDevice);
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    cublasLtCreate(&h);
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 2, 2, 2);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 2, 3, 2);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, 2, 3, 2);
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)e;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dvec, sizeof dvec);
    if (bias_type >= 0)
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                       sizeof bias_type);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &daux,
                                   sizeof daux);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                   sizeof aux_ld);
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &r, &found);
    float one = 1, zero = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmul(h, op, &one, da, la, db, lb, &zero, dd, ld, dd, ld, &r.algo, NULL, 0,
                            0);
    cudaMemcpy(d_host, dd, 6 * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(aux_host, daux, 24 * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(vec_host, dvec, 3 * 4, cudaMemcpyDeviceToHost);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dd);
    cudaFree(daux);
    cudaFree(dvec);
    return st;
}

static float ref_gelu(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

static float ref_dgelu(float x) /* central difference in double: independent of the formula */
{
    double h = 1e-4, xd = x, k = 0.7978845608028654;
    auto g = [k](double v) { return 0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v))); };
    return (float)((g(xd + h) - g(xd - h)) / (2 * h));
}

static void test_cublaslt_epilogues(void)
{
    /* A = [1 3; 2 4], B = [1 0.5 -2; -1 2 0]: AB = [-2 6.5 -2; -2 9 -4] (column-major) */
    const float ab[6] = { -2, -2, 6.5f, 9, -2, -4 };
    const float bias[3] = { 0.5f, -1, 0 };
    float d[6], aux[24], vec[3];
    cublasStatus_t st = lt_run(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, -1, 8, d, aux, vec, bias);
    CHECK(st == CUBLAS_STATUS_SUCCESS, "GELU_AUX_BIAS failed: %d", (int)st);
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 2; i++) {
            float pre = ab[j * 2 + i] + bias[i];
            CHECK(fabsf(aux[j * 8 + i] - pre) < 1e-6f && fabsf(d[j * 2 + i] - ref_gelu(pre)) < 1e-6f,
                  "GELU_AUX_BIAS (%d,%d): aux %g d %g, want %g %g", i, j, aux[j * 8 + i],
                  d[j * 2 + i], pre, ref_gelu(pre));
        }
    const float pre[6] = { -1, 0.5f, 2, -0.25f, 1, 3 }; /* aux's (i, j) as lt_run stores it */
    st = lt_run(CUBLASLT_EPILOGUE_DGELU_BGRAD, -1, 8, d, aux, vec, bias);
    CHECK(st == CUBLAS_STATUS_SUCCESS, "DGELU_BGRAD failed: %d", (int)st);
    float sums[2] = { 0, 0 };
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 2; i++) {
            float want = ab[j * 2 + i] * ref_dgelu(pre[j * 2 + i]);
            sums[i] += want;
            CHECK(fabsf(d[j * 2 + i] - want) < 1e-4f, "DGELU (%d,%d): %g, want %g", i, j,
                  d[j * 2 + i], want);
        }
    CHECK(fabsf(vec[0] - sums[0]) < 1e-4f && fabsf(vec[1] - sums[1]) < 1e-4f,
          "DGELU_BGRAD's bias gradient %g %g, want %g %g", vec[0], vec[1], sums[0], sums[1]);
    st = lt_run(CUBLASLT_EPILOGUE_BGRADA, -1, 0, d, aux, vec, bias);
    CHECK(st == CUBLAS_STATUS_SUCCESS && vec[0] == 4 && vec[1] == 6 && d[2] == 6.5f,
          "BGRADA: %d, %g %g (want A's row sums 4 6)", (int)st, vec[0], vec[1]);
    st = lt_run(CUBLASLT_EPILOGUE_BGRADB, -1, 0, d, aux, vec, bias);
    CHECK(st == CUBLAS_STATUS_SUCCESS && vec[0] == 0 && vec[1] == 2.5f && vec[2] == -2,
          "BGRADB: %d, %g %g %g (want B's column sums 0 2.5 -2)", (int)st, vec[0], vec[1],
          vec[2]);
    /* what cublasLt.h rules out */
    st = lt_run(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, -1, 4, d, aux, vec, bias);
    CHECK(st == CUBLAS_STATUS_NOT_SUPPORTED, "an aux ld of 4 (not a multiple of 8): %d", (int)st);
    st = lt_run(CUBLASLT_EPILOGUE_DGELU_BGRAD, CUDA_R_16BF, 8, d, aux, vec, bias);
    CHECK(st == CUBLAS_STATUS_NOT_SUPPORTED, "a bf16 bias gradient of an f32 D: %d", (int)st);
    st = lt_run(CUBLASLT_EPILOGUE_DGELU, -1, 0, d, aux, vec, bias);
    CHECK(st == CUBLAS_STATUS_INVALID_VALUE, "an aux ld of 0 (< D's rows): %d", (int)st);
}

int main(void)
{
    test_deadlock();
    test_missing_sync();
    test_shuffles();
    test_exited_lane();
    test_atomics_dynamic();
    test_runtime_rules();
    test_cublaslt_epilogues();
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("cudaemu self-test: all checks passed\n");
    return 0;
}
