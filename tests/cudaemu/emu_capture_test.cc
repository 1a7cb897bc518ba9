/* Stream capture on the emulated device (emu_capture.cc), as the CUDA backend's graphs use
 * it: work enqueued while a stream captures is recorded, not run; each launch of the graph
 * runs it again, reading what device memory holds then (a per-step scalar updated by a
 * copy before the launch), with no host synchronisation; and what capture forbids is
 * refused with the runtime's error and breaks the capture (cudaStreamEndCapture fails):
 * a stream or device synchronisation, cudaMalloc, a blocking cudaMemcpy, a copy with
 * pageable host memory, a query or host wait of an event recorded during capture; and
 * outside capture, a copy from pageable memory to the device counted as a host sync. */
#include <stdio.h>
#include <string.h>

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

/* x[i] = 2 x[i] + *add: the scalar read on the device at run time */
__global__ void twice_plus_k(float *x, const float *add, int n)
{
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        x[i] = 2.0f * x[i] + *add;
}

static void check_values(const float *x, const float *want, int n, const char *when)
{
    for (int i = 0; i < n; i++)
        CHECK(x[i] == want[i], "%s: x[%d] = %g, want %g", when, i, x[i], want[i]);
}

/* A graph of a kernel, a memset and a copy, replayed three times with the scalar changed
 * between launches. */
static void test_record_replay(cudaStream_t s)
{
    enum { N = 5 };
    float *x = NULL, *add = NULL, *y = NULL, *pinned = NULL, *values = NULL;
    CHECK(cudaMalloc((void **)&x, N * 4) == cudaSuccess && cudaMalloc((void **)&add, 4) ==
          cudaSuccess && cudaMalloc((void **)&y, N * 4) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMallocHost((void **)&pinned, N * 4) == cudaSuccess &&
          cudaMallocHost((void **)&values, 3 * 4) == cudaSuccess, "cudaMallocHost");
    float host[N] = { 1, 2, 3, 4, 5 }, add0 = 10;
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess, "copy x");
    CHECK(cudaMemcpy(add, &add0, 4, cudaMemcpyHostToDevice) == cudaSuccess, "copy add");
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin");
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CHECK(cudaStreamIsCapturing(s, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusActive,
          "the stream does not say it captures");
    LAUNCH(1, 32, 0, s, twice_plus_k)(x, (const float *)add, (int)N);
    CHECK(cudaMemsetAsync(y, 0, N * 4, s) == cudaSuccess, "memset node");
    CHECK(cudaMemcpyAsync(pinned, x, N * 4, cudaMemcpyDeviceToHost, s) == cudaSuccess,
          "copy node");
    float now[N];
    memcpy(now, x, sizeof now); /* device memory is host memory here */
    check_values(now, host, N, "during capture (nothing may run)");
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess && g, "end capture");
    CHECK(cudaStreamIsCapturing(s, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusNone,
          "the stream still captures");
    CHECK(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess && exec, "instantiate");
    memcpy(now, x, sizeof now);
    check_values(now, host, N, "after capture, before a launch");
    unsigned long long syncs = fgemu_host_syncs();
    float want[N];
    memcpy(want, host, sizeof want);
    const float adds[3] = { 10, -1, 0.5f };
    for (int launch = 0; launch < 3; launch++) {
        /* the per-launch value: a copy from page-locked memory into the fixed device
         * scalar (from pageable memory it would count as a host synchronisation) */
        values[launch] = adds[launch];
        CHECK(cudaMemcpyAsync(add, &values[launch], 4, cudaMemcpyHostToDevice, s) ==
              cudaSuccess, "scalar copy");
        CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", launch);
        for (int i = 0; i < N; i++)
            want[i] = 2.0f * want[i] + adds[launch];
        char when[32];
        snprintf(when, sizeof when, "launch %d", launch);
        memcpy(now, x, sizeof now);
        check_values(now, want, N, when);
        check_values(pinned, want, N, "the copy node's destination");
        for (int i = 0; i < N; i++)
            CHECK(y[i] == 0.0f, "the memset node: y[%d] = %g", i, y[i]);
        y[0] = 7; /* the next launch's memset must clear it again */
    }
    CHECK(fgemu_host_syncs() == syncs, "%llu host synchronisation(s) in 3 launches, want 0",
          fgemu_host_syncs() - syncs);
    CHECK(cudaGraphExecDestroy(exec) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess,
          "destroy");
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "a sync after the capture");
    cudaFree(x);
    cudaFree(add);
    cudaFree(y);
    cudaFreeHost(pinned);
    cudaFreeHost(values);
}

/* FGEMU_SYNC_LOG's copy_from_pageable: a cudaMemcpyAsync from pageable host memory to the
 * device may make the host wait for the stream on a real GPU (the driver stages it), so it
 * counts as one host synchronisation, whether its kind is HostToDevice or Default (the
 * backend's); from page-locked memory it does not; a blocking cudaMemcpy counts once. */
