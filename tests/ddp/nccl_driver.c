/* Drives fulgur-comm-nccl.so through its ABI.
 *   nccl_driver PLUGIN.so no_device     without a usable GPU: init must answer FG_UNAVAILABLE
 *                                       "no CUDA device/driver"; exit 77 (skip) with a GPU
 *   mpirun -n 2 nccl_driver PLUGIN.so collectives
 *                                       with 2 GPUs a node: every collective on device memory
 *                                       (stream-ordered and not), host buffers, started
 *                                       all-reduces, then rank 1 skips one all_reduce and rank
 *                                       0's watchdog must abort naming it; exit 77 without 2 GPUs
 * Exit 0 when every check holds. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fake_host.h"
#include "fulgur/comm.h"
#include "plugin_load.h"

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v ? atoi(v) : fallback;
}

static void fill(float *dev, int n, float base)
{
    float host[64];
    for (int i = 0; i < n; i++) host[i] = base + (float)i;
    cudaMemcpy(dev, host, (size_t)n * sizeof(float), cudaMemcpyHostToDevice);
}

static float at(const float *dev, int i)
{
    float x = 0;
    cudaMemcpy(&x, dev + i, sizeof x, cudaMemcpyDeviceToHost);
    return x;
}

static void collectives(const fg_comm_vtable *vt, void *s, int rank, int size)
{
    cudaStream_t q;
    cudaStreamCreate(&q);
    float *a, *b;
    cudaMalloc((void **)&a, 64 * sizeof(float));
    cudaMalloc((void **)&b, 64 * sizeof(float));
    /* all_reduce: sum stream-ordered, avg and max completed */
    fill(a, 8, (float)rank);
    CHECK_OK(vt->all_reduce(s, q, a, 8, FG_F32, FG_REDUCE_SUM, &fg_test_err));
    cudaStreamSynchronize(q);
    CHECK(at(a, 3) == 2 * 3 + 1, "sum: %g", at(a, 3));
    fill(a, 8, (float)rank);
    CHECK_OK(vt->all_reduce(s, NULL, a, 8, FG_F32, FG_REDUCE_AVG, &fg_test_err));
    CHECK(at(a, 0) == 0.5f, "avg: %g", at(a, 0));
    fill(a, 8, (float)rank);
    CHECK_OK(vt->all_reduce(s, NULL, a, 8, FG_F32, FG_REDUCE_MAX, &fg_test_err));
    CHECK(at(a, 2) == 3, "max: %g", at(a, 2));
    /* a host buffer (staged), as strategy.ddp passes metric sums */
    double h[3] = {rank + 1.0, 2.0, 3.0};
    CHECK_OK(vt->all_reduce(s, NULL, h, 3, FG_F64, FG_REDUCE_SUM, &fg_test_err));
    CHECK(h[0] == 3 && h[2] == 6, "host all_reduce: %g %g", h[0], h[2]);
    /* broadcast from rank 1 */
    fill(a, 4, (float)(10 * rank));
    CHECK_OK(vt->broadcast(s, NULL, a, 4, FG_F32, 1, &fg_test_err));
    CHECK(at(a, 1) == 11, "broadcast: %g", at(a, 1));
    /* all_gather: block r from rank r */
    fill(a, 2, (float)(100 * rank));
    CHECK_OK(vt->all_gather(s, NULL, a, b, 2, FG_F32, &fg_test_err));
    CHECK(at(b, 0) == 0 && at(b, 2) == 100 && at(b, 3) == 101, "all_gather: %g %g", at(b, 2), at(b, 3));
    /* reduce_scatter: rank r gets block r summed */
    fill(a, 4, 1.0f);
    CHECK_OK(vt->reduce_scatter(s, NULL, a, b, 2, FG_F32, FG_REDUCE_SUM, &fg_test_err));
    CHECK(at(b, 0) == 2 * (1 + 2 * rank), "reduce_scatter: %g", at(b, 0));
    /* send/recv */
    fill(a, 4, 7.0f);
    if (rank == 0) CHECK_OK(vt->send(s, NULL, a, 4, FG_F32, 1, &fg_test_err));
    else CHECK_OK(vt->recv(s, NULL, b, 4, FG_F32, 0, &fg_test_err));
    if (rank == 1) CHECK(at(b, 3) == 10, "recv: %g", at(b, 3));
    CHECK_OK(vt->barrier(s, &fg_test_err));
    /* started all-reduce, tested then waited */
    void *req = NULL;
    fill(a, 8, 1.0f);
    CHECK_OK(vt->all_reduce_start(s, q, a, 8, FG_F32, FG_REDUCE_SUM, &req, &fg_test_err));
    int done = 0;
    CHECK_OK(vt->test(s, req, &done, &fg_test_err));
    CHECK_OK(vt->wait(s, req, &fg_test_err));
    CHECK(at(a, 7) == 16, "started all_reduce: %g", at(a, 7));
    /* the watchdog: rank 1 skips one all_reduce; rank 0 must time out naming it */
    if (rank == 0) {
        fg_error e = {0};
        fg_status st = vt->all_reduce(s, NULL, a, 8, FG_F32, FG_REDUCE_SUM, &e);
        CHECK(st == FG_FATAL && strstr(e.message, "all_reduce of 8 f32 values (collective #") &&
                  strstr(e.message, "timed out after 2 s"),
              "want a timeout naming the all_reduce, got %s: %s", fg_status_name(st), e.message);
        if (st == FG_FATAL) printf("rank 0: %s\n", e.message);
    } else {
        sleep(6);
    }
    cudaFree(a);
    cudaFree(b);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: nccl_driver PLUGIN.so no_device|collectives\n");
        return 2;
    }
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
    int no_device = strcmp(argv[2], "no_device") == 0;
    if (no_device && gpus > 0) {
        printf("SKIP: %d GPU(s) here; this test is for machines without one\n", gpus);
        return 77;
    }
    if (!no_device && gpus < 2) {
        printf("SKIP: comm.nccl collectives need 2 GPUs on the node (found %d)\n", gpus);
        return 77;
    }
    const fg_plugin *p = fg_test_load_plugin(argv[1], FG_KIND_COMM, "nccl");
    if (!p) return 1;
    fg_fake_host host;
    fg_fake_host_init(&host, p, NULL);
    fg_fake_host_set(&host, "timeout_s", "2");
    void *state = NULL;
    fg_error e = {0};
    fg_status st = p->init(&host.host, &state, &e);
    if (no_device) {
        CHECK(st == FG_UNAVAILABLE && strstr(e.message, "comm.nccl: no CUDA device/driver"),
              "init without a GPU: %s: %s", fg_status_name(st), e.message);
        if (!fg_test_failures) printf("ok: loaded without a driver; init says: %s\n", e.message);
        return fg_test_failures ? 1 : 0;
    }
    if (st != FG_OK) {
        fprintf(stderr, "FAIL: init: %s: %s\n", fg_status_name(st), e.message);
        return 1;
    }
    const fg_comm_vtable *vt = p->vtable;
    fg_comm_topology t = {sizeof t, 0, 0, 0, 0, 0, 0};
    vt->topology(state, &t, &e);
    cudaSetDevice(t.local_rank % gpus);
    collectives(vt, state, t.rank, t.world_size);
    p->deinit(state);
    if (!fg_test_failures)
        printf("rank %d: every nccl collective checked\n", env_int("OMPI_COMM_WORLD_RANK", t.rank));
    return fg_test_failures ? 1 : 0;
}
