/* fulgur-comm-nccl.so: collectives on device memory over NCCL, bootstrapped over MPI.
 *
 * init: a CUDA device must be there (cudaGetDeviceCount; without a driver or device the
 * plugin answers FG_UNAVAILABLE before touching MPI), then MPI starts (as comm.mpi does),
 * the topology is found and checked against the launcher's variables, the rank's device
 * is local rank modulo the device count (or `device`), rank 0's ncclUniqueId goes to every
 * rank by MPI_Bcast, and ncclCommInitRankConfig (non-blocking) completes within timeout_s
 * or is aborted. cudart is linked statically: nothing but libnccl and MPI is needed at
 * load time, and a machine without a driver loads the plugin and is told why it cannot run. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_topology.h"
#include "mpi_bootstrap.h"
#include "mpi_launcher.h"
#include "nccl_comm.h"

static const fg_option options[] = {
    {"timeout_s", FG_OPT_FLOAT, "600", 1e-3, 1e9, NULL,
     "seconds an operation may run before the watchdog aborts the communicator, naming it"},
    {"device", FG_OPT_INT, "-1", -1, 4096, NULL,
     "CUDA device of this rank; -1: local rank modulo the device count"},
};

double nccl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

fg_status nccl_cuda_fail(cudaError_t e, const char *call, fg_error *err)
{
    return fg_error_set(err, FG_BACKEND_ERROR, "comm.nccl: %s: %s (%s)", call,
                        cudaGetErrorString(e), cudaGetErrorName(e));
}

fg_status nccl_fail(nccl_state *s, ncclResult_t r, const char *call, fg_error *err)
{
    if (s->aborted) return fg_error_set(err, FG_FATAL, "%s", s->abort_message);
    char last[256];
    nccl_last_error(s, last, sizeof last);
    return fg_error_set(err, r == ncclSystemError || r == ncclRemoteError ? FG_FATAL
                                                                          : FG_BACKEND_ERROR,
                        "comm.nccl: rank %d: %s: %s (%s)", s->topo.rank, call,
                        ncclGetErrorString(r), last);
}

/* A non-blocking communicator answers ncclInProgress until the call has been issued. */
ncclResult_t nccl_settle(nccl_state *s, ncclResult_t r)
{
    double deadline = nccl_now() + s->timeout_s;
    while (r == ncclInProgress && !s->aborted) {
        if (nccl_async_error(s, &r) != ncclSuccess) break;
        if (r == ncclInProgress && nccl_now() > deadline) {
            nccl_abort(s, "comm.nccl: rank %d: an NCCL call did not complete within %g s; "
                       "communicator aborted", s->topo.rank, s->timeout_s);
            return ncclInternalError;
        }
    }
    return s->aborted ? ncclInternalError : r;
}

/* The world communicator (a duplicate of MPI_COMM_WORLD) and its topology. */
static fg_status find_topology(nccl_state *s, fg_error *err)
{
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &s->world);
    if (rc != MPI_SUCCESS) return fg_mpi_error(FG_FATAL, "comm.nccl", "MPI_Comm_dup", rc, err);
    s->topo.struct_size = sizeof s->topo;
    return fg_mpi_find_topology(s->world, &s->topo, "comm.nccl", err);
}

/* Rank 0's unique id to every rank, then a non-blocking init bounded by timeout_s. */
static fg_status create_group(nccl_state *s, fg_error *err)
{
    nccl_group *g = &s->world_group;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = s->topo.rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    int ok = r == ncclSuccess, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, s->world);
    if (!all_ok)
        return fg_error_set(err, FG_BACKEND_ERROR, "comm.nccl: ncclGetUniqueId on rank 0 failed%s%s",
                            r != ncclSuccess ? ": " : "", r != ncclSuccess ? ncclGetErrorString(r) : "");
    if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, s->world) != MPI_SUCCESS)
        return fg_error_set(err, FG_INTERNAL, "comm.nccl: MPI_Bcast of the NCCL unique id failed");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    g->rank = s->topo.rank;
    g->size = s->topo.world_size;
    r = ncclCommInitRankConfig(&g->comm, g->size, id, g->rank, &config);
    if (r == ncclInProgress) r = nccl_settle(s, r);
    if (r != ncclSuccess)
        return fg_error_set(err, FG_FATAL, "comm.nccl: rank %d: ncclCommInitRankConfig over %d "
                            "ranks: %s%s", g->rank, g->size, ncclGetErrorString(r),
                            s->aborted ? " (timed out)" : "");
    for (int i = 0; i < NCCL_RING; i++) {
        cudaError_t e = cudaEventCreateWithFlags(&g->ring[i].done, cudaEventDisableTiming);
        if (e != cudaSuccess) return nccl_cuda_fail(e, "cudaEventCreate", err);
    }
    return FG_OK;
}

