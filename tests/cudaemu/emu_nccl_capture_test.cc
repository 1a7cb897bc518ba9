/* NCCL under stream capture on the emulated device, on 2 ranks (processes): the pattern
 * comm.nccl's started collectives use, captured once and replayed. The compute stream s
 * forks the communicator's stream t (an event recorded in the capture, t waits on it), t
 * runs ncclAllReduce, s joins it back (an event recorded on t after the all-reduce) and
 * copies the sum on. Asserts: the capture ends with a graph and runs nothing; each of 3
 * launches, with new inputs copied from page-locked memory before it, gives the sum worked
 * by hand and the uncaptured run's bytes, and adds no host synchronisation; a fork never
 * joined back fails the capture (cudaErrorStreamCaptureUnjoined), ending it on the forked
 * stream is refused (cudaErrorStreamCaptureUnmatched). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "emu_api.h"

enum { N = 1000, LAUNCHES = 3 };

static int failures;
static int g_rank;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stdout, "FAIL rank %d %s:%d: ", g_rank, __FILE__, __LINE__);           \
            fprintf(stdout, __VA_ARGS__);                                                  \
            fprintf(stdout, "\n");                                                         \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

typedef struct rank_state {
    ncclComm_t comm;
    cudaStream_t s, t;
    cudaEvent_t fork_ev, join_ev;
    float *x, *y, *z, *inputs; /* inputs: page-locked */
} rank_state;

/* rank r's input of launch k: exact in f32, as is the sum over 2 ranks */
static float input(int r, int k, int i) { return (float)((r + 1) * (i + 1)) + 0.25f * (float)k; }

/* s forks t, t all-reduces x into y, s joins t and copies y to z */
static void enqueue_step(rank_state *st, int join)
{
    CHECK(cudaEventRecord(st->fork_ev, st->s) == cudaSuccess, "record fork");
    CHECK(cudaStreamWaitEvent(st->t, st->fork_ev, 0) == cudaSuccess, "fork wait");
    CHECK(ncclAllReduce(st->x, st->y, N, ncclFloat, ncclSum, st->comm, st->t) == ncclSuccess,
          "ncclAllReduce");
    if (!join)
        return;
    CHECK(cudaEventRecord(st->join_ev, st->t) == cudaSuccess, "record join");
    CHECK(cudaStreamWaitEvent(st->s, st->join_ev, 0) == cudaSuccess, "join wait");
    CHECK(cudaMemcpyAsync(st->z, st->y, N * sizeof(float), cudaMemcpyDeviceToDevice, st->s) ==
              cudaSuccess, "copy y -> z");
}

static void upload(rank_state *st, int k)
{
    for (int i = 0; i < N; i++)
        st->inputs[(k % 2) * N + i] = input(g_rank, k, i);
    CHECK(cudaMemcpyAsync(st->x, st->inputs + (k % 2) * N, N * sizeof(float),
                          cudaMemcpyHostToDevice, st->s) == cudaSuccess, "upload");
}