static void test_pageable_copy_counts(cudaStream_t s)
{
    float *d = NULL, *pinned = NULL, pageable[2] = { 1, 2 };
    CHECK(cudaMalloc((void **)&d, 8) == cudaSuccess &&
          cudaMallocHost((void **)&pinned, 8) == cudaSuccess, "allocations");
    unsigned long long before = fgemu_host_syncs();
    CHECK(cudaMemcpyAsync(d, pageable, 8, cudaMemcpyHostToDevice, s) == cudaSuccess, "H2D");
    CHECK(fgemu_host_syncs() == before + 1, "a pageable HostToDevice cudaMemcpyAsync counted "
          "%llu host synchronisation(s), want 1", fgemu_host_syncs() - before);
    before = fgemu_host_syncs();
    CHECK(cudaMemcpyAsync(d, pageable, 8, cudaMemcpyDefault, s) == cudaSuccess, "Default");
    CHECK(fgemu_host_syncs() == before + 1, "a pageable cudaMemcpyDefault to the device "
          "counted %llu, want 1", fgemu_host_syncs() - before);
    before = fgemu_host_syncs();
    CHECK(cudaMemcpyAsync(d, pinned, 8, cudaMemcpyDefault, s) == cudaSuccess &&
          cudaMemcpyAsync(d, pinned, 8, cudaMemcpyHostToDevice, s) == cudaSuccess, "pinned");
    CHECK(fgemu_host_syncs() == before, "page-locked copies to the device counted %llu, want "
          "0", fgemu_host_syncs() - before);
    before = fgemu_host_syncs();
    CHECK(cudaMemcpyAsync(pageable, d, 8, cudaMemcpyDefault, s) == cudaSuccess, "D2H");
    CHECK(fgemu_host_syncs() == before + 1, "a cudaMemcpyDefault from the device into pageable "
          "memory counted %llu, want 1 (copy_to_pageable)", fgemu_host_syncs() - before);
    before = fgemu_host_syncs();
    CHECK(cudaMemcpy(d, pageable, 8, cudaMemcpyHostToDevice) == cudaSuccess, "blocking");
    CHECK(fgemu_host_syncs() == before + 1, "a blocking cudaMemcpy counted %llu, want 1",
          fgemu_host_syncs() - before);
    cudaFree(d);
    cudaFreeHost(pinned);
}

/* Begins a capture of s in mode, runs what, and says what cudaStreamEndCapture answered. */
static cudaError_t end_of(cudaStream_t s)
{
    cudaGraph_t g = (cudaGraph_t)1;
    cudaError_t e = cudaStreamEndCapture(s, &g);
    CHECK(e == cudaSuccess || g == NULL, "a failed capture returned a graph");
    if (e == cudaSuccess)
        cudaGraphDestroy(g);
    return e;
}

static void test_refusals(cudaStream_t s)
{
    float *d = NULL;
    CHECK(cudaMalloc((void **)&d, 16) == cudaSuccess, "cudaMalloc");
    unsigned long long syncs = fgemu_host_syncs();

    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    CHECK(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported,
          "cudaStreamSynchronize during capture was not refused");
    CHECK(end_of(s) == cudaErrorStreamCaptureInvalidated, "a sync left the capture valid");
    CHECK(fgemu_host_syncs() == syncs, "a refused sync was counted");

    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    CHECK(cudaDeviceSynchronize() == cudaErrorStreamCaptureUnsupported,
          "cudaDeviceSynchronize during capture was not refused");
    CHECK(end_of(s) == cudaErrorStreamCaptureInvalidated, "a device sync left it valid");

    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    void *p = NULL;
    CHECK(cudaMalloc(&p, 64) == cudaErrorStreamCaptureUnsupported && !p,
          "cudaMalloc during a global capture was not refused");
    CHECK(end_of(s) == cudaErrorStreamCaptureInvalidated, "cudaMalloc left it valid");

    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    float h = 0;
    CHECK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost) == cudaErrorStreamCaptureImplicit,
          "a blocking cudaMemcpy during capture was not refused");
    CHECK(end_of(s) == cudaErrorStreamCaptureInvalidated, "a blocking copy left it valid");

    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    CHECK(cudaMemcpyAsync(&h, d, 4, cudaMemcpyDeviceToHost, s) ==
          cudaErrorStreamCaptureUnsupported, "a copy into pageable memory was captured");
    CHECK(end_of(s) == cudaErrorStreamCaptureInvalidated, "a pageable copy left it valid");

    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    CHECK(cudaEventRecord(e, s) == cudaSuccess, "an event record in a capture");
    CHECK(cudaEventQuery(e) == cudaErrorCapturedEvent, "a captured event was queried");
    CHECK(cudaEventSynchronize(e) == cudaErrorCapturedEvent, "a captured event was waited on");
    CHECK(end_of(s) == cudaSuccess, "a captured event record broke the capture");
    CHECK(cudaEventRecord(e, s) == cudaSuccess && cudaEventQuery(e) == cudaSuccess,
          "an event recorded again outside capture is not queryable");
    cudaEventDestroy(e);
    CHECK(cudaStreamEndCapture(s, (cudaGraph_t *)&p) == cudaErrorIllegalState,
          "an end without a begin was accepted");
    CHECK(fgemu_host_syncs() == syncs, "refused calls were counted as host syncs");
    (void)cudaGetLastError();
    cudaFree(d);
}

int main(void)
{
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        printf("FAIL: stream\n");
        return 1;
    }
    test_record_replay(s);
    test_refusals(s);
    test_pageable_copy_counts(s);
    cudaStreamDestroy(s);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("cudaemu capture test: all checks passed\n");
    return 0;
}
