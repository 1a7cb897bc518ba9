/* fulgur-comm-mpi.so: the descriptor, options, init/deinit and the topology.
 *
 * init starts MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED) unless the embedding program
 * already did, in which case MPI stays the program's to finalize. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi_collectives.h"
#include "mpi_half.h"
#include "mpi_launcher.h"
#include "mpi_staged.h"

static const fg_option options[] = {
    {"timeout_s", FG_OPT_FLOAT, "600", 1e-3, 1e9, NULL,
     "seconds a collective may wait for the other ranks before the job is aborted, naming "
     "the ranks that did not arrive"},
    {"stage_device_buffers", FG_OPT_ENUM, "auto", 0, 0, "auto|true|false",
     "copy buffers through pinned host memory of the backend around each collective (device "
     "memory over MPI); auto: when [backend] name is not cpu"},
};

/* Open MPI loads its components with dlopen, and some of them (pml ob1, ...) resolve
 * libmpi's symbols from the global namespace. The host opened this plugin RTLD_LOCAL, so
 * libmpi came in local too: promote the already-loaded library to RTLD_GLOBAL before
 * MPI_Init, or component loading fails with "undefined symbol". */
static void make_libmpi_global(void)
{
    Dl_info info;
    if (dladdr((void *)MPI_Init_thread, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

static fg_status start_mpi(fg_mpi_comm *c, fg_error *err)
{
    int started = 0, provided = 0, rc;
    if ((rc = MPI_Initialized(&started)) != MPI_SUCCESS) return fg_mpi_fail(rc, "MPI_Initialized", err);
    if (started) {
        rc = MPI_Query_thread(&provided);
        if (rc != MPI_SUCCESS) return fg_mpi_fail(rc, "MPI_Query_thread", err);
    } else {
        make_libmpi_global();
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return fg_mpi_fail(rc, "MPI_Init_thread", err);
        c->owns_mpi = 1;
    }
    if (provided < MPI_THREAD_SERIALIZED)
        return fg_error_set(err, FG_UNAVAILABLE, "comm.mpi: MPI provides thread level %d, "
                            "fulgur needs MPI_THREAD_SERIALIZED (%d) or better", provided,
                            MPI_THREAD_SERIALIZED);
    return FG_OK;
}

/* Rank and size, then local rank/size from the shared-memory split, then the node index:
 * the rank of this node's local rank 0 among all local ranks 0. These setup calls are
 * blocking MPI; the launcher bounds a start-up that never completes. */
static fg_status find_topology(fg_mpi_comm *c, fg_error *err)
{
    int rc;
    MPI_Comm local = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->world)) != MPI_SUCCESS) return fg_mpi_fail(rc, "MPI_Comm_dup", err);
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->diag)) != MPI_SUCCESS) return fg_mpi_fail(rc, "MPI_Comm_dup", err);
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(c->diag, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->world, &c->rank);
    MPI_Comm_size(c->world, &c->size);
    rc = MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
    if (rc != MPI_SUCCESS) return fg_mpi_fail(rc, "MPI_Comm_split_type", err);
    MPI_Comm_rank(local, &c->local_rank);
    MPI_Comm_size(local, &c->local_size);
    rc = MPI_Comm_split(c->world, c->local_rank == 0 ? 0 : MPI_UNDEFINED, c->rank, &leaders);
    int node[2] = {0, 1};
    if (rc == MPI_SUCCESS && leaders != MPI_COMM_NULL) {
        MPI_Comm_rank(leaders, &node[0]);
        MPI_Comm_size(leaders, &node[1]);
        MPI_Comm_free(&leaders);
    }
    if (rc == MPI_SUCCESS) rc = MPI_Bcast(node, 2, MPI_INT, 0, local);
    MPI_Comm_free(&local);
    if (rc != MPI_SUCCESS) return fg_mpi_fail(rc, "the node split (MPI_Comm_split/MPI_Bcast)", err);
    c->node = node[0];
    c->node_count = node[1];
    return FG_OK;
}