static void read_z(rank_state *st, float *out)
{
    CHECK(cudaStreamSynchronize(st->s) == cudaSuccess, "sync");
    CHECK(cudaMemcpy(out, st->z, N * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess,
          "read z");
}

static void test_replay(rank_state *st)
{
    float *ref = (float *)malloc(LAUNCHES * N * sizeof(float));
    float now[N];
    for (int k = 0; k < LAUNCHES; k++) { /* the uncaptured steps */
        upload(st, k);
        enqueue_step(st, 1);
        read_z(st, ref + k * N);
    }
    float poison[N];
    for (int i = 0; i < N; i++)
        poison[i] = -7.0f;
    CHECK(cudaMemcpy(st->z, poison, sizeof poison, cudaMemcpyHostToDevice) == cudaSuccess,
          "poison z");
    CHECK(cudaStreamBeginCapture(st->s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
          "begin capture");
    enqueue_step(st, 1);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CHECK(cudaStreamIsCapturing(st->t, &cs) == cudaSuccess &&
              cs == cudaStreamCaptureStatusActive, "the forked stream does not capture");
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamEndCapture(st->s, &g) == cudaSuccess && g, "end capture");
    CHECK(cudaStreamIsCapturing(st->t, &cs) == cudaSuccess &&
              cs == cudaStreamCaptureStatusNone, "the forked stream still captures");
    CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
    read_z(st, now);
    CHECK(memcmp(now, poison, sizeof now) == 0, "the capture ran work (z[0] = %g)", now[0]);
    for (int k = 0; k < LAUNCHES && exec; k++) {
        upload(st, k);
        unsigned long long before = fgemu_host_syncs();
        CHECK(cudaGraphLaunch(exec, st->s) == cudaSuccess, "launch %d", k);
        CHECK(fgemu_host_syncs() == before, "launch %d: %llu host synchronisation(s), want 0",
              k, fgemu_host_syncs() - before);
        read_z(st, now);
        int bad = 0;
        for (int i = 0; i < N && bad < 3; i++)
            if (now[i] != input(0, k, i) + input(1, k, i)) {
                CHECK(0, "launch %d: z[%d] = %g, want %g", k, i, now[i],
                      input(0, k, i) + input(1, k, i));
                bad++;
            }
        CHECK(memcmp(now, ref + k * N, sizeof now) == 0, "launch %d: not the uncaptured bytes",
              k);
    }
    if (exec)
        cudaGraphExecDestroy(exec);
    if (g)
        cudaGraphDestroy(g);
    free(ref);
}

static void test_refusals(rank_state *st)
{
    cudaGraph_t g = NULL;
    CHECK(cudaStreamBeginCapture(st->s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
          "begin capture");
    enqueue_step(st, 0); /* t forked, never joined back */
    CHECK(cudaStreamEndCapture(st->t, &g) == cudaErrorStreamCaptureUnmatched && !g,
          "ending the capture on the forked stream was not refused");
    CHECK(cudaStreamEndCapture(st->s, &g) != cudaSuccess && !g,
          "a capture invalidated by a wrong end still gave a graph");
    CHECK(cudaStreamBeginCapture(st->s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
          "begin capture again");
    enqueue_step(st, 0);
    CHECK(cudaStreamEndCapture(st->s, &g) == cudaErrorStreamCaptureUnjoined && !g,
          "a fork never joined back was not refused");
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusActive;
    CHECK(cudaStreamIsCapturing(st->t, &cs) == cudaSuccess &&
              cs == cudaStreamCaptureStatusNone, "the forked stream still captures");
    (void)cudaGetLastError();
}

static int run_rank(int rank, ncclUniqueId id)
{
    g_rank = rank;
    rank_state st;
    memset(&st, 0, sizeof st);
    CHECK(cudaSetDevice(rank) == cudaSuccess, "cudaSetDevice(%d)", rank);
    CHECK(ncclCommInitRankConfig(&st.comm, 2, id, rank, NULL) == ncclSuccess,
          "ncclCommInitRankConfig (blocking)");
    CHECK(cudaStreamCreateWithFlags(&st.s, cudaStreamNonBlocking) == cudaSuccess &&
              cudaStreamCreateWithFlags(&st.t, cudaStreamNonBlocking) == cudaSuccess &&
              cudaEventCreateWithFlags(&st.fork_ev, cudaEventDisableTiming) == cudaSuccess &&
              cudaEventCreateWithFlags(&st.join_ev, cudaEventDisableTiming) == cudaSuccess,
          "streams and events");
    CHECK(cudaMalloc((void **)&st.x, N * 4) == cudaSuccess &&
              cudaMalloc((void **)&st.y, N * 4) == cudaSuccess &&
              cudaMalloc((void **)&st.z, N * 4) == cudaSuccess &&
              cudaMallocHost((void **)&st.inputs, 2 * N * 4) == cudaSuccess, "allocations");
    if (!failures)
        test_replay(&st);
    if (!failures)
        test_refusals(&st);
    if (st.comm)
        ncclCommDestroy(st.comm);
    printf("rank %d: %s\n", rank, failures ? "FAILED" : "all checks passed");
    fflush(stdout);
    return failures ? 1 : 0;
}

int main(void)
{
    setenv("FGEMU_DEVICES", "2", 1);
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) {
        printf("FAIL: ncclGetUniqueId\n");
        return 1;
    }
    fflush(stdout);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            _exit(run_rank(r, id));
        if (pids[r] < 0) {
            printf("FAIL: fork\n");
            return 1;
        }
    }
    int bad = 0;
    for (int r = 0; r < 2; r++) {
        int status = 0;
        if (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            printf("FAIL: rank %d (status %d)\n", r, status);
            bad = 1;
        }
    }
    if (!bad)
        printf("cudaemu NCCL capture test: both ranks passed\n");
    return bad;
}