static void nccl_deinit(void *state)
{
    nccl_state *s = state;
    if (!s) return;
    nccl_watchdog_stop(s);
    nccl_group *g = &s->world_group;
    if (g->comm && !s->aborted) { /* the watchdog is stopped: this thread is alone */
        pthread_mutex_lock(&s->call_lock);
        ncclResult_t r = ncclCommFinalize(g->comm);
        pthread_mutex_unlock(&s->call_lock);
        r = nccl_settle(s, r);
        pthread_mutex_lock(&s->call_lock);
        if (g->comm && r != ncclSuccess) ncclCommAbort(g->comm);
        else if (g->comm) ncclCommDestroy(g->comm);
        g->comm = NULL;
        pthread_mutex_unlock(&s->call_lock);
    }
    g->comm = NULL;
    for (int i = 0; i < NCCL_RING; i++)
        if (g->ring[i].done) cudaEventDestroy(g->ring[i].done);
    if (s->scratch) cudaFree(s->scratch);
    if (s->ordered) cudaEventDestroy(s->ordered);
    if (s->stream) cudaStreamDestroy(s->stream);
    if (s->world != MPI_COMM_NULL) MPI_Comm_free(&s->world);
    if (s->owns_mpi) MPI_Finalize();
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->call_lock);
    free(s);
}

static fg_status pick_device(nccl_state *s, int count, int64_t device, fg_error *err)
{
    if (device >= count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] device = %lld, but this node has %d "
                            "CUDA device(s)", s->host->section, (long long)device, count);
    s->device = device >= 0 ? (int)device : s->topo.local_rank % count;
    cudaError_t e = cudaSetDevice(s->device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->ordered, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaMalloc(&s->scratch, NCCL_SCRATCH_BYTES);
    return e == cudaSuccess ? FG_OK : nccl_cuda_fail(e, "setting up the device", err);
}

static fg_status nccl_init(const fg_host *host, void **state, fg_error *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1)
        return fg_error_set(err, FG_UNAVAILABLE, "comm.nccl: no CUDA device/driver (%s)",
                            e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    nccl_state *s = calloc(1, sizeof *s);
    if (!s) return fg_error_set(err, FG_OUT_OF_MEMORY, "comm.nccl: out of memory");
    s->host = host;
    s->world = MPI_COMM_NULL;
    s->timeout_s = 600;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->call_lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    int64_t device = -1;
    host->get_float(host, "timeout_s", &s->timeout_s);
    host->get_int(host, "device", &device);
    char launcher[512];
    fg_status st = s->timeout_s > 0 ? fg_mpi_start("comm.nccl", &s->owns_mpi, err)
                                    : fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] timeout_s must "
                                                   "be > 0", host->section);
    if (st == FG_OK) st = find_topology(s, err);
    if (st == FG_OK)
        st = fg_mpi_check_launcher(s->world, &s->topo, "comm.nccl", launcher, sizeof launcher, err);
    if (st == FG_OK) st = pick_device(s, count, device, err);
    if (st == FG_OK) st = create_group(s, err);
    if (st == FG_OK) st = nccl_watchdog_start(s, err);
    if (st != FG_OK) {
        nccl_deinit(s);
        return st;
    }
    int version = 0;
    ncclGetVersion(&version);
    host->log(host, FG_LOG_DEBUG, "rank %d of %d on CUDA device %d (local rank %d of %d, node %d "
              "of %d), NCCL %d, timeout %g s; launcher: %s", s->topo.rank, s->topo.world_size,
              s->device, s->topo.local_rank, s->topo.local_size, s->topo.node, s->topo.node_count,
              version, s->timeout_s, launcher);
    *state = s;
    return FG_OK;
}

static fg_status nccl_topology(void *state, fg_comm_topology *out, fg_error *err)
{
    return fg_plugin_topology_copy(&((const nccl_state *)state)->topo, out, "comm.nccl", err);
}

/* reduce_scatter_v_start / all_gather_v_start (uneven shards) are not offered: NULL. */
FG_PLUGIN_DEFINE_VTABLE(fg_comm_vtable, FG_KIND_COMM, 0, "nccl", "1.0.0",
                        "collectives on CUDA device memory over NCCL (bootstrapped over MPI), with "
                        "a watchdog that aborts a timed-out communicator",
                        FG_PLUGIN_OPTIONS(options), nccl_init, nccl_deinit,
                        .topology = nccl_topology, .all_reduce = nccl_all_reduce,
                        .reduce_scatter = nccl_reduce_scatter, .all_gather = nccl_all_gather,
                        .broadcast = nccl_broadcast, .send = nccl_send, .recv = nccl_recv,
                        .barrier = nccl_barrier, .all_reduce_start = nccl_all_reduce_start,
                        .test = nccl_test, .wait = nccl_wait, .wait_on_queue = nccl_wait_on_queue);