static fg_status mpi_topology(void *state, fg_comm_topology *out, fg_error *err);

static void mpi_deinit(void *state)
{
    fg_mpi_comm *c = state;
    if (!c) return;
    fg_mpi_staging_deinit(c);
    if (c->world != MPI_COMM_NULL) MPI_Comm_free(&c->world);
    if (c->diag != MPI_COMM_NULL) MPI_Comm_free(&c->diag);
    fg_mpi_half_release();
    if (c->owns_mpi) MPI_Finalize();
    free(c);
}

static fg_status mpi_init(const fg_host *host, void **state, fg_error *err)
{
    fg_mpi_comm *c = calloc(1, sizeof *c);
    if (!c) return fg_error_set(err, FG_OUT_OF_MEMORY, "comm.mpi: out of memory");
    c->host = host;
    c->world = c->diag = MPI_COMM_NULL;
    c->timeout_s = 600;
    if (host->get_float(host, "timeout_s", &c->timeout_s) != FG_OK || !(c->timeout_s > 0)) {
        free(c);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] timeout_s must be a number > 0",
                            host->section);
    }
    fg_status st = start_mpi(c, err);
    if (st == FG_OK) st = find_topology(c, err);
    fg_comm_topology topo = {sizeof topo, 0, 0, 0, 0, 0, 0};
    char launcher[512];
    if (st == FG_OK) st = mpi_topology(c, &topo, err);
    if (st == FG_OK)
        st = fg_mpi_check_launcher(c->world, &topo, "comm.mpi", launcher, sizeof launcher, err);
    if (st == FG_OK) st = fg_mpi_staging_init(c, err);
    if (st != FG_OK) {
        mpi_deinit(c);
        return st;
    }
    host->log(host, FG_LOG_DEBUG, "rank %d of %d, local rank %d of %d, node %d of %d, "
              "timeout %g s; launcher: %s", c->rank, c->size, c->local_rank, c->local_size,
              c->node, c->node_count, c->timeout_s, launcher);
    *state = c;
    return FG_OK;
}

static fg_status mpi_topology(void *state, fg_comm_topology *out, fg_error *err)
{
    const fg_mpi_comm *c = state;
    if (!out) return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.mpi: topology: out is NULL");
    out->rank = c->rank;
    out->world_size = c->size;
    out->local_rank = c->local_rank;
    out->local_size = c->local_size;
    out->node = c->node;
    out->node_count = c->node_count;
    return FG_OK;
}

static void mpi_abort(void *state, int exit_code, const char *reason)
{
    fg_mpi_comm *c = state;
    fprintf(stderr, "fulgur: rank %d of %d failed, ending the job: %s\n", c->rank, c->size,
            reason);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
}

static const fg_comm_vtable vtable = {
    .struct_size = sizeof(fg_comm_vtable),
    .topology = mpi_topology,
    .all_reduce = fg_mpi_staged_all_reduce,
    .reduce_scatter = fg_mpi_staged_reduce_scatter,
    .all_gather = fg_mpi_staged_all_gather,
    .broadcast = fg_mpi_staged_broadcast,
    .send = fg_mpi_staged_send,
    .recv = fg_mpi_staged_recv,
    .barrier = fg_mpi_barrier,
    .all_reduce_start = fg_mpi_staged_all_reduce_start,
    .test = fg_mpi_test,
    .wait = fg_mpi_wait,
    .reduce_scatter_v_start = fg_mpi_staged_reduce_scatter_v_start,
    .all_gather_v_start = fg_mpi_staged_all_gather_v_start,
    .abort = mpi_abort,
};

FG_PLUGIN_EXPORT const fg_plugin FG_PLUGIN_ENTRY = {
    FG_PLUGIN_HEADER(FG_KIND_COMM, 0),
    .name = "mpi",
    .version = "1.0.0",
    .description = "collectives on host memory over MPI (also the bootstrap), with timeouts",
    FG_PLUGIN_OPTIONS(options),
    .init = mpi_init,
    .deinit = mpi_deinit,
    .vtable = &vtable,
};
